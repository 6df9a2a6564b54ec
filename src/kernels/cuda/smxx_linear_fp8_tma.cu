// Activations::kFP8 GEMM, kind kWgmmaTma (smxx_linear_fp8.cuh): the pipelined Hopper
// variant. Same arithmetic as smxx_linear_fp8_wgmma.cu (one wgmma m64n128k32 e4m3 per
// 32-K block from zero, promoted into fp32 with s_x(token) * s_w(32-row group)), issued
// so the per-block chain no longer serializes the kernel (NOTES.md: the older kinds took
// ~1100 clocks per block step, latency-bound):
//   - two raw accumulator sets per consumer warpgroup: block b + 1's wgmma is issued into
//     one set before block b's result (the other set) is waited for (wait_group 1) and
//     promoted, so the FFMAs of the promotion run while the tensor core works; scale-d = 0
//     makes each wgmma overwrite its set (no zeroing);
//   - TMA (cp.async.bulk.tensor, 128-byte swizzle, zero fill past the matrix edge) for the
//     code tiles and cp.async for the x scales, into a kStages-deep ring guarded by full /
//     empty mbarriers: no block-wide barrier in the main loop. Warpgroup 0 refills a slot
//     one stage after both warpgroups released it (a separate producer warp would cost
//     the registers the two raw sets need, see kThreads);
//   - 256 threads, 255 registers at most: 64 fp32 accumulators + 2 x 64 raw per thread.
// Tile: 128 tokens (two consumer warpgroups of 64) x 128 weight rows x 128 bytes of K per
// stage (four 32-blocks). Cost model per 32-block and SM: 2 x 64 clocks of tensor core
// (2 x 64 x 128 x 32 MACs at 4096 per clock) against 2 x (64 FFMA + ~12 scale / load
// instructions) issue slots per SM sub-partition: the FFMA pipe, not the tensor core, is
// the bound (~150 vs 128 clocks), plus the L2 -> SM traffic of a 128 x 128 tile (64 MACs
// per staged byte).
#include <cuda.h>  // CUtensorMap and its encoder's signature (called through the runtime's entry point)
#include <cuda_fp8.h>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear_fp8.cuh"
#include "kernels/cuda/smxx_linear_fp8_common.cuh"
#include "kernels/cuda/smxx_wgmma.cuh"

namespace deepinfer::kernels {

namespace {
namespace tma {

constexpr int kBM = 128, kBN = 128, kBK = 128, kStages = 6;
// Two warpgroups, both consumers; warpgroup 0 also refills the ring. 256 threads: two warps
// per SM sub-partition, whose 16K registers then give 255 per thread (64 fp32 accumulators
// + 2 x 64 raw + addresses). A ninth (producer) warp would put three warps on one
// sub-partition: 168 registers at most (the first version of this kernel, 288 threads at
// 220 registers, failed to launch: too many resources).
constexpr int kThreads = 256;
constexpr int kTileA = kBM * kBK, kTileB = kBN * kBK;   // 16 KiB each, 1024-multiples
constexpr int kScaleBytes = kBM * 4 * 4;                // x scales [kBM][4 blocks]
constexpr int kStageStride = (kTileA + kTileB + kScaleBytes + 1023) / 1024 * 1024;
constexpr int kFullCount = 1 + 128;                     // thread 0's arrive.expect_tx + warpgroup 0's cp.async arrivals
constexpr int kEmptyCount = 8;                          // one per consumer warp

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define DI_FP8_TMA_ASM 1
#endif

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, int count) {
#ifdef DI_FP8_TMA_ASM
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifdef DI_FP8_TMA_ASM
  asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar)) : "memory");
#endif
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
#ifdef DI_FP8_TMA_ASM
  asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes)
               : "memory");
#endif
}
// The arrival fires when every cp.async this thread issued before it has landed.
__device__ __forceinline__ void mbar_cp_async_arrive(uint64_t* bar) {
#ifdef DI_FP8_TMA_ASM
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_u32(bar)) : "memory");
#endif
}
// Waits for the completion of the phase with the given parity. Bounded: a phase that never
// completes (a bug, not a load) traps after ~seconds instead of hanging the device.
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#ifdef DI_FP8_TMA_ASM
  const uint32_t a = smem_u32(bar);
  const long long t0 = clock64();
  for (uint32_t spin = 1;; ++spin) {
    uint32_t done;
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(a), "r"(parity)
        : "memory");
    if (done) return;
    if ((spin & 1023u) == 0 && clock64() - t0 > (1ll << 33)) __trap();  // ~4 s at 2 GHz
  }
