// RoPE arithmetic shared by the kernels that rotate rows (smxx_elementwise.cu's rope and
// norm_rope_quant, smxx_attention.cu's q on load and output on store): one definition,
// so a fused kernel's rotation is bitwise the rope kernel's. Internal to the kernels
// directory (device code only).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

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

// The pair (x0, x1) rotated; __fmul_rn keeps the two products unfused, as the CPU
// computes them.
__device__ __forceinline__ void rope_rotate(float& x0, float& x1, float c, float s) {
  const float y0 = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  const float y1 = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  x0 = y0;
  x1 = y1;
}
__device__ __forceinline__ void rope_pair(float* v, float c, float s) { rope_rotate(v[0], v[1], c, s); }

}  // namespace deepinfer::kernels
