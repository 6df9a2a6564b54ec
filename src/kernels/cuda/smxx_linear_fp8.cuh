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

// The decode-size kernel (smxx_linear_gemv_fp8x.cu, NOTES 31): y [n, num_rows] for n = 1 .. 8
// tokens in one launch: each block quantizes the x of its K range into shared memory (bit
// for bit quant_act_fp8) and runs one mma.sync m16n8k32 e4m3 per 16 weight rows x 32-K
// block, promoted with s_w * s_x as linear_fp8_gemm. Needs an e4m3 weight with K % 32 == 0,
// 16-byte aligned data and x, no or e8m0 scales with block_cols / 32 a power of two.
// Batch invariant: the K split depends on the weight's shape (num_rows, cols) only.
struct Fp8GemvCall {
  const float* x = nullptr;  // [n, w.cols] fp32
  float* y = nullptr;        // [n, num_rows]
  WeightArgs w;
  int64_t row0 = 0, num_rows = 0;
};
bool linear_fp8_gemv_eligible(const Fp8GemvCall& c, int64_t n);
// Whether calls can share one launch: same cols, and each call's own split (so each output
// has the bits of its call alone).
bool linear_fp8_gemv_same_split(const Fp8GemvCall* calls, int count);
// count (<= kGemvMaxMulti) calls with the same n in one launch.
cudaError_t linear_fp8_gemv(const Fp8GemvCall* calls, int count, int64_t n, cudaStream_t stream);
// Launches so far (tests: the kernel really ran).
int64_t linear_fp8_gemv_launches();
// The split the kernel uses for a weight slice (diagnostics, benchmarks).
struct Fp8GemvSplit {
  int row_tiles_per_block = 0, slices_per_block = 0, cluster = 0;
};
Fp8GemvSplit linear_fp8_gemv_split(int64_t rows, int64_t cols);
// Benchmarks: the split rule's warp target (default 2048) and block limit (default 2 per
// SM); <= 0 restores a default. Changes every later call's split (and so its bits).
void linear_fp8_gemv_set_split(int target_warps, int max_blocks);
// kAuto takes this kernel at linear_fp8_gemv_min_n() <= n <= 8: 4 by default (NOTES 31: it
// lost at batch 1 in the layers graphs, won at batch 8), 1 with DEEPINFER_FP8_GEMV=1, 9 (off)
// with DEEPINFER_FP8_GEMV=0. set_min_n (tests, benchmarks): 1 .. 9, <= 0 the default.
int linear_fp8_gemv_min_n();
void linear_fp8_gemv_set_min_n(int n);
bool linear_fp8_gemv_enabled();  // min_n <= 8
// Which kernel linear_fp8_gemv launches: 0 the first one (default, measured), 1 the lean
// variant (same bits, fewer instructions per warp; DEEPINFER_FP8_GEMV_LEAN=1; NOTES 31).
int linear_fp8_gemv_variant();
void linear_fp8_gemv_set_variant(int v);

}  // namespace deepinfer::kernels