#endif
}
// 2-D TMA load of one box (coordinates: innermost first) into shared memory, completing
// `bar`'s transaction count.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
#ifdef DI_FP8_TMA_ASM
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          smem_u32(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_u32(bar))
      : "memory");
#endif
}

// D (64 x 128 fp32) = A (64 x 32 e4m3) . B (128 x 32 e4m3)^T with scale-d = 0: D's old
// contents are ignored, so the operands are outputs only ("=f"): the compiler need not
// keep (or copy) the previous values, which would serialize the wgmma pipeline.
__device__ __forceinline__ void wgmma_k32(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
#ifdef DI_FP8_TMA_ASM
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{" DI_WGMMA_R64 "}, %64, %65, p, 1, 1;\n}\n"
      : DI_WGMMA_ACC64("=f")
      : "l"(desc_a), "l"(desc_b), "r"(0));
#else
  __trap();
#endif
}

// acc += d * (s_x * s_w) (fragment: n8 chunk c = weight rows 8 c .. 8 c + 7, scale group
// c / 4; elements {0, 1} token row g, {2, 3} row g + 8).
__device__ __forceinline__ void promote(float (&acc)[64], const float (&d)[64], float sx0, float sx1,
                                        const float (&sw)[4]) {
#pragma unroll
  for (int grp = 0; grp < 4; ++grp) {
    const float f0 = sx0 * sw[grp], f1 = sx1 * sw[grp];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int i = (grp * 4 + c) * 4;
      acc[i + 0] = __fmaf_rn(d[i + 0], f0, acc[i + 0]);
      acc[i + 1] = __fmaf_rn(d[i + 1], f0, acc[i + 1]);
      acc[i + 2] = __fmaf_rn(d[i + 2], f1, acc[i + 2]);
      acc[i + 3] = __fmaf_rn(d[i + 3], f1, acc[i + 3]);
    }
  }
}

__device__ __forceinline__ uint64_t desc(const uint8_t* p) { return wgmma::desc_k_sw128(smem_u32(p)); }

__global__ void __launch_bounds__(kThreads, 1)
    gemm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b, Fp8GemmArgs a) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // The dynamic window starts 16-byte aligned in general; the swizzled tiles need 1024.
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int64_t k = a.w.cols, nb = k / 32;
  const int64_t m0 = int64_t(blockIdx.y) * kBM;  // tokens
  const int64_t n0 = int64_t(blockIdx.x) * kBN;  // weight rows of the slice
  const int tid = threadIdx.x;
  uint64_t* full = reinterpret_cast<uint64_t*>(smem + kStages * kStageStride);
  uint64_t* empty = full + kStages;
  float* wsc = reinterpret_cast<float*>(empty + kStages);  // [4 groups][nb]
  if (tid == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(&full[s], kFullCount);
      mbar_init(&empty[s], kEmptyCount);
    }
