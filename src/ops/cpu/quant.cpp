#include <algorithm>
#include <cmath>
#include <vector>

#include "common/numeric.h"
#include "ops/quant.h"

namespace deepinfer::ops {

float quant_fp8_block(const float* v, int64_t len, uint8_t* codes) {
  float amax = 0.0f;
  for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(v[i]));
  amax = std::max(amax, 1e-4f);
  const float s = pow2_ceil(amax * (1.0f / 448.0f));
  for (int64_t i = 0; i < len; ++i) codes[i] = float_to_e4m3(std::clamp(v[i] / s, -448.0f, 448.0f));
  return s;
}

namespace cpu {

void fake_quant_fp8(const FakeQuantParams& p) {
  if (p.dim % p.block != 0) return;
  std::vector<uint8_t> codes(size_t(p.block));
  for (int64_t t = 0; t < p.n; ++t) {
    for (int64_t b0 = 0; b0 < p.dim; b0 += p.block) {
      float* v = p.x + t * p.dim + b0;
      const float s = quant_fp8_block(v, p.block, codes.data());
      for (int64_t i = 0; i < p.block; ++i) v[i] = e4m3_to_float(codes[size_t(i)]) * s;
    }
  }
}

void fake_quant_fp4(const FakeQuantParams& p, Fp4Scale scale_kind) {
  if (p.dim % p.block != 0) return;
  for (int64_t t = 0; t < p.n; ++t) {
    for (int64_t b0 = 0; b0 < p.dim; b0 += p.block) {
      float* v = p.x + t * p.dim + b0;
      float amax = 0.0f;
      for (int64_t i = 0; i < p.block; ++i) amax = std::max(amax, std::fabs(v[i]));
      float s;
      if (scale_kind == Fp4Scale::kE4m3) {
        s = round_e4m3(std::max(amax, 6.0f * std::ldexp(1.0f, -9)) / 6.0f);
      } else {
        s = pow2_ceil(std::max(amax, 6.0f * std::ldexp(1.0f, -126)) * (1.0f / 6.0f));
      }
      for (int64_t i = 0; i < p.block; ++i) {
        float q = std::clamp(v[i] / s, -6.0f, 6.0f);
        v[i] = e2m1_to_float(float_to_e2m1(q)) * s;
      }
    }
  }
}

}  // namespace cpu
}  // namespace deepinfer::ops
