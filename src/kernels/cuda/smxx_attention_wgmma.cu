// The bf16 mode on Hopper's warpgroup MMA, for shapes where many queries share few kv
// rows (a prefill chunk: 8192 queries x ~640 entries over ~12K pool rows). The kv rows
// are first rounded to bf16 once into a scratch copy (rows padded to 512 channels with
// zeros), so the gather moves 1 KB per entry instead of 2 KB of fp32, straight into the
// tile the MMAs read: no fp32 staging buffer and no rounding pass per block.
//
// Why (bench/flash/NOTES.md §10 and §15): the mma.sync kernel spends ~12K clocks per
// 32-entry tile for ~1000 clocks of tensor work: 2 warps per scheduler at 240 registers
// wait out every dependent QK k-step, the rounding pass and the id loads run with no
// MMA in flight, and one cp.async stage ahead leaves the L2 latency exposed.
//
// Block: one query, 64 heads, 2 warpgroups; warpgroup d owns channels 256 d .. + 255 in
// both products and warp w of it the heads 16 w .. + 15 (the mma.sync kernel's warps
// w and w + 4, so the same softmax code and the same partner exchange run unchanged).
// Per tile of 32 entries, through a kStages-deep cp.async ring of bf16 tiles in the
// 128-byte-swizzled layout (64-channel slabs of 32 rows x 128 bytes):
//   QK: S = Q K^T over the warpgroup's 256 channels as two chains of 8 m64n32k16 (A = q
//       from shared memory, K-major; B = the tile, K-major), from zero, summed in fp32;
//   the partner exchange and the online softmax (base 2, integer max) as before;
//   PV: O[64 x 256] += P V as 2 k-steps x 2 m64n128k16 (A = P from registers, the
//       mma.sync A fragment; B = the same tile read N-major: 8-entry groups 1024 bytes
//       apart (SBO), 64-channel slabs 4096 bytes apart (LBO)).
// The same products, chains and summation order as mqa_attention_tc_kernel, so the two
// kernels give the same bits when the k16 step of wgmma rounds as mma.sync's (op case
// sink_attention_bf16_wgmma_vs_mma checks it).
#include <algorithm>
#include <climits>

#include "kernels/cuda/smxx_attention_common.cuh"
#include "kernels/cuda/smxx_device.h"
#include "kernels/cuda/smxx_wgmma.cuh"

namespace deepinfer::kernels::attn::wg {
namespace {

constexpr int kHeads = 64, kTileE = 32, kWarps = 8, kThreads = kWarps * 32;
constexpr int kDim = int(kAttnMaxDim);          // channels of a bf16 row (zeros past dim)
constexpr int kPieces = kDim / 8;               // 16-byte pieces per bf16 row
constexpr int kStages = 4;                      // tiles in the ring (3 loading while one computes)
constexpr int kQSlab = kHeads * 128;            // bytes of a 64-channel slab of q
constexpr int kTSlab = kTileE * 128;            // bytes of a 64-channel slab of a tile
constexpr int kQBytes = kHeads * kDim * 2;      // 64 KB
constexpr int kTBytes = kTileE * kDim * 2;      // 32 KB
constexpr int kXBytes = kWarps * 16 * kTileE * 4;  // partial logits per warp, 16 KB
// + alignment slack; kOverlap keeps two exchange buffers.
constexpr size_t smem_bytes(bool overlap) {
  return 1024 + size_t(kQBytes) + size_t(kStages) * kTBytes + size_t(overlap ? 2 : 1) * kXBytes;
}
static_assert(kQSlab % 1024 == 0 && kTSlab % 1024 == 0, "swizzle atoms must stay 1024-byte aligned");
constexpr int64_t kMaxRows = (int64_t(1) << 40) / kDim;  // keeps row * kPieces far from overflow
static_assert(kThreads % (kDim / 4) == 0 && (kHeads * (kDim / 4)) % (2 * kThreads) == 0, "q staging split");

// Byte offset of 16-byte granule `gran` (0..7) of row `row` inside a 128-byte-swizzled slab.
__device__ __forceinline__ uint32_t swz(int row, int gran) { return uint32_t(row * 128 + ((gran ^ (row & 7)) << 4)); }

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

// N-major (MN-major) B operand in the 128-byte swizzle: rows of 64 N-elements (128 bytes),
// consecutive 8-row K groups sbo bytes apart, consecutive 64-element N slabs lbo apart.
__device__ __forceinline__ uint64_t desc_mn_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t(1) << 62) | (uint64_t(sbo >> 4) << 32) | (uint64_t(lbo >> 4) << 16) | uint64_t((addr >> 4) & 0x3fff);
}