#ifdef DI_FP8_TMA_ASM
    // The barriers' initialization, visible to the TMA unit (async proxy) before its first
    // complete_tx.
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
    wgmma::fence_proxy_async();
  }
  for (int64_t i = tid; i < 4 * nb; i += kThreads) {
    const int64_t grp = i / nb, b = i % nb;
    wsc[i] = fp8_weight_scale(a.w, a.row0 + min64(n0 + grp * 32, a.num_rows - 1), b);
  }
  __syncthreads();
  const int64_t stages_total = (nb + 3) / 4;
  // The warpgroup as a warp-uniform value (a shuffle from lane 0), so ptxas sees the wgmma
  // code on a uniform path and does not serialize it.
  const int cw = __shfl_sync(0xffffffffu, tid / 128, 0);  // tokens 64 cw .. 64 cw + 63 of the tile

  // Stage st into its slot (warpgroup 0): thread 0 the two TMA boxes (past the matrix edge
  // zero-filled, still counting their full size), every thread 4 of the [kBM tokens][4
  // blocks] x scales by cp.async (zeros past the edges), whose arrivals fire on landing.
  auto produce = [&](int64_t st) {
    const int slot = int(st % kStages);
    uint8_t* As = smem + slot * kStageStride;
    uint8_t* Bs = As + kTileA;
    float* Ss = reinterpret_cast<float*>(Bs + kTileB);
    if (tid == 0) {
      mbar_arrive_expect_tx(&full[slot], uint32_t(kTileA + kTileB));
      tma_load_2d(As, &map_a, int(st * kBK), int(m0), &full[slot]);
      tma_load_2d(Bs, &map_b, int(st * kBK), int(n0), &full[slot]);
    }
#pragma unroll
    for (int c = tid; c < kBM * 4; c += 128) {
      const int r = c / 4, j = c % 4;
      const int64_t tok = m0 + r, b = st * 4 + j;
      const bool in = tok < a.n && b < nb;
      cp_async4_zfill(Ss + c, a.x_scales + (in ? tok * nb + b : 0), in);
    }
    mbar_cp_async_arrive(&full[slot]);
  };
  if (cw == 0)
    for (int64_t st = 0; st < stages_total && st < kStages; ++st) produce(st);

  const int lane = tid % 32, wq = (tid % 128) / 32, g = lane / 4, tq = lane % 4;
  const int row_a = cw * 64 + wq * 16 + g;  // this thread's token rows: row_a, row_a + 8
  float acc[64], r0[64], r1[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) acc[i] = 0.0f;  // r0 / r1: written by the wgmmas (scale-d = 0)

  // Block b lives in stage b / 4, at 32 * (b % 4) bytes along each swizzled 128-byte row.
  auto issue = [&](float (&d)[64], int64_t b) {
    const uint8_t* As = smem + int((b / 4) % kStages) * kStageStride;
    const int off = int(b % 4) * 32;
    wgmma::fence();
    wgmma_k32(d, desc(As + cw * 64 * kBK + off), desc(As + kTileA + off));
    wgmma::commit();
  };
  auto scales = [&](int64_t b, float& sx0, float& sx1, float (&sw)[4]) {
    const float* Ss = reinterpret_cast<const float*>(smem + int((b / 4) % kStages) * kStageStride + kTileA + kTileB);
    const int j = int(b % 4);
    sx0 = Ss[row_a * 4 + j];
    sx1 = Ss[(row_a + 8) * 4 + j];
#pragma unroll
    for (int grp = 0; grp < 4; ++grp) sw[grp] = wsc[grp * nb + b];
  };

  mbar_wait(&full[0], 0);
  issue(r0, 0);
  for (int64_t st = 0; st < stages_total; ++st) {
    // Blocks 4 st .. 4 st + 3; block b's result is in r0 for even b, r1 for odd b. Each step
    // issues block b + 1 (waiting for its stage when it starts one), then waits until only
    // that one is in flight and promotes block b.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t b = st * 4 + j;
      if (b >= nb) break;
      float sx0, sx1, sw[4];
      if (b + 1 < nb) {
        if (j == 3) mbar_wait(&full[int((st + 1) % kStages)], uint32_t(((st + 1) / kStages) & 1));
        if (j % 2 == 0)
          issue(r1, b + 1);
        else
          issue(r0, b + 1);
        scales(b, sx0, sx1, sw);
        wgmma::wait<1>();
      } else {
        scales(b, sx0, sx1, sw);
        wgmma::wait<0>();
      }
      if (j % 2 == 0)
        promote(acc, r0, sx0, sx1, sw);
      else
        promote(acc, r1, sx0, sx1, sw);
    }
    // Every block of stage st is promoted (its wgmmas complete, its scales read): the slot
    // may be refilled.
    __syncwarp();
    if (lane == 0) mbar_arrive(&empty[int(st % kStages)]);
    // Warpgroup 0 refills the slot of the stage before (released by both warpgroups by now,
    // as a rule: one stage of slack keeps the two from running in lockstep) with stage
    // st - 1 + kStages, kStages - 2 stages ahead of the next one needed. Block 4 (st + 1)'s
    // wgmma is in flight meanwhile.
    if (cw == 0 && st >= 1 && st - 1 + kStages < stages_total) {
      mbar_wait(&empty[int((st - 1) % kStages)], uint32_t(((st - 1) / kStages) & 1));
      produce(st - 1 + kStages);
    }
  }
  cp_async_wait<0>();  // warpgroup 0's last scale copies landed before it exits

  // Fragment: rows row_a / row_a + 8 (tokens), n8 chunk i's columns 8 i + 2 tq, + 1.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t tok = m0 + row_a + h * 8;
    if (tok >= a.n) continue;
    float* yr = a.y + tok * a.num_rows;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      const int64_t col = n0 + i * 8 + tq * 2;
      if (col + 1 < a.num_rows && reinterpret_cast<uintptr_t>(yr + col) % 8 == 0) {
        *reinterpret_cast<float2*>(yr + col) = make_float2(acc[i * 4 + 2 * h], acc[i * 4 + 2 * h + 1]);
      } else {
        if (col < a.num_rows) yr[col] = acc[i * 4 + 2 * h];
        if (col + 1 < a.num_rows) yr[col + 1] = acc[i * 4 + 2 * h + 1];
      }
    }
  }
}

