// Internal to the FP8-activation GEMM (smxx_linear_fp8.cu): cp.async staging and the
// weight's per-(32 rows, 32-K block) scale.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear_fp8.cuh"

namespace deepinfer::kernels {

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// 16 (4) bytes global -> shared, asynchronously; !in writes zeros (src-size 0) and reads
// nothing, so tails past the matrix edge stage as zero codes / zero scales.
__device__ __forceinline__ void cp_async16_zfill(void* dst, const void* src, bool in) {
  const uint32_t d = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(in ? 16 : 0));
}
__device__ __forceinline__ void cp_async4_zfill(void* dst, const void* src, bool in) {
  const uint32_t d = uint32_t(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(in ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The scale of weight row `row` over K-block b (columns 32 b .. 32 b + 31), 1 without scales.
__device__ __forceinline__ float fp8_weight_scale(const WeightArgs& w, int64_t row, int64_t b) {
  if (w.scale_format == SFormat::kNone) return 1.0f;
  return e8m0_to_float(w.scale[(row / w.block_rows) * w.scale_cols + (b * 32) / w.block_cols]);
}

// One mma.sync m16n8k32 e4m3 x e4m3 from a zero accumulator (the FP8 products summed on the
// tensor core with fp32 accuracy, unlike wgmma's FP8 instruction: bench/flash/NOTES.md 24);
// the callers promote d by their scales. a0..a3 / b0, b1 are the PTX fragment registers.
__device__ __forceinline__ void mma_e4m3(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                         uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f));
#endif
}

// Host side: the weight format checks of linear_fp8_gemm_eligible.
bool fp8_gemm_weight_ok(const WeightArgs& w);

}  // namespace deepinfer::kernels
