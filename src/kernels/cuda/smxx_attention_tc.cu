// The bf16 mode (SinkAttentionArgs::bf16; ops/attention.h has the arithmetic) on the
// tensor cores. One block per (query, group of 64 heads): the 64 heads are the M of both
// products (mma.sync m16n8k16, bf16 in, fp32 out), so each staged entry is read from
// shared memory once for all of them. 8 warps; warp w owns heads 16 (w % 4) .. + 15 and
// channels 256 (w / 4) .. + 255:
//   QK: the warp's partial logits over its 256 channels (16 heads x 32 entries), summed
//       with the partner warp's (same heads, other channels) through shared memory;
//       both warps then hold the same logits and run the same softmax on them;
//   PV: out[16 heads, 256 channels] += P (16 x 32, from the logits' registers) V.
// The entries of a query are walked in tiles of 32 in list order; every step (tiles,
// MMA chains, shuffles) depends only on the query's own count, so a query's result is
// the same bits alone or in any batch, and one kernel serves every n.
// Entries arrive as fp32 rows: cp.async copies the next tile's rows into an fp32
// staging buffer while the current tile computes; a pass then rounds them to bf16
// into the tile the MMAs read (rows padded to 520: ldmatrix rows on distinct banks).
// Measured on the H200 (bench/flash/NOTES.md §7): 3.7-3.9x the SIMT kernel from n = 256
// (8192-token prefill 34 -> 8.7 ms), but 3x slower at n = 1 (0.039 -> 0.119 ms): a block
// takes ~120-146 us at every n, latency-bound (2 warps per scheduler at 240 registers),
// and one SM walks all of a query's tiles.
#include <algorithm>
#include <climits>

#include "kernels/cuda/smxx_attention_common.cuh"

namespace deepinfer::kernels::attn::tc {
namespace {

constexpr int kHeads = 64;                   // heads per block (4 warps x m16)
constexpr int kTileE = 32;                   // entries per tile
constexpr int kLd = int(kAttnMaxDim) + 8;    // bf16 per shared row
constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kHalf = int(kAttnMaxDim) / 2;  // channels per warp
constexpr size_t kQBytes = size_t(kHeads) * kLd * 2;          // q, bf16
constexpr size_t kKBytes = size_t(kTileE) * kLd * 2;          // the tile, bf16
constexpr size_t kStageBytes = size_t(kTileE) * kAttnMaxDim * 4;  // the next tile, fp32
constexpr size_t kXBytes = size_t(kWarps) * 16 * kTileE * 4;  // partial logits per warp
constexpr size_t kSmemBytes = kQBytes + kKBytes + kStageBytes + kXBytes;

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(mma::smem_addr(p)));
}

// d = a b + 0: the first MMA of a chain.
__device__ __forceinline__ void mma_bf16_zero(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
#endif
}