// d (+)= A B, m64n32k16, A and B from shared memory (both K-major).
__device__ __forceinline__ void mma_ss_n32(float (&d)[16], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      DI_WGMMA_R16
      "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : DI_WGMMA_ACC16("+f")
      : "l"(da), "l"(db), "r"(scale_d));
#else
  __trap();  // the launcher runs this kernel on compute capability 9.0 only
#endif
}

// d += A B, m64n128k16, A from registers (the mma.sync A fragment of the warp's 16 rows),
// B from shared memory N-major (imm-trans-b = 1).
__device__ __forceinline__ void mma_rs_n128_t(float (&d)[64], const uint32_t (&a)[4], uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      DI_WGMMA_R64
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : DI_WGMMA_ACC64("+f")
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
#else
  __trap();
#endif
}

// kv [rows, dim] fp32 -> [rows, 512] bf16 (round to nearest even, as the CPU oracle's
// round_to_bf16), zeros past dim: one 16-byte piece (8 channels) per thread and step.
__global__ void kv_to_bf16_kernel(const float* __restrict__ kv, int64_t rows, int dim, bool vec, uint4* __restrict__ out) {
  const int64_t total = rows * kPieces;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / kPieces;
    const int c0 = int(i % kPieces) * 8;
    const float* src = kv + r * dim + c0;
    float v[8];
    if (vec && c0 + 8 <= dim) {
      const float4 x = __ldg(reinterpret_cast<const float4*>(src)), y = __ldg(reinterpret_cast<const float4*>(src + 4));
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = c0 + k < dim ? src[k] : 0.0f;
    }
    out[i] = make_uint4(mma::pack_bf16(v[0], v[1]), mma::pack_bf16(v[2], v[3]), mma::pack_bf16(v[4], v[5]),
                        mma::pack_bf16(v[6], v[7]));
  }
}

