#include <cmath>

#include "ops/norm.h"

namespace deepinfer::ops::cpu {

void rms_norm(const RmsNormParams& p) {
  for (int64_t t = 0; t < p.n; ++t) {
    const float* x = p.x + t * p.dim;
    float* y = p.y + t * p.dim;
    double ss = 0.0;
    for (int64_t i = 0; i < p.dim; ++i) ss += double(x[i]) * double(x[i]);
    // The reference computes rsqrt in fp32 on the fp32 mean; eps can be as small as
    // 1e-20, which only matters for an all-zero row.
    float mean = float(ss / double(p.dim));
    float r = 1.0f / std::sqrt(mean + p.eps);
    for (int64_t i = 0; i < p.dim; ++i) {
      float v = x[i] * r;
      y[i] = p.weight ? p.weight[i] * v : v;
    }
  }
}

}  // namespace deepinfer::ops::cpu
