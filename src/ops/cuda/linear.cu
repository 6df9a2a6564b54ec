// linear on the GPU (kernels/cuda/smxx_linear): weights dequantized in the kernel.
#include "kernels/cuda/smxx_linear.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"

namespace deepinfer::ops::cuda {

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
  if (mode == LinearMode::kInvariant) a.path = kernels::LinearPath::kTiled;  // one code path for every n
  CUDA_CHECK(kernels::linear(a, stream));
}

}  // namespace deepinfer::ops::cuda