template <bool kOverlap>
__global__ void __launch_bounds__(kThreads, 1)
    mqa_attention_wg_kernel(SinkAttentionArgs a, const uint4* __restrict__ kvb, bool qvec) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = mma::smem_addr(smem_raw);
  uint8_t* qs = smem_raw + ((1024u - (raw & 1023u)) & 1023u);  // swizzle atoms need 1024-byte alignment
  uint8_t* ts = qs + kQBytes;
  float* sx = reinterpret_cast<float*>(ts + size_t(kStages) * kTBytes);
  const uint32_t qs_a = mma::smem_addr(qs), ts_a = mma::smem_addr(ts);

  const int64_t t = blockIdx.x;
  const int64_t h0 = int64_t(blockIdx.y) * kHeads;
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int hg = warp & 3, dh = warp >> 2;  // head group (16 heads), channel half = warpgroup
  const int g = lane >> 2, qd = lane & 3;
  const int dim = int(a.dim);
  const int64_t b = a.offsets[t], e = a.offsets[t + 1];
  const int64_t cnt = e - b;

  if (cnt <= 0) {  // sink only: no value, so the output is zero (as the CPU op)
    zero_heads(a, t, h0, kHeads, dim, tid, kThreads);
    return;
  }
  const int ntiles = int((cnt + kTileE - 1) / kTileE);

  // Loader role: thread tid copies row tid / 8 of a tile, granule tid % 8 of each of the
  // 8 slabs (8 threads read a row's 128 contiguous bytes per slab). Rows past the list
  // (and ids outside the copy) are zero rows: no NaN from stale data under p = 0.
  const int lr = tid >> 3, lg = tid & 7;
  const uint32_t ldst = swz(lr, lg);
  auto row_id = [&](int it) -> int64_t {
    const int64_t j = b + int64_t(it) * kTileE + lr;
    if (it >= ntiles || j >= e) return -1;
    const int64_t id = a.ids[j];
    return id >= 0 && id < a.kv_rows ? id : -1;
  };
  auto issue = [&](int it, int64_t id) {
    const uint32_t dst = ts_a + uint32_t((it % kStages) * kTBytes) + ldst;
    if (id >= 0) {
      const uint4* src = kvb + id * kPieces + lg;
#pragma unroll
      for (int i = 0; i < kDim / 64; ++i) cp_async16(dst + uint32_t(i * kTSlab), src + 8 * i);
    } else {
      uint8_t* p = ts + size_t((it % kStages) * kTBytes) + ldst;
#pragma unroll
      for (int i = 0; i < kDim / 64; ++i) *reinterpret_cast<uint4*>(p + i * kTSlab) = make_uint4(0, 0, 0, 0);
    }
  };
  // Every step commits one group (empty past the list), so "tile it landed" is always
  // "at most kStages - 2 groups pending".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ntiles) issue(s, row_id(s));
    cp_async_commit();
  }
  int64_t next_id = row_id(kStages - 1);  // loaded one step before its copy is issued

  // q of the block's heads, rounded to bf16, in the swizzled K-major layout (slab = 64
  // channels); zeros past dim and past the last head. At dim = 512 with aligned rows a
  // thread's 32 float4 loads go out in two batches of 16 before any store: the general
  // loop below branches per element, so its loads went out one at a time, 32 dependent
  // trips to HBM per thread at the block's start (NOTES 15; one block per SM, nothing
  // else to run meanwhile). Same values, same stores.
  constexpr int kQPer = kHeads * (kDim / 4) / kThreads;  // float4 pieces of q per thread
  const bool q_fast = qvec && dim == kDim;
  if (q_fast) {
    const int col = 4 * (tid % (kDim / 4));  // fixed per thread: kThreads is a multiple of kDim / 4
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float4 x[kQPer / 2];
#pragma unroll
      for (int u = 0; u < kQPer / 2; ++u) {
        const int r = (tid + (half * (kQPer / 2) + u) * kThreads) / (kDim / 4);
        const int64_t h = h0 + r;
        x[u] = h < a.heads ? __ldg(reinterpret_cast<const float4*>(a.q + (t * a.heads + h) * a.dim + col))
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int u = 0; u < kQPer / 2; ++u) {
        const int r = (tid + (half * (kQPer / 2) + u) * kThreads) / (kDim / 4);
        *reinterpret_cast<uint2*>(qs + (col / 64) * kQSlab + swz(r, (col % 64) / 8) + (col % 8) * 2) =
            make_uint2(mma::pack_bf16(x[u].x, x[u].y), mma::pack_bf16(x[u].z, x[u].w));
      }
    }
  }
  for (int i = q_fast ? kHeads * (kDim / 4) : tid; i < kHeads * (kDim / 4); i += kThreads) {
    const int r = i / (kDim / 4), col = 4 * (i % (kDim / 4));
    const int64_t h = h0 + r;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (h < a.heads) {
      const float* src = a.q + (t * a.heads + h) * a.dim + col;
      if (qvec && col + 4 <= dim) {
        const float4 x = *reinterpret_cast<const float4*>(src);
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
      } else {
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (col + k < dim) v[k] = src[k];
      }
    }
    *reinterpret_cast<uint2*>(qs + (col / 64) * kQSlab + swz(r, (col % 64) / 8) + (col % 8) * 2) =
        make_uint2(mma::pack_bf16(v[0], v[1]), mma::pack_bf16(v[2], v[3]));
  }

  float ys[2], m_run[2], l_run[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t h = h0 + hg * 16 + g + 8 * i;
    ys[i] = h < a.heads ? __fmul_rn(a.sink[h], kAttnLog2eDev) : 0.0f;
    m_run[i] = ceilf(ys[i]);
  }
  // o[half][4 j + k] = the mma.sync kernel's o[16 half + j][k]: columns c0 + 128 half + 8 j + 2 qd + k % 2.
  float o[2][64];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int k = 0; k < 64; ++k) o[hf][k] = 0.0f;
  const int c0 = dh * (kDim / 2);

  // QK of tile `it` into d0 / d1: the partial logits over the warpgroup's 256 channels as
  // two chains of 8 k16 steps (committed, not waited).
  float d0[16], d1[16];
