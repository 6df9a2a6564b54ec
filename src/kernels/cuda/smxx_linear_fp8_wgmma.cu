// Activations::kFP8 GEMM on Hopper wgmma (smxx_linear_fp8.cuh, kinds kWgmma / kWgmma3 /
// kWgmmaWide).
//
// Block: 64 kWG tokens (kWG = 2 or 3 consumer warpgroups of 64 tokens each) x 128 kNH
// weight rows (kNH = 1, or 2 for kWgmmaWide: two n128 wgmmas per block and warpgroup,
// more reuse of each staged byte: 87 MACs per byte staged vs 64 for 128 x 128), K in stages of 128 bytes (four 32-blocks) through a 4-deep cp.async ring written
// in the 128-byte-swizzled K-major layout wgmma reads (16-byte chunk c of row r stored at
// chunk c ^ (r % 8); 1024-byte aligned tiles). Per 32-block each warpgroup issues one
// wgmma m64n128k32 e4m3 from zero, waits for it and promotes the fragment into its fp32
// accumulators with s_x(token) * s_w(32-row group). The warpgroups run independently
// between the per-stage barriers, so one's promotion FMAs overlap another's MMA: at k32
// granularity the FMAs (one per output per block) and the MMAs (32 MACs per output per
// block) need about the same issue time on an H200 SM (128 FP32 lanes vs ~4096 FP8 MACs
// per clock), so neither can hide the other unless two warpgroups alternate.
#include <cuda_fp8.h>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear_fp8.cuh"
#include "kernels/cuda/smxx_linear_fp8_common.cuh"
#include "kernels/cuda/smxx_wgmma.cuh"

namespace deepinfer::kernels {

namespace {
namespace wg {

// kWG consumer warpgroups of 64 tokens each: kBM = 64 kWG tokens x kBN = 128 kNH weight
// rows (kNH halves of 128 rows, one wgmma n128 each per 32-block).
constexpr int kBK = 128, kStages = 4;
template <int kWG, int kNH>
struct Cfg {
  static constexpr int kBM = 64 * kWG, kBN = 128 * kNH, kThreads = 128 * kWG;
  static constexpr int kABytes = kBM * kBK, kBBytes = kBN * kBK;  // 1024-multiples
  static constexpr int kStageBytes = kABytes + kBBytes + kBM * 4 * 4;  // A, B, x scales [kBM][4]
  static constexpr int kStageStride = (kStageBytes + 1023) / 1024 * 1024;
};

// The shared-memory descriptor (K-major, 128-byte swizzle), fence / commit / wait and the
// proxy fence are smxx_wgmma.cuh's.
__device__ __forceinline__ uint64_t smem_desc(const void* p) {
  return wgmma::desc_k_sw128(uint32_t(__cvta_generic_to_shared(p)));
}

// D (64 x 128 fp32, the m64n128 fragment) = A (64 x 32 e4m3) . B (128 x 32 e4m3)^T, from
// zero (scale-d = 0): one 32-K block per instruction, so no two scales ever mix.
__device__ __forceinline__ void wgmma_m64n128k32(float (&d)[64], uint64_t desc_a, uint64_t desc_b) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{" DI_WGMMA_R64 "}, %64, %65, p, 1, 1;\n}\n"
      : DI_WGMMA_ACC64("+f")
      : "l"(desc_a), "l"(desc_b), "r"(0));
#else
  __trap();
#endif
}
// acc += d * (s_x * s_w) for the thread's 64 fragment elements: n8 chunk i covers weight
// rows 8 i .. 8 i + 7 of the tile, in 32-row scale group i / 4.
__device__ __forceinline__ void promote(float (&acc)[64], const float (&d)[64], float sx0, float sx1,
                                        const float* sw) {
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

template <int kWG, int kNH>
__global__ void __launch_bounds__(Cfg<kWG, kNH>::kThreads, 1) gemm_kernel(Fp8GemmArgs a) {
  using C = Cfg<kWG, kNH>;
  constexpr int kBM = C::kBM, kBN = C::kBN, kThreads = C::kThreads, kStageStride = C::kStageStride;
  constexpr int kGroups = 4 * kNH;  // 32-row weight scale groups of the tile
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // The dynamic window's start is only 16-byte aligned in general: round up to 1024.
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  const int64_t k = a.w.cols, nb = k / 32;
  const int64_t m0 = int64_t(blockIdx.y) * kBM;  // tokens
  const int64_t n0 = int64_t(blockIdx.x) * kBN;  // weight rows of the slice
  const int tid = threadIdx.x, wgi = tid / 128, lane = tid % 32, wq = (tid % 128) / 32;
  const int g = lane / 4, tq = lane % 4;
  float* wsc = reinterpret_cast<float*>(smem + kStages * kStageStride);  // [kGroups][nb]
  for (int64_t i = tid; i < kGroups * nb; i += kThreads) {
    const int64_t grp = i / nb, b = i % nb;
    wsc[i] = fp8_weight_scale(a.w, a.row0 + min64(n0 + grp * 32, a.num_rows - 1), b);
  }
  const int64_t stages_total = (nb + 3) / 4;
  auto load_stage = [&](int64_t st, int slot) {
    uint8_t* As = smem + slot * kStageStride;
    uint8_t* Bs = As + C::kABytes;
    float* Ss = reinterpret_cast<float*>(Bs + C::kBBytes);
    const int64_t kb0 = st * 4;
    for (int c = tid; c < (kBM + kBN) * 8; c += kThreads) {
      const bool is_a = c < kBM * 8;
      const int r = (is_a ? c : c - kBM * 8) / 8, ch = c % 8;
      const int dst = r * kBK + ((ch ^ (r & 7)) * 16);  // the 128-byte swizzle
      const int64_t kcol = kb0 * 32 + ch * 16;
      const int64_t row = (is_a ? m0 : n0) + r;
      const bool in = kcol < k && row < (is_a ? a.n : a.num_rows);
      if (is_a)
        cp_async16_zfill(As + dst, a.x_codes + (in ? row * k + kcol : 0), in);
      else
        cp_async16_zfill(Bs + dst, a.w.data + (in ? (a.row0 + row) * k + kcol : 0), in);
    }
    for (int c = tid; c < kBM * 4; c += kThreads) {
      const int r = c / 4, j = c % 4;
      const int64_t tok = m0 + r, b = kb0 + j;
      const bool in = tok < a.n && b < nb;
      cp_async4_zfill(Ss + c, a.x_scales + (in ? tok * nb + b : 0), in);
    }
  };
  float acc[kNH][64], d[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) {
    d[i] = 0.0f;
#pragma unroll
    for (int h = 0; h < kNH; ++h) acc[h][i] = 0.0f;
  }

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < stages_total) load_stage(s, s);
    cp_async_commit();
  }
  const int row_a = wgi * 64 + wq * 16 + g;  // this thread's token rows in the tile: row_a, row_a + 8
  for (int64_t st = 0; st < stages_total; ++st) {
    cp_async_wait<kStages - 2>();
    wgmma::fence_proxy_async();
    __syncthreads();  // stage st is in shared memory; slot (st - 1) % kStages is free
    if (st + kStages - 1 < stages_total) load_stage(st + kStages - 1, int((st + kStages - 1) % kStages));
    cp_async_commit();
    const uint8_t* As = smem + int(st % kStages) * kStageStride;
    const uint8_t* Bs = As + C::kABytes;
    const float* Ss = reinterpret_cast<const float*>(Bs + C::kBBytes);
    const uint8_t* a_tile = As + wgi * 64 * kBK;  // the warpgroup's 64 token rows (8 KiB: 1024-aligned)
    const int jn = int(min64(4, nb - st * 4));     // blocks in this stage (the last may have fewer)
    const float* swb = wsc + st * 4;               // + grp * nb + j
    float sw[4];
    // Block j of the stage: descriptors advance 32 bytes along the swizzled row. Issue,
    // wait, promote: reading a fragment while a later wgmma is in flight makes ptxas
    // serialize every wgmma of the kernel anyway (C7514), so the overlap of promotion and
    // MMA comes from the other warpgroups, which run their own blocks meanwhile.
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      if (j >= jn) break;
      const float sx0 = Ss[row_a * 4 + j], sx1 = Ss[(row_a + 8) * 4 + j];
#pragma unroll
      for (int h = 0; h < kNH; ++h) {
        wgmma::fence();
        wgmma_m64n128k32(d, smem_desc(a_tile + j * 32), smem_desc(Bs + h * 128 * kBK + j * 32));
        wgmma::commit();
#pragma unroll
        for (int grp = 0; grp < 4; ++grp) sw[grp] = swb[(h * 4 + grp) * nb + j];
        wgmma::wait<0>();
        promote(acc[h], d, sx0, sx1, sw);
      }
    }
  }
  cp_async_wait<0>();
  // Fragment: rows row_a / row_a + 8 (tokens), n8 chunk i's columns 8 i + 2 tq, + 1.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t tok = m0 + row_a + h * 8;
    if (tok >= a.n) continue;
    float* yr = a.y + tok * a.num_rows;
