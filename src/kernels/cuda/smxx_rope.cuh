// RoPE's per-pair arithmetic, shared by the rope kernels (smxx_elementwise.cu) and the
// small-batch attention kernel that rotates q and its output in place of two rope
// launches (smxx_attention_small.cu): one definition, so the fused kernel's bits are the
// separate kernels'.
#pragma once

#include <cstdint>

namespace deepinfer::kernels {
namespace {

// cos / sin of pair i at a position: the fp32 angle evaluated in double and rounded,
// exactly as the CPU does.
__device__ __forceinline__ void rope_cs(int64_t pos, const float* inv_freq, int64_t i, float factor, bool inverse,
                                        float& c, float& s) {
  const float angle = float(pos) * inv_freq[i];
  double sd, cd;
  sincos(double(angle), &sd, &cd);
  c = float(cd) * factor;
  s = float(sd) * factor;
  if (inverse) s = -s;
}
// __fmul_rn keeps the two products unfused, as the CPU computes them.
__device__ __forceinline__ void rope_pair(float* v, float c, float s) {
  const float x0 = v[0], x1 = v[1];
  v[0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  v[1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

}  // namespace
}  // namespace deepinfer::kernels