size_t smem_bytes(int64_t k) {
  return 1024 + size_t(kStages) * kStageStride + size_t(2 * kStages) * 8 + size_t(4 * (k / 32)) * 4;
}

// cuTensorMapEncodeTiled through the runtime's driver entry point (no link against libcuda).
using EncodeFn = decltype(&cuTensorMapEncodeTiled);
EncodeFn encoder() {
  static EncodeFn fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<EncodeFn>(p);
  }();
  return fn;
}

// A [rows, k] row-major byte matrix as 128-byte x 128-row boxes in the 128-byte swizzle.
bool make_map(CUtensorMap* map, const uint8_t* base, int64_t rows, int64_t k) {
  const EncodeFn fn = encoder();
  if (fn == nullptr) return false;
  const cuuint64_t dims[2] = {cuuint64_t(k), cuuint64_t(rows)};
  const cuuint64_t strides[1] = {cuuint64_t(k)};
  const cuuint32_t box[2] = {kBK, 128};
  const cuuint32_t estr[2] = {1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t*>(base), dims, strides, box, estr,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

}  // namespace tma
}  // namespace

bool linear_fp8_tma_eligible(const Fp8GemmArgs& a) {
  int dev = 0, optin = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) return false;
  // The block must be launchable with the registers ptxas gave the kernel (a build whose
  // kernel needs more would otherwise fail every launch; kAuto then takes the first wgmma
  // kernel).
  static const bool launchable = [] {
    cudaFuncAttributes fa{};
    return cudaFuncGetAttributes(&fa, tma::gemm_kernel) == cudaSuccess && fa.maxThreadsPerBlock >= tma::kThreads;
  }();
  if (!launchable) return false;
  // TMA coordinates are int32; the tensor map needs 16-byte aligned bases and row strides
  // (k % 32 == 0 and the 16-byte checks of linear_fp8_gemm_eligible give both).
  return tma::encoder() != nullptr && size_t(optin) >= tma::smem_bytes(a.w.cols) && a.w.cols < (int64_t(1) << 31) &&
         a.n < (int64_t(1) << 31) && a.num_rows < (int64_t(1) << 31);
}

cudaError_t linear_fp8_tma(const Fp8GemmArgs& a, cudaStream_t stream) {
  const int64_t k = a.w.cols;
  CUtensorMap map_a, map_b;
  if (!tma::make_map(&map_a, a.x_codes, a.n, k) || !tma::make_map(&map_b, a.w.data + a.row0 * k, a.num_rows, k))
    return cudaErrorInvalidValue;
  const size_t smem = tma::smem_bytes(k);
  const cudaError_t e =
      cudaFuncSetAttribute(tma::gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(unsigned((a.num_rows + tma::kBN - 1) / tma::kBN), unsigned((a.n + tma::kBM - 1) / tma::kBM));
  tma::gemm_kernel<<<grid, tma::kThreads, smem, stream>>>(map_a, map_b, a);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
