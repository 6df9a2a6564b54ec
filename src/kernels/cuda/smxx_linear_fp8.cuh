// Activations::kFP8 (ops/linear.h) on the GPU: x quantized per 32 contiguous K-elements
// to e4m3 with a ue8m0 (power-of-two) scale, exactly as the CPU oracle does, and a GEMM
// on the FP8 tensor cores against an e4m3 weight with 32-multiple ue8m0 blocks.
//
//   quant_act_fp8: x [n, k] fp32 -> codes [n, k] (e4m3 bytes) and scales [n, ceil(k/32)]
//     (fp32 powers of two), and / or the dequantized values code * scale as fp32 [n, k]
//     (the small-n path feeds those to the ordinary fp32 kernels: products and sums of
//     exact values). Bit-exact with ops::quant_fp8_block, the last block shorter when
//     k % 32 != 0.
//   linear_fp8_gemm: y [n, rows] = sum over 32-K blocks b of D_b * s_x,b * s_w,b, where
//     D_b is one FP8 MMA over the block's 32 K-elements started from zero (each k32
//     instruction covers exactly one block, so the tensor core never mixes two scales)
//     and the fp32 promotion acc += D_b * (s_x * s_w) follows every instruction.
//     mma.sync m16n8k32 (any sm_89+): exact products and fp32 sums. (The Hopper wgmma
//     kernels of session 6 were deleted in session 8: slower than cuBLASLt on the exact
//     codes and less accurate, wgmma's truncated FP8 accumulation; NOTES 16 and 24.)
//     Requires k % 32 == 0, 16-byte aligned rows (codes and weight), and
//     weight scale blocks with block_cols % 32 == 0 and block_rows % 32 == 0 (one scale
//     per 32 weight rows per K-block; V4.1's 32 x 32), or no scale.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/smxx_types.h"

namespace deepinfer::kernels {

// codes / scales / deq may each be null (not written); at least one of codes, deq given.
cudaError_t quant_act_fp8(const float* x, int64_t n, int64_t k, uint8_t* codes, float* scales, float* deq,
                          cudaStream_t stream);
// The dequantized values code * scale as bf16 [n, k]: exact (<= 4 significant bits), so a
// bf16 GEMM on them with fp32 accumulation forms the same products as the FP8 GEMM; the
// cuBLASLt path of Activations::kFP8 (ops/cuda/linear.cu) feeds them to cuBLASLt.
cudaError_t quant_act_fp8_bf16(const float* x, int64_t n, int64_t k, uint16_t* out, cudaStream_t stream);

struct Fp8GemmArgs {
  const uint8_t* x_codes = nullptr;  // [n, w.cols] e4m3
  const float* x_scales = nullptr;   // [n, w.cols / 32]
  int64_t n = 0;
  WeightArgs w;                      // e4m3, see above
  int64_t row0 = 0, num_rows = 0;
  float* y = nullptr;                // [n, num_rows] fp32
};

bool linear_fp8_gemm_eligible(const Fp8GemmArgs& a);
cudaError_t linear_fp8_gemm(const Fp8GemmArgs& a, cudaStream_t stream);

}  // namespace deepinfer::kernels
