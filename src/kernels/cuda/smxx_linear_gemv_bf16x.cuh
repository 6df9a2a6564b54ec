// The exact FP8 -> bf16 decode and the bf16 MMA that the one-token gemvs on the tensor cores
// share (the tensor-core gemv, smxx_linear_gemv_tc.cu, NOTES 26; the tensor-map gemv,
// smxx_linear_gemv_tmap.cu, NOTES 38): one definition, so both decode the same bits.
#pragma once

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace deepinfer::kernels::gemv {

// Two e4m3 codes (low byte: element 0) -> bf16x2 bits of their values * 2^-112 (exact).
__device__ __forceinline__ uint32_t e4m3x2_to_bf16x2_scaled(uint32_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(pair & 0xffffu), __NV_E4M3);
  const uint32_t u = uint32_t(h.x) | (uint32_t(h.y) << 16);
  return ((u & 0x7fff7fffu) >> 3) | (u & 0x80008000u);
}

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  uint32_t d;
  // + (-0.0): a product's sign of zero is kept (x + -0 = x for every x).
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

// x[lo], x[hi] rounded to bf16 (RNE, as round_bf16) -> bf16x2 bits (lo in the low half).
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}

__device__ __forceinline__ void mma_bf16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// bf16x2 bits of 2^112 * scale for an e8m0 scale code (the factor that undoes the decode's
// 2^-112 and applies the block scale in one multiply). Codes above 142 do not fit one bf16
// factor: f2 then holds the second factor (1.0 = 0x3f80 otherwise).
__device__ __forceinline__ void scale_factors(uint32_t code, uint32_t& f1, uint32_t& f2) {
  if (code <= 142u) {
    const uint32_t b = (code + 112u) << 7;  // 2^(code - 127 + 112)
    f1 = b | (b << 16);
    f2 = 0x3f803f80u;
  } else {
    f1 = 0x77807780u;                                           // 2^112
    const uint32_t b = code == 255u ? 0x7fc0u : (code << 7);   // 2^(code - 127); 0xff: NaN as e8m0_to_float
    f2 = b | (b << 16);
  }
}

}  // namespace deepinfer::kernels::gemv
