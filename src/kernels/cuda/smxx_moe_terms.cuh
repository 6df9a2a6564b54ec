// Device arithmetic the MoE kernels share (smxx_moe.cu, smxx_moe_tc.cu): the fp32 -> bf16
// planes of the tensor-core tiles (also split by the plan's histogram launch) and the
// SwiGLU. One definition, so every path gives the same bits.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace deepinfer::kernels::moe_terms {

// v -> kTerms bf16 values (plane 0 = hi); under kTerms = 1 the bf16 rounding (RNE).
// kTerms = 3: hi + mid + lo = v exactly (each remainder is exact in fp32).
template <int kTerms>
__device__ __forceinline__ void store_terms(uint16_t* base, int64_t plane, int64_t idx, float v) {
  const __nv_bfloat16 hi = __float2bfloat16_rn(v);
  base[idx] = __bfloat16_as_ushort(hi);
  if constexpr (kTerms == 3) {
    const float r = v - __bfloat162float(hi);  // exact in fp32
    const __nv_bfloat16 mid = __float2bfloat16_rn(r);
    const __nv_bfloat16 lo = __float2bfloat16_rn(r - __bfloat162float(mid));
    base[plane + idx] = __bfloat16_as_ushort(mid);
    base[2 * plane + idx] = __bfloat16_as_ushort(lo);
  }
}

// Four values x[i .. i + 3] (i % 4 == 0, i < count) -> the planes.
template <int kTerms>
__device__ __forceinline__ void split4(const float* x, uint16_t* out, int64_t count, int64_t i) {
  const float4 v = *reinterpret_cast<const float4*>(x + i);
  store_terms<kTerms>(out, count, i, v.x);
  store_terms<kTerms>(out, count, i + 1, v.y);
  store_terms<kTerms>(out, count, i + 2, v.z);
  store_terms<kTerms>(out, count, i + 3, v.w);
}

// SwiGLU as the CPU op computes it: route weight * silu(min(g, lim)) * clamp(u, -lim, lim)
// (no clamps when lim <= 0), each product rounded once (no FMA contraction).
__device__ __forceinline__ float swiglu(float g, float u, float lim, float rw, bool has_rw) {
  if (lim > 0) {
    u = u < -lim ? -lim : (lim < u ? lim : u);
    g = g < lim ? g : lim;
  }
  float v = __fmul_rn(g / (1.0f + expf(-g)), u);
  if (has_rw) v = __fmul_rn(rw, v);
  return v;
}

}  // namespace deepinfer::kernels::moe_terms