__global__ void __launch_bounds__(kThreads, 1) mqa_attention_tc_kernel(SinkAttentionArgs a, bool vec) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  extern __shared__ float4 smem4[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem4);
  __nv_bfloat16* ks = reinterpret_cast<__nv_bfloat16*>(reinterpret_cast<char*>(smem4) + kQBytes);
  float* stage = reinterpret_cast<float*>(reinterpret_cast<char*>(smem4) + kQBytes + kKBytes);
  float* sx = reinterpret_cast<float*>(reinterpret_cast<char*>(smem4) + kQBytes + kKBytes + kStageBytes);

  const int64_t t = blockIdx.x;
  const int64_t h0 = int64_t(blockIdx.y) * kHeads;
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int hg = warp & 3, dh = warp >> 2;  // head group (16 heads), channel half
  const int g = lane >> 2, qd = lane & 3;   // fragment row / column pair
  const int dim = int(a.dim);
  const int64_t b = a.offsets[t], e = a.offsets[t + 1];
  const int64_t cnt = e - b;

  if (cnt <= 0) {  // sink only: no value, so the output is zero (as the CPU op)
    zero_heads(a, t, h0, kHeads, dim, tid, kThreads);
    return;
  }
  const int ntiles = int((cnt + kTileE - 1) / kTileE);

  // Warp w copies rows w, w + 8, w + 16, w + 24 of a tile; lane l its 16-byte pieces
  // l, l + 32, ... (columns below dim only; the rounding pass never reads the rest).
  auto load_tile = [&](int it) {
    const int64_t j0 = b + int64_t(it) * kTileE;
    const int c = int(e - j0 < kTileE ? e - j0 : kTileE);
    for (int r = warp; r < c; r += kWarps) {
      const float* src = a.kv + a.ids[j0 + r] * a.dim;
      float* row = stage + r * int(kAttnMaxDim);
      if (vec) {
        for (int col = 4 * lane; col < dim; col += 128) cp_async16(row + col, src + col);
      } else {
        for (int col = lane; col < dim; col += 32) row[col] = src[col];
      }
    }
    cp_async_commit();
  };
  load_tile(0);

  // q of the block's heads, rounded to bf16; zeros past dim and past the last head.
  for (int i = tid; i < kHeads * (kLd / 4); i += kThreads) {
    const int r = i / (kLd / 4), col = 4 * (i % (kLd / 4));
    const int64_t h = h0 + r;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (h < a.heads) {
      const float* src = a.q + (t * a.heads + h) * a.dim;
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (col + k < dim) v[k] = src[col + k];
    }
    *reinterpret_cast<uint2*>(qs + r * kLd + col) = make_uint2(mma::pack_bf16(v[0], v[1]), mma::pack_bf16(v[2], v[3]));
  }

  // Rows g and g + 8 of the warp's 16 heads: running integer max (from the sink), sum.
  float ys[2], m_run[2], l_run[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t h = h0 + hg * 16 + g + 8 * i;
    ys[i] = h < a.heads ? __fmul_rn(a.sink[h], kAttnLog2eDev) : 0.0f;
    m_run[i] = ceilf(ys[i]);
  }
  float o[kHalf / 8][4];
#pragma unroll
  for (int nt = 0; nt < kHalf / 8; ++nt)
