// linear on the GPU (kernels/cuda/smxx_linear): weights dequantized in the kernel.
#include <algorithm>

#include "kernels/cuda/smxx_linear.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"

namespace deepinfer::ops::cuda {

constexpr int64_t kInvariantChunk = 8;  // the gemv kernel's largest token count

void linear(const LinearParams& p, cudaStream_t stream) { linear(p, LinearMode::kAuto, stream); }

void linear(const LinearParams& p, LinearMode mode, cudaStream_t stream) {
  const int64_t rows = p.num_rows < 0 ? p.w.rows - p.row0 : p.num_rows;
  CUDA_OP_CHECK(p.row0 >= 0 && rows >= 0 && p.row0 + rows <= p.w.rows, "linear: row slice out of range");
  CUDA_OP_CHECK(p.n >= 0, "linear: negative batch");
  kernels::LinearArgs a;
  a.x = p.x;
  a.y = p.y;
  a.n = p.n;
  a.w = to_weight_args(p.w);
  a.row0 = p.row0;
  a.num_rows = rows;
  if (mode == LinearMode::kInvariant) {
    // The gemv kernel's per-row arithmetic does not depend on n (its K split comes from
    // the weight's width; each token's sums run in the same order for any token count),
    // so running it on chunks of at most 8 tokens gives every row the same bits in any
    // batch. Weights it cannot take go through the tiled kernel for every n.
    kernels::LinearArgs probe = a;
    probe.n = 1;
    if (kernels::linear_gemv_eligible(probe)) {
      for (int64_t t0 = 0; t0 < p.n; t0 += kInvariantChunk) {
        kernels::LinearArgs c = a;
        c.x = p.x + t0 * p.w.cols;
        c.y = p.y + t0 * rows;
        c.n = std::min<int64_t>(kInvariantChunk, p.n - t0);
        c.path = kernels::LinearPath::kGemv;
        CUDA_CHECK(kernels::linear(c, stream));
      }
      return;
    }
    a.path = kernels::LinearPath::kTiled;
  }
  CUDA_CHECK(kernels::linear(a, stream));
}

}  // namespace deepinfer::ops::cuda
