// Hyper-connection mixes, collapse and expand on the GPU (kernels/cuda/smxx_hyper_connection).
#include "kernels/cuda/smxx_hyper_connection.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer::ops::cuda {

void hc_mixes(const HcMixesParams& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.hc >= 1 && p.hc <= kernels::kMaxHc, "hc_mixes: hc out of range for the CUDA kernel");
  CUDA_OP_CHECK(p.n >= 0 && p.dim > 0 && p.sinkhorn_iters >= 1, "hc_mixes: bad shape");
  kernels::HcMixesArgs a;
  a.h = p.h;
  a.fn = p.fn;
  a.base = p.base;
  a.scale = p.scale;
  a.n = p.n;
  a.hc = p.hc;
  a.dim = p.dim;
  a.norm_eps = p.norm_eps;
  a.hc_eps = p.hc_eps;
  a.sinkhorn_iters = p.sinkhorn_iters;
  a.pre = p.pre;
  a.post = p.post;
  a.comb = p.comb;
  if (p.n == 0) return;
  // Stream-ordered scratch for the split-K partial sums (the step arena will own it).
  const size_t bytes = sizeof(float) * size_t(p.n) * size_t(kernels::hc_mixes_splits(p.hc, p.dim)) *
                       size_t(kernels::kMaxMixes + 1);
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&a.workspace), bytes, stream));
  const cudaError_t e = kernels::hc_mixes(a, stream);
  CUDA_CHECK(cudaFreeAsync(a.workspace, stream));
  CUDA_CHECK(e);
}

void hc_collapse(const HcCollapseParams& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.n >= 0 && p.hc >= 1 && p.dim > 0, "hc_collapse: bad shape");
  CUDA_CHECK(kernels::hc_collapse({p.h, p.pre, p.x, p.n, p.hc, p.dim}, stream));
}

void hc_expand(const HcExpandParams& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.hc >= 1 && p.hc <= kernels::kMaxHc, "hc_expand: hc out of range for the CUDA kernel");
  CUDA_OP_CHECK(p.n >= 0 && p.dim > 0, "hc_expand: bad shape");
  CUDA_CHECK(kernels::hc_expand({p.h, p.y, p.post, p.comb, p.n, p.hc, p.dim}, stream));
}

}  // namespace deepinfer::ops::cuda