#pragma unroll
    for (int k = 0; k < 4; ++k) o[nt][k] = 0.0f;

  // ldmatrix roles. A (q, 16 x 16): rows lane % 16, k half lane / 16. B of QK (entries x
  // channels, non-transposed): entries (lane % 8) + 8 (lane / 16), channel half (lane / 8) % 2.
  // B of PV (entries x channels, transposed): entries (lane % 8) + 8 ((lane / 8) % 2),
  // channel half lane / 16.
  const int a_row = hg * 16 + (lane & 15), a_k = (lane >> 4) * 8;
  const int b_ent = (lane & 7) + (lane >> 4) * 8, b_k = ((lane >> 3) & 1) * 8;
  const int v_ent = (lane & 7) + ((lane >> 3) & 1) * 8, v_ch = (lane >> 4) * 8;
  const int c0 = dh * kHalf;

  for (int it = 0; it < ntiles; ++it) {
    const int64_t j0 = b + int64_t(it) * kTileE;
    const int c = int(e - j0 < kTileE ? e - j0 : kTileE);
    cp_async_wait<0>();
    __syncthreads();  // the staged rows are in; every warp is done with the previous tile

    // Round the staged rows to bf16; rows c.. and channels dim.. are zeros (no NaN from
    // stale data under a zero probability).
    for (int i = tid; i < kTileE * (kLd / 4); i += kThreads) {
      const int r = i / (kLd / 4), col = 4 * (i % (kLd / 4));
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (r < c && col + 4 <= dim) {  // a whole 16-byte piece: one shared load
        const float4 w = *reinterpret_cast<const float4*>(stage + r * int(kAttnMaxDim) + col);
        v[0] = w.x, v[1] = w.y, v[2] = w.z, v[3] = w.w;
      } else if (r < c) {
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (col + k < dim) v[k] = stage[r * int(kAttnMaxDim) + col + k];
      }
      *reinterpret_cast<uint2*>(ks + r * kLd + col) = make_uint2(mma::pack_bf16(v[0], v[1]), mma::pack_bf16(v[2], v[3]));
    }
    __syncthreads();  // the tile is ready and the staging buffer free
    if (it + 1 < ntiles) load_tile(it + 1);

    // 1. Partial logits over the warp's channels: two chains of 8 k-steps, each summed
    //    into s in fp32 (short chains keep the tensor core's accumulation error small).
    float s[4][4];
#pragma unroll
    for (int chain = 0; chain < 2; ++chain) {
      float d[4][4];
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) {
        const int k0 = c0 + (chain * 8 + kk) * 16;
        uint32_t af[4];
        mma::ldmatrix_x4(af, qs + a_row * kLd + k0 + a_k);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t bf[4];
          mma::ldmatrix_x4(bf, ks + (np * 16 + b_ent) * kLd + k0 + b_k);
          if (kk == 0) {
            mma_bf16_zero(d[2 * np], af, bf[0], bf[1]);
            mma_bf16_zero(d[2 * np + 1], af, bf[2], bf[3]);
          } else {
            mma::mma_bf16(d[2 * np], af, bf[0], bf[1]);
            mma::mma_bf16(d[2 * np + 1], af, bf[2], bf[3]);
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int k = 0; k < 4; ++k) s[nt][k] = chain == 0 ? d[nt][k] : __fadd_rn(s[nt][k], d[nt][k]);
    }
    // 2-3. Exchange with the partner warp, online softmax (exchange_softmax).
    float corr[2];
    uint32_t pa[2][4];
    exchange_softmax(s, sx + warp * (16 * kTileE), sx + (warp ^ 4) * (16 * kTileE), hg, lane, qd, c, a.log2_scale,
                     m_run, l_run, corr, pa);
#pragma unroll
    for (int nt = 0; nt < kHalf / 8; ++nt) {
      o[nt][0] = __fmul_rn(o[nt][0], corr[0]);
      o[nt][1] = __fmul_rn(o[nt][1], corr[0]);
      o[nt][2] = __fmul_rn(o[nt][2], corr[1]);
      o[nt][3] = __fmul_rn(o[nt][3], corr[1]);
    }

    // 4. out += P V over the warp's 256 channels.
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
      for (int np = 0; np < kHalf / 16; ++np) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, ks + (kk * 16 + v_ent) * kLd + c0 + np * 16 + v_ch);
        mma::mma_bf16(o[2 * np], pa[kk], bf[0], bf[1]);
        mma::mma_bf16(o[2 * np + 1], pa[kk], bf[2], bf[3]);
      }
  }

  // out = acc / (sum + 2^(y_sink - M)).
  float den[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) den[i] = __fadd_rn(l_run[i], exp2f(__fsub_rn(ys[i], m_run[i])));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t h = h0 + hg * 16 + g + 8 * i;
    if (h >= a.heads) continue;
    float* dst = a.out + (t * a.heads + h) * a.dim;
#pragma unroll
    for (int nt = 0; nt < kHalf / 8; ++nt) {
      const int d = c0 + nt * 8 + 2 * qd;
      store_pair(dst, d, dim, __fdiv_rn(o[nt][2 * i], den[i]), __fdiv_rn(o[nt][2 * i + 1], den[i]));
    }
  }
}

}  // namespace

cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(mqa_attention_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  if (attr != cudaSuccess) return attr;
  const int64_t groups = (a.heads + kHeads - 1) / kHeads;
  if (groups > 65535) return cudaErrorInvalidValue;
  const bool vec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.kv) % 16 == 0;
  for (int64_t t0 = 0; t0 < a.n; t0 += INT_MAX) {
    SinkAttentionArgs c = a;
    c.n = std::min<int64_t>(INT_MAX, a.n - t0);
    c.q += t0 * a.heads * a.dim;
    c.out += t0 * a.heads * a.dim;
    c.offsets += t0;  // absolute positions into ids
    mqa_attention_tc_kernel<<<dim3(unsigned(c.n), unsigned(groups)), kThreads, kSmemBytes, stream>>>(c, vec);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace deepinfer::kernels::attn::tc
