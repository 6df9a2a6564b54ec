// Partial, interleaved RoPE on the trailing rope_dim channels of each vector:
// pairs (d0 + 2i, d0 + 2i + 1), d0 = dim - rope_dim, rotated by angle pos * inv_freq[i]
// (inverse: by -pos * inv_freq[i], which removes the query's rotation from the
// attention output). The leading dim - rope_dim channels pass through.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace deepinfer::ops {

// Inverse frequencies of one rope ("main" or "compress"), fp32 as the reference
// computes them, YaRN-blended when enabled. Size rope_dim / 2.
std::vector<float> rope_inv_freq(const RopeParams& rope, int64_t rope_dim);

struct RopeParamsOp {
  float* x = nullptr;          // [n, heads, dim], rotated in place
  int64_t n = 0, heads = 1, dim = 0, rope_dim = 0;
  const int64_t* positions = nullptr;  // [n]
  const float* inv_freq = nullptr;     // [rope_dim / 2]
  bool inverse = false;
  // cos and sin are multiplied by this (YaRN's attention factor; 1 in V4.1).
  float attention_factor = 1.0f;
};

namespace cpu {
void rope(const RopeParamsOp& p);
}

}  // namespace deepinfer::ops
