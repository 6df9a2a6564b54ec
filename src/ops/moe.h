// Mixture-of-experts pieces (MODEL_V41.md §6).
//   moe_router: scores s = sqrt(softplus(x . Wg / temp)) (fp32); experts chosen by
//     top_k of s + bias (exact ties go to the lower expert id); weights are the
//     unbiased s at the chosen experts, normalized by (sum + 1e-20) when
//     norm_topk_prob and top_k > 1, times routed_scaling_factor.
//   swiglu_expert: y = w2 . (route_weight * silu(min(w1.x, L)) * clamp(w3.x, -L, L));
//     L = swiglu_limit (no clamps when L <= 0). The weight multiplies before w2.
//   moe_experts: the routed part of the MoE for a batch: token t's output is
//     0 + y_e1 + y_e2 + ... over its top_k slots in ascending expert id (ties, i.e. a
//     repeated id, in slot order), y_e = swiglu_expert(x[t]; experts[e], route
//     weight), then + residual[t] when given (the shared expert's output). That is
//     the order the CPU model has always summed in (experts ascending, then shared),
//     so the combine adds the same fp32 numbers in the same order on every backend
//     and a token's sum never depends on the rest of the batch. Slots whose id is
//     outside [0, num_experts) contribute nothing.
#pragma once

#include <cstdint>

#include "ops/linear.h"

namespace deepinfer::ops {

struct MoeRouterParams {
  const float* x = nullptr;  // [n, dim]
  int64_t n = 0;
  WeightRef gate;            // [num_experts, dim]
  const float* bias = nullptr;  // [num_experts] selection bias (may be null)
  int64_t top_k = 1;
  float temp = 1.0f;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  int64_t* expert_ids = nullptr;  // [n, top_k]
  float* expert_weights = nullptr;  // [n, top_k]
};

struct SwigluExpertParams {
  const float* x = nullptr;  // [n, dim]
  int64_t n = 0;
  WeightRef w1, w3;  // [inter, dim]
  WeightRef w2;      // [dim, inter]
  const float* route_weight = nullptr;  // [n] or null (shared expert: weight 1)
  float swiglu_limit = 10.0f;
  float* y = nullptr;  // [n, dim], overwritten
  Activations act = Activations::kF32;  // see ops/linear.h
};

struct MoeExpertRef {
  WeightRef w1, w3;  // [inter, dim]
  WeightRef w2;      // [dim, inter]
};

struct MoeExpertsParams {
  const float* x = nullptr;  // [n, dim]
  int64_t n = 0;
  int64_t top_k = 1;
  const int64_t* expert_ids = nullptr;   // [n, top_k] (moe_router's output)
  const float* expert_weights = nullptr;  // [n, top_k]
  const MoeExpertRef* experts = nullptr;  // [num_experts] (host array; see the CUDA op for its table)
  int64_t num_experts = 0;
  float swiglu_limit = 10.0f;
  const float* residual = nullptr;  // [n, dim] added last, or null
  float* y = nullptr;               // [n, dim], overwritten
  Activations act = Activations::kF32;  // see ops/linear.h
};

namespace cpu {
void moe_experts(const MoeExpertsParams& p);
void moe_router(const MoeRouterParams& p);
void swiglu_expert(const SwigluExpertParams& p);
}  // namespace cpu

}  // namespace deepinfer::ops