#pragma unroll
    for (int nh = 0; nh < kNH; ++nh)
#pragma unroll
      for (int i = 0; i < 16; ++i) {
        const int64_t col = n0 + nh * 128 + i * 8 + tq * 2;
        if (col < a.num_rows) yr[col] = acc[nh][i * 4 + 2 * h];
        if (col + 1 < a.num_rows) yr[col + 1] = acc[nh][i * 4 + 2 * h + 1];
      }
  }
}

template <int kWG, int kNH>
size_t smem_bytes(int64_t k) {
  return 1024 + size_t(kStages) * Cfg<kWG, kNH>::kStageStride + size_t(4 * kNH * (k / 32)) * 4;
}

template <int kWG, int kNH>
cudaError_t launch(const Fp8GemmArgs& a, cudaStream_t stream) {
  using C = Cfg<kWG, kNH>;
  const size_t smem = smem_bytes<kWG, kNH>(a.w.cols);
  // Set on every call (host-side, cheap, allowed during graph capture): the size depends on K.
  const cudaError_t e =
      cudaFuncSetAttribute(gemm_kernel<kWG, kNH>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(unsigned((a.num_rows + C::kBN - 1) / C::kBN), unsigned((a.n + C::kBM - 1) / C::kBM));
  gemm_kernel<kWG, kNH><<<grid, C::kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace wg
}  // namespace

bool linear_fp8_wgmma_eligible(const Fp8GemmArgs& a) {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
    return false;
  (void)a;
  return major == 9 && minor == 0;  // wgmma: sm_90a code, which runs on compute capability 9.0 only
}

cudaError_t linear_fp8_wgmma(const Fp8GemmArgs& a, Fp8GemmKind kind, cudaStream_t stream) {
  if (kind == Fp8GemmKind::kWgmma3) return wg::launch<3, 1>(a, stream);
  if (kind == Fp8GemmKind::kWgmmaWide) return wg::launch<2, 2>(a, stream);
  return wg::launch<2, 1>(a, stream);
}

}  // namespace deepinfer::kernels
