// Scalar number formats used by DeepSeek checkpoints and by the model's own
// quantization-aware rounding: bf16, fp16, FP8 e4m3 (OCP "fn": no inf, one NaN
// code, max 448), ue8m0 scales (a biased power-of-two exponent) and FP4 e2m1.
// All conversions are exact bit-level definitions so every backend rounds alike.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace deepinfer {

inline float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }

// Round to nearest even; NaN stays NaN.
inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
inline float round_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

float fp16_to_float(uint16_t h);

// e4m3fn: 1 sign, 4 exponent (bias 7), 3 mantissa; 0x7f/0xff = NaN; no infinities.
float e4m3_to_float(uint8_t v);
// Round to nearest even onto the e4m3 grid, saturating to +-448 (torch's
// .to(float8_e4m3fn) for in-range values; callers clamp before converting).
uint8_t float_to_e4m3(float f);
inline float round_e4m3(float f) { return e4m3_to_float(float_to_e4m3(f)); }

// ue8m0: value 2^(e-127); 0xff is NaN.
inline float e8m0_to_float(uint8_t e) {
  if (e == 0xff) return NAN;
  return std::ldexp(1.0f, int(e) - 127);
}

// e2m1 code: bit 3 sign, bits 0..2 index into {0, .5, 1, 1.5, 2, 3, 4, 6}.
inline float e2m1_to_float(uint8_t code) {
  static const float kTable[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  float v = kTable[code & 7];
  return (code & 8) ? -v : v;
}
// Round to nearest, ties to the even code, of a value already clamped to [-6, 6].
uint8_t float_to_e2m1(float f);

// 2^ceil(log2(t)) for t > 0 via the fp32 bit pattern (exponent - 127, +1 if any
// mantissa bit is set) -- the reference kernel's ue8m0 scale rounding.
inline float pow2_ceil(float t) {
  uint32_t bits = float_to_bits(t);
  int exponent = int((bits >> 23) & 0xff);
  int k = exponent - 127 + ((bits & 0x7fffff) != 0 ? 1 : 0);
  return std::ldexp(1.0f, k);
}

}  // namespace deepinfer
