// Mixture-of-experts kernels (MODEL_V41.md §6):
//   router_logits  logits[t, e] = x[t] . gate[e], accumulated in double. The router
//                  is tiny (384 x 5120 per token) and its top-k is a discrete choice:
//                  double sums make the logits round to the same fp32 values as the
//                  CPU oracle's, so expert choices agree exactly, ties included.
//   router_select  s = sqrt(softplus(logit / temp)), top_k of s + bias (ties to the
//                  lower expert id), weights = s at the chosen experts, normalized
//                  and scaled. One warp per token.
//   swiglu_act     h = route_weight * silu(min(g, L)) * clamp(u, -L, L), in place on g.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/smxx_types.h"

namespace deepinfer::kernels {

struct RouterLogitsArgs {
  const float* x = nullptr;  // [n, gate.cols]
  int64_t n = 0;
  WeightArgs gate;           // [num_experts, dim]
  float* logits = nullptr;   // [n, num_experts]
};
cudaError_t router_logits(const RouterLogitsArgs& a, cudaStream_t stream);

struct RouterSelectArgs {
  const float* logits = nullptr;  // [n, num_experts]
  const float* bias = nullptr;    // [num_experts] or null
  int64_t n = 0, num_experts = 0, top_k = 1;  // top_k <= num_experts <= 4096
  float temp = 1.0f;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  int64_t* expert_ids = nullptr;    // [n, top_k]
  float* expert_weights = nullptr;  // [n, top_k]
};
cudaError_t router_select(const RouterSelectArgs& a, cudaStream_t stream);

struct SwigluActArgs {
  float* gate = nullptr;        // [n, inter], overwritten with the activation
  const float* up = nullptr;    // [n, inter]
  const float* route_weight = nullptr;  // [n] or null
  int64_t n = 0, inter = 0;
  float limit = 10.0f;          // <= 0: no clamps
};
cudaError_t swiglu_act(const SwigluActArgs& a, cudaStream_t stream);

}  // namespace deepinfer::kernels
