// MoE router and SwiGLU expert on the GPU (kernels/cuda/smxx_moe, smxx_linear).
#include "kernels/cuda/smxx_moe.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"

namespace deepinfer::ops::cuda {

namespace {
// Stream-ordered scratch, freed on the same stream when it goes out of scope.
struct Scratch {
  float* p = nullptr;
  cudaStream_t s;
  Scratch(int64_t count, cudaStream_t stream) : s(stream) {
    if (count > 0) CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&p), size_t(count) * sizeof(float), s));
  }
  ~Scratch() {
    if (p) cudaFreeAsync(p, s);  // no throw from a destructor; a failure resurfaces at the next check
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};
}  // namespace

void moe_router(const MoeRouterParams& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.n >= 0 && p.top_k >= 1 && p.top_k <= p.gate.rows, "moe_router: bad top_k");
  if (p.n == 0) return;
  const int64_t experts = p.gate.rows;
  Scratch logits(p.n * experts, stream);
  kernels::RouterLogitsArgs la;
  la.x = p.x;
  la.n = p.n;
  la.gate = to_weight_args(p.gate);
  la.logits = logits.p;
  CUDA_CHECK(kernels::router_logits(la, stream));
  kernels::RouterSelectArgs sa;
  sa.logits = logits.p;
  sa.bias = p.bias;
  sa.n = p.n;
  sa.num_experts = experts;
  sa.top_k = p.top_k;
  sa.temp = p.temp;
  sa.norm_topk_prob = p.norm_topk_prob;
  sa.routed_scaling_factor = p.routed_scaling_factor;
  sa.expert_ids = p.expert_ids;
  sa.expert_weights = p.expert_weights;
  CUDA_CHECK(kernels::router_select(sa, stream));
}

void swiglu_expert(const SwigluExpertParams& p, cudaStream_t stream) {
  swiglu_expert(p, LinearMode::kAuto, stream);
}

void swiglu_expert(const SwigluExpertParams& p, LinearMode mode, cudaStream_t stream) {
  const int64_t inter = p.w1.rows, dim = p.w1.cols;
  CUDA_OP_CHECK(p.w3.rows == inter && p.w3.cols == dim && p.w2.rows == dim && p.w2.cols == inter,
                "swiglu_expert: w1/w3 [inter, dim] and w2 [dim, inter] disagree");
  if (p.n == 0) return;
  Scratch gate(p.n * inter, stream), up(p.n * inter, stream);
  linear({p.x, gate.p, p.n, p.w1}, mode, stream);
  linear({p.x, up.p, p.n, p.w3}, mode, stream);
  CUDA_CHECK(kernels::swiglu_act({gate.p, up.p, p.route_weight, p.n, inter, p.swiglu_limit}, stream));
  linear({gate.p, p.y, p.n, p.w2}, mode, stream);
}

}  // namespace deepinfer::ops::cuda
