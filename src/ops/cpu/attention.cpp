#include <algorithm>
#include <cmath>
#include <vector>

#include "common/check.h"
#include "common/parallel.h"
#include "ops/attention.h"

namespace deepinfer::ops::cpu {

namespace {

// Activations::kBF16 (ops/attention.h): bf16 operands, base-2 logits, an integer max,
// probabilities rounded to bf16 before PV; products and sums in double.
void sink_attention_bf16(const SinkAttentionParams& p) {
  const float log2_scale = attention_log2_scale(p.scale);
  parallel_for(p.n * p.heads, [&](int64_t w0, int64_t w1) {
    std::vector<float> y, qb(p.dim);
    std::vector<double> acc(p.dim);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t t = w / p.heads, h = w % p.heads;
      const float* q = p.q + (t * p.heads + h) * p.dim;
      float* o = p.out + (t * p.heads + h) * p.dim;
      const int64_t b = p.offsets[t], e = p.offsets[t + 1];
      if (e <= b) {  // sink only: no value
        std::fill(o, o + p.dim, 0.0f);
        continue;
      }
      for (int64_t d = 0; d < p.dim; ++d) qb[d] = round_to_bf16(q[d]);
      const float ys = p.sink[h] * kAttnLog2e;
      float mx = ys;
      y.resize(e - b);
      for (int64_t j = b; j < e; ++j) {
        const float* k = p.kv + p.ids[j] * p.dim;
        double dot = 0.0;
        for (int64_t d = 0; d < p.dim; ++d) dot += double(qb[d]) * double(round_to_bf16(k[d]));
        y[j - b] = float(dot) * log2_scale;
        mx = std::max(mx, y[j - b]);
      }
      const float m = std::ceil(mx);
      double denom = double(std::exp2(ys - m));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = b; j < e; ++j) {
        const float e2 = std::exp2(y[j - b] - m);
        denom += double(e2);
        const double pr = double(round_to_bf16(e2));
        const float* v = p.kv + p.ids[j] * p.dim;
        for (int64_t d = 0; d < p.dim; ++d) acc[d] += pr * double(round_to_bf16(v[d]));
      }
      for (int64_t d = 0; d < p.dim; ++d) o[d] = float(acc[d] / denom);
    }
  });
}

}  // namespace

void sink_attention(const SinkAttentionParams& p) {
  DI_CHECK(p.rope_dim == 0, "sink_attention: RoPE folded into the op is a CUDA kernel option (rope, op, rope here)");
  if (p.act == Activations::kBF16) return sink_attention_bf16(p);
  parallel_for(p.n * p.heads, [&](int64_t w0, int64_t w1) {
    std::vector<float> logits;
    std::vector<double> acc(p.dim);
    for (int64_t w = w0; w < w1; ++w) {
      const int64_t t = w / p.heads, h = w % p.heads;
      const float* q = p.q + (t * p.heads + h) * p.dim;
      const int64_t b = p.offsets[t], e = p.offsets[t + 1];
      logits.resize(e - b);
      float mx = p.sink[h];
      for (int64_t j = b; j < e; ++j) {
        const float* k = p.kv + p.ids[j] * p.dim;
        double dot = 0.0;
        for (int64_t d = 0; d < p.dim; ++d) dot += double(q[d]) * double(k[d]);
        logits[j - b] = float(dot) * p.scale;
        mx = std::max(mx, logits[j - b]);
      }
      double denom = std::exp(double(p.sink[h] - mx));
      for (auto& l : logits) {
        l = float(std::exp(double(l - mx)));
        denom += l;
      }
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = b; j < e; ++j) {
        const float* v = p.kv + p.ids[j] * p.dim;
        const double pr = double(logits[j - b]) / denom;
        for (int64_t d = 0; d < p.dim; ++d) acc[d] += pr * double(v[d]);
      }
      float* o = p.out + (t * p.heads + h) * p.dim;
      for (int64_t d = 0; d < p.dim; ++d) o[d] = float(acc[d]);
    }
  });
}

}  // namespace deepinfer::ops::cpu
