// rms_norm: y = w * (x * rsqrt(mean(x^2) + eps)) per row, statistics in fp32.
// weight may be null (the hyper-connection input norm has none).
#pragma once

#include <cstdint>

#include "ops/linear.h"

namespace deepinfer::ops {

struct RmsNormParams {
  const float* x = nullptr;  // [n, dim]
  float* y = nullptr;        // [n, dim]; may alias x
  int64_t n = 0, dim = 0;
  const float* weight = nullptr;  // [dim] or null
  float eps = 1e-6f;
};

namespace cpu {
void rms_norm(const RmsNormParams& p);
}

}  // namespace deepinfer::ops
