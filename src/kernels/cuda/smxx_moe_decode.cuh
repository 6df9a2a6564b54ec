// The exact e2m1 -> bf16 decode of the FP4 expert tiles (smxx_moe_tc.cu's mma.sync tiles and
// smxx_moe_wgmma.cu's wgmma tiles): one definition, so every MoE tensor-core path feeds
// the MMAs the same A operands bit for bit.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace deepinfer::kernels::moe_decode {

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

__device__ __forceinline__ uint32_t mul_bf16x2(uint32_t a, uint32_t b) {
  __nv_bfloat162 x = *reinterpret_cast<const __nv_bfloat162*>(&a), y = *reinterpret_cast<const __nv_bfloat162*>(&b);
  const __nv_bfloat162 r = __hmul2(x, y);  // exact: e2m1 value x 2^k
  return *reinterpret_cast<const uint32_t*>(&r);
}

// bf16 bits of the e2m1 magnitudes (code & 7) 0, 0.5, 1, 1.5, 2, 3, 4, 6 = 0000 3F00
// 3F80 3FC0 4000 4040 4080 40C0, split into a low-byte and a high-byte table of 8 bytes
// each (two registers): one PRMT looks up four codes.
constexpr uint32_t kLo0 = 0xC0800000u, kLo1 = 0xC0804000u;
constexpr uint32_t kHi0 = 0x3F3F3F00u, kHi1 = 0x40404040u;

// Eight codes (nibble i = element i) -> four bf16x2 words (elements (0,1), (2,3),
// (4,5), (6,7)) times the bf16x2 scale sc, given m = u & 0x77777777 (the magnitude
// indices: bit 3 would select PRMT's sign mode), mh = m >> 16 and u4 = u << 4, so that a
// caller may compute those two shifts on another pipe (smxx_moe_tc.cu's decode8_lean).
__device__ __forceinline__ void decode8_from(uint32_t u, uint32_t m, uint32_t mh, uint32_t u4, uint32_t sc,
                                             uint32_t (&p)[4]) {
  const uint32_t l0 = prmt(kLo0, kLo1, m), l1 = prmt(kLo0, kLo1, mh);
  uint32_t h0 = prmt(kHi0, kHi1, m), h1 = prmt(kHi0, kHi1, mh);
  // Sign of code i: the msb of a byte of u (odd codes) or of u << 4 (even codes); PRMT's
  // sign mode replicates it over the output byte.
  h0 |= prmt(u, u4, 0x9D8Cu) & 0x80808080u;
  h1 |= prmt(u, u4, 0xBFAEu) & 0x80808080u;
  p[0] = mul_bf16x2(prmt(l0, h0, 0x5140u), sc);
  p[1] = mul_bf16x2(prmt(l0, h0, 0x7362u), sc);
  p[2] = mul_bf16x2(prmt(l1, h1, 0x5140u), sc);
  p[3] = mul_bf16x2(prmt(l1, h1, 0x7362u), sc);
}
__device__ __forceinline__ void decode8(uint32_t u, uint32_t sc, uint32_t (&p)[4]) {
  const uint32_t m = u & 0x77777777u;
  decode8_from(u, m, m >> 16, u << 4, sc, p);
}

// ue8m0 byte -> the same power of two as bf16 bits, in both halves.
__device__ __forceinline__ uint32_t scale_bf16x2(uint8_t e) {
  const uint32_t b = e == 0 ? 0x0040u : e == 0xff ? 0x7fc0u : uint32_t(e) << 7;
  return b | (b << 16);
}

}  // namespace deepinfer::kernels::moe_decode