#define DI_WG_QK_ISSUE(it_)                                                                              \
  do {                                                                                                   \
    const uint32_t tile_ = ts_a + uint32_t(((it_) % kStages) * kTBytes);                                 \
    _Pragma("unroll") for (int k = 0; k < 16; ++k) d0[k] = 0.0f, d1[k] = 0.0f;                           \
    wgmma::fence();                                                                                      \
    _Pragma("unroll") for (int kk = 0; kk < 8; ++kk) {                                                   \
      const int k0 = c0 + kk * 16;                                                                       \
      const uint32_t off = uint32_t(((k0 % 64) / 16) * 32);                                              \
      mma_ss_n32(d0, wgmma::desc_k_sw128(qs_a + uint32_t((k0 / 64) * kQSlab) + off),                     \
                 wgmma::desc_k_sw128(tile_ + uint32_t((k0 / 64) * kTSlab) + off), kk);                    \
    }                                                                                                    \
    _Pragma("unroll") for (int kk = 0; kk < 8; ++kk) {                                                   \
      const int k0 = c0 + 128 + kk * 16;                                                                 \
      const uint32_t off = uint32_t(((k0 % 64) / 16) * 32);                                              \
      mma_ss_n32(d1, wgmma::desc_k_sw128(qs_a + uint32_t((k0 / 64) * kQSlab) + off),                     \
                 wgmma::desc_k_sw128(tile_ + uint32_t((k0 / 64) * kTSlab) + off), kk);                    \
    }                                                                                                    \
    wgmma::commit();                                                                                     \
  } while (0)

  float s[4][4];
  if constexpr (kOverlap) {  // tile 0's QK before the loop; the loop issues tile it + 1's
    cp_async_wait<kStages - 2>();
    wgmma::fence_proxy_async();
    __syncthreads();
    DI_WG_QK_ISSUE(0);
    wgmma::wait<0>();
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int k = 0; k < 4; ++k) s[nt][k] = __fadd_rn(d0[4 * nt + k], d1[4 * nt + k]);
  }

  for (int it = 0; it < ntiles; ++it) {
    const int64_t j0 = b + int64_t(it) * kTileE;
    const int c = int(e - j0 < kTileE ? e - j0 : kTileE);
    const uint32_t tile = ts_a + uint32_t((it % kStages) * kTBytes);
    if constexpr (!kOverlap) {
      cp_async_wait<kStages - 2>();
      wgmma::fence_proxy_async();  // this thread's copies and zero rows, visible to the wgmma reads
      __syncthreads();             // every thread's rows are in; every warpgroup is done with tile it - 1
      DI_WG_QK_ISSUE(it);
      // While the QK chains run: the copy of tile it + kStages - 1 into the stage of tile
      // it - 1 (free since the barrier), and the id of the tile after it.
      if (it + kStages - 1 < ntiles) issue(it + kStages - 1, next_id);
      cp_async_commit();
      next_id = row_id(it + kStages);
      wgmma::wait<0>();
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int k = 0; k < 4; ++k) s[nt][k] = __fadd_rn(d0[4 * nt + k], d1[4 * nt + k]);
    } else if (it + 1 < ntiles) {
      // Tile it + 1 is in (one step earlier than above, so one fewer copy in flight), and
      // every warpgroup is done with PV(it - 1): its QK goes to the tensor cores now and
      // runs under this tile's exchange and softmax; the copy refills tile it - 1's stage.
      cp_async_wait<kStages - 3>();
      wgmma::fence_proxy_async();
      __syncthreads();
      DI_WG_QK_ISSUE(it + 1);
      if (it + kStages - 1 < ntiles) issue(it + kStages - 1, next_id);
      cp_async_commit();
      next_id = row_id(it + kStages);
    }

    // 2. Exchange with the partner warp (same heads, other channels), as the mma.sync
    //    kernel. kOverlap alternates two buffers: no block barrier separates a tile's
    //    exchange from the next one's there, but the pair barrier of the tile between does.
    float* xb = sx + (kOverlap ? (it & 1) * (kWarps * 16 * kTileE) : 0);
    float corr[2];
    uint32_t pa[2][4];
    exchange_softmax(s, xb + warp * (16 * kTileE), xb + (warp ^ 4) * (16 * kTileE), hg, lane, qd, c, a.log2_scale,
                         m_run, l_run, corr, pa);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        o[hf][4 * j + 0] = __fmul_rn(o[hf][4 * j + 0], corr[0]);
        o[hf][4 * j + 1] = __fmul_rn(o[hf][4 * j + 1], corr[0]);
        o[hf][4 * j + 2] = __fmul_rn(o[hf][4 * j + 2], corr[1]);
        o[hf][4 * j + 3] = __fmul_rn(o[hf][4 * j + 3], corr[1]);
      }

    // 4. O += P V: k-steps of 16 entries (two 8-row groups, 1024 bytes apart), 128 channels
    //    (two slabs, kTSlab apart) per MMA.
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf)
        mma_rs_n128_t(o[hf], pa[kk],
                      desc_mn_sw128(tile + uint32_t(kk * 2048 + ((c0 + 128 * hf) / 64) * kTSlab), kTSlab, 1024));
    wgmma::commit();
    wgmma::wait<0>();  // PV(it), and under kOverlap QK(it + 1)
    if constexpr (kOverlap) {
      if (it + 1 < ntiles) {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int k = 0; k < 4; ++k) s[nt][k] = __fadd_rn(d0[4 * nt + k], d1[4 * nt + k]);
      }
    }
  }
