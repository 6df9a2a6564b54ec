#include <algorithm>
#include <cmath>
#include <vector>

#include "common/parallel.h"
#include "ops/attention.h"

namespace deepinfer::ops::cpu {

void sink_attention(const SinkAttentionParams& p) {
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
