#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "common/check.h"
#include "ops/moe.h"

namespace deepinfer::ops::cpu {

void moe_router(const MoeRouterParams& p) {
  const int64_t num_experts = p.gate.rows;
  std::vector<float> logits(p.n * num_experts);
  linear({p.x, logits.data(), p.n, p.gate});
  std::vector<float> score(num_experts), biased(num_experts);
  std::vector<int64_t> order(num_experts);
  for (int64_t t = 0; t < p.n; ++t) {
    for (int64_t e = 0; e < num_experts; ++e) {
      float z = logits[t * num_experts + e] / p.temp;
      float sp = z > 20.0f ? z : float(std::log1p(std::exp(double(z))));
      score[e] = std::sqrt(sp);
      biased[e] = score[e] + (p.bias ? p.bias[e] : 0.0f);
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + p.top_k, order.end(), [&](int64_t a, int64_t b) {
      return biased[a] > biased[b] || (biased[a] == biased[b] && a < b);
    });
    float sum = 0.0f;
    for (int64_t k = 0; k < p.top_k; ++k) sum += score[order[k]];
    for (int64_t k = 0; k < p.top_k; ++k) {
      float w = score[order[k]];
      if (p.norm_topk_prob && p.top_k > 1) w = w / (sum + 1e-20f);
      p.expert_ids[t * p.top_k + k] = order[k];
      p.expert_weights[t * p.top_k + k] = w * p.routed_scaling_factor;
    }
  }
}

// Under Activations::kBF16 x is rounded to bf16 before w1 / w3 and the scaled SwiGLU
// output (route weight included) before w2 (ops/linear.h); kF32 rounds nothing.
// Under Activations::kFP8 (the model's fp8 mode, linear.h activations_for) each of w1, w3,
// w2 takes kFP8 if its weight can (its x quantized per 32-K block inside linear), else its
// x rounded to bf16.
void swiglu_expert(const SwigluExpertParams& p) {
  const int64_t inter = p.w1.rows, dim = p.w1.cols;
  const bool fp8 = p.act == Activations::kFP8;
  const bool bf16 = p.act == Activations::kBF16;
  std::vector<float> xr;
  const float* x = p.x;
  if (bf16) {
    xr.resize(size_t(p.n * dim));
    for (int64_t i = 0; i < p.n * dim; ++i) xr[i] = round_to_bf16(p.x[i]);
    x = xr.data();
  }
  std::vector<float> gate(p.n * inter), up(p.n * inter);
  linear({x, gate.data(), p.n, p.w1, 0, -1, fp8 ? activations_for(p.act, p.w1) : Activations::kF32});
  linear({x, up.data(), p.n, p.w3, 0, -1, fp8 ? activations_for(p.act, p.w3) : Activations::kF32});
  const float lim = p.swiglu_limit;
  for (int64_t t = 0; t < p.n; ++t) {
    for (int64_t i = 0; i < inter; ++i) {
      float g = gate[t * inter + i], u = up[t * inter + i];
      if (lim > 0) {
        u = std::clamp(u, -lim, lim);
        g = std::min(g, lim);
      }
      float silu = g / (1.0f + std::exp(-g));
      float v = silu * u;
      if (p.route_weight) v = p.route_weight[t] * v;
      gate[t * inter + i] = bf16 ? round_to_bf16(v) : v;
    }
  }
  linear({gate.data(), p.y, p.n, p.w2, 0, -1, fp8 ? activations_for(p.act, p.w2) : Activations::kF32});
}

void moe_experts(const MoeExpertsParams& p) {
  DI_CHECK(p.n >= 0 && p.top_k >= 1 && p.num_experts >= 0, "moe_experts: bad sizes");
  if (p.n == 0) return;
  const int64_t d = p.experts[0].w1.cols, k = p.top_k;
  std::vector<float> acc(p.n * d, 0.0f);
  for (int64_t e = 0; e < p.num_experts; ++e) {
    std::vector<int64_t> rows;
    std::vector<float> rw;
    for (int64_t t = 0; t < p.n; ++t)
      for (int64_t j = 0; j < k; ++j)
        if (p.expert_ids[t * k + j] == e) {
          rows.push_back(t);
          rw.push_back(p.expert_weights[t * k + j]);
        }
    if (rows.empty()) continue;
    const int64_t m_rows = int64_t(rows.size());
    std::vector<float> xin(m_rows * d), yout(m_rows * d);
    for (int64_t i = 0; i < m_rows; ++i) std::copy_n(p.x + rows[i] * d, d, xin.data() + i * d);
    const MoeExpertRef& w = p.experts[e];
    swiglu_expert({xin.data(), m_rows, w.w1, w.w3, w.w2, rw.data(), p.swiglu_limit, yout.data(), p.act});
    for (int64_t i = 0; i < m_rows; ++i)
      for (int64_t j = 0; j < d; ++j) acc[rows[i] * d + j] += yout[i * d + j];
  }
  for (int64_t i = 0; i < p.n * d; ++i) p.y[i] = p.residual ? acc[i] + p.residual[i] : acc[i];
}

}  // namespace deepinfer::ops::cpu
