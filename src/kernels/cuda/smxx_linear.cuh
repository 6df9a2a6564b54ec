// y[n, num_rows] = x[n, cols] . W[row0 : row0 + num_rows, :]^T with W in any
// checkpoint format (F32, BF16, F16, FP8 e4m3, packed FP4 e2m1; optional e8m0 or
// fp32 block scales), dequantized in the kernel, fp32 activations and fp32
// accumulation.
//
// Two paths:
//   gemv  (n <= 8, 16-byte aligned rows): memory-bound decode path. Each warp
//         streams 16-byte weight vectors of two rows, decodes them in registers
//         (hardware e4m3->f16 conversion, an fp16 bit trick for e2m1) and applies
//         the block scale once per vector, since a vector never straddles a block.
//   tiled (anything else): a shared-memory SIMT GEMM, 64 x 64 tiles, weights
//         dequantized while staged. Correct for every format and shape; at batch
//         >= 16 it is fp32-FMA-bound, far from the memory floor. Tensor cores
//         (bf16 / fp8 activations, wgmma) are the next step there.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/smxx_common.cuh"

namespace deepinfer::kernels {

enum class LinearPath : int { kAuto, kGemv, kTiled };

struct LinearArgs {
  const float* x = nullptr;  // [n, w.cols]
  float* y = nullptr;        // [n, num_rows]
  int64_t n = 0;
  WeightArgs w;
  int64_t row0 = 0, num_rows = 0;  // 0 <= row0, row0 + num_rows <= w.rows
  LinearPath path = LinearPath::kAuto;
};
cudaError_t linear(const LinearArgs& a, cudaStream_t stream);

// Whether the gemv path can take these arguments (alignment and block layout).
bool linear_gemv_eligible(const LinearArgs& a);

}  // namespace deepinfer::kernels
