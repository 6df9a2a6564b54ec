#include <cmath>

#include "common/check.h"
#include "ops/rope.h"

namespace deepinfer::ops {

// Mirrors the reference's YaRN: the correction range is found from beta_fast /
// beta_slow rotations over original_max_position_embeddings, truncated to whole
// pairs, and the interpolated frequency (divided by factor) is blended in by a
// linear ramp over pair index. attention_factor stays 1 (no mscale) in V4.1.
std::vector<float> rope_inv_freq(const RopeParams& rope, int64_t rope_dim) {
  const int64_t half = rope_dim / 2;
  std::vector<float> inv(half);
  const double base = rope.theta;
  for (int64_t i = 0; i < half; ++i) {
    float exponent = float(2 * i) / float(rope_dim);
    float pos_freq = float(std::pow(base, double(exponent)));
    inv[i] = 1.0f / pos_freq;
  }
  if (!rope.yarn || rope.factor <= 1.0) return inv;
  auto correction_dim = [&](double rotations) {
    return (double(rope_dim) * std::log(double(rope.original_max_position_embeddings) / (rotations * 2.0 * M_PI))) /
           (2.0 * std::log(base));
  };
  double low = std::floor(correction_dim(rope.beta_fast));
  double high = std::ceil(correction_dim(rope.beta_slow));
  low = std::max(low, 0.0);
  high = std::min(high, double(rope_dim - 1));
  if (low == high) high += 0.001;
  for (int64_t i = 0; i < half; ++i) {
    float ramp = float((double(i) - low) / (high - low));
    ramp = std::min(1.0f, std::max(0.0f, ramp));
    float extrapolation_factor = 1.0f - ramp;
    float pos_freq = 1.0f / inv[i];
    float interp = 1.0f / (float(rope.factor) * pos_freq);
    float extrap = inv[i];
    inv[i] = interp * (1.0f - extrapolation_factor) + extrap * extrapolation_factor;
  }
  return inv;
}

namespace cpu {

void rope(const RopeParamsOp& p) {
  DI_CHECK(p.rope_dim % 2 == 0 && p.rope_dim <= p.dim);
  const int64_t half = p.rope_dim / 2;
  const int64_t d0 = p.dim - p.rope_dim;
  for (int64_t t = 0; t < p.n; ++t) {
    const float pos = float(p.positions[t]);
    for (int64_t i = 0; i < half; ++i) {
      // The angle is an fp32 product, as in the reference; cos/sin of it exactly.
      float angle = pos * p.inv_freq[i];
      float c = float(std::cos(double(angle))) * p.attention_factor;
      float s = float(std::sin(double(angle))) * p.attention_factor;
      if (p.inverse) s = -s;
      for (int64_t h = 0; h < p.heads; ++h) {
        float* v = p.x + (t * p.heads + h) * p.dim + d0 + 2 * i;
        float a = v[0], b = v[1];
        v[0] = a * c - b * s;
        v[1] = a * s + b * c;
      }
    }
  }
}

}  // namespace cpu
}  // namespace deepinfer::ops