#undef DI_WG_QK_ISSUE
  cp_async_wait<0>();  // no copy may land after the block has left

  float den[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) den[i] = __fadd_rn(l_run[i], exp2f(__fsub_rn(ys[i], m_run[i])));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t h = h0 + hg * 16 + g + 8 * i;
    if (h >= a.heads) continue;
    float* dst = a.out + (t * a.heads + h) * a.dim;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int d = c0 + 128 * hf + 8 * j + 2 * qd;
        store_pair(dst, d, dim, __fdiv_rn(o[hf][4 * j + 2 * i], den[i]),
                       __fdiv_rn(o[hf][4 * j + 2 * i + 1], den[i]));
      }
  }
}

}  // namespace

// The kernel is sm_90a code (wgmma).
bool device_ok() { return device_runs_sm90a(); }

template <bool kOverlap>
cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream) {
  constexpr size_t kSmemBytes = smem_bytes(kOverlap);
  static const cudaError_t attr = cudaFuncSetAttribute(mqa_attention_wg_kernel<kOverlap>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  if (attr != cudaSuccess) return attr;
  const int64_t groups = (a.heads + kHeads - 1) / kHeads;
  if (groups > 65535 || a.kv_rows <= 0 || a.kv_rows > kMaxRows) return cudaErrorInvalidValue;
  uint4* kvb = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&kvb), size_t(a.kv_rows) * kPieces * sizeof(uint4), stream);
  if (err != cudaSuccess) return err;
  const bool vec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.kv) % 16 == 0;
  const bool qvec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.q) % 16 == 0;
  const int64_t pieces = a.kv_rows * kPieces;
  const unsigned cblocks = unsigned(std::min<int64_t>((pieces + 255) / 256, 132 * 16));
  kv_to_bf16_kernel<<<cblocks, 256, 0, stream>>>(a.kv, a.kv_rows, int(a.dim), vec, kvb);
  err = cudaGetLastError();
  for (int64_t t0 = 0; err == cudaSuccess && t0 < a.n; t0 += INT_MAX) {
    SinkAttentionArgs c = a;
    c.n = std::min<int64_t>(INT_MAX, a.n - t0);
    c.q += t0 * a.heads * a.dim;
    c.out += t0 * a.heads * a.dim;
    c.offsets += t0;
    mqa_attention_wg_kernel<kOverlap><<<dim3(unsigned(c.n), unsigned(groups)), kThreads, kSmemBytes, stream>>>(c, kvb, qvec);
    err = cudaGetLastError();
  }
  const cudaError_t ferr = cudaFreeAsync(kvb, stream);
  return err != cudaSuccess ? err : ferr;
}

template cudaError_t launch<false>(const SinkAttentionArgs& a, cudaStream_t stream);
template cudaError_t launch<true>(const SinkAttentionArgs& a, cudaStream_t stream);

}  // namespace deepinfer::kernels::attn::wg
