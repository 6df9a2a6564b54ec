#include "common/numeric.h"

namespace deepinfer {

float fp16_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t man = h & 0x3ff;
  if (exp == 0) {
    float v = std::ldexp(float(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_float(sign | 0x7f800000u | (man << 13));
  return bits_to_float(sign | ((exp + 112) << 23) | (man << 13));
}

float e4m3_to_float(uint8_t v) {
  uint32_t exp = (v >> 3) & 0xf;
  uint32_t man = v & 7;
  float mag;
  if (exp == 0xf && man == 7) return NAN;
  if (exp == 0)
    mag = std::ldexp(float(man), -9);  // subnormal: man/8 * 2^-6
  else
    mag = std::ldexp(1.0f + float(man) / 8.0f, int(exp) - 7);
  return (v & 0x80) ? -mag : mag;
}

uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  uint8_t sign = std::signbit(f) ? 0x80 : 0;
  float a = std::fabs(f);
  if (a >= 448.0f) return sign | 0x7e;
  // Quantum of the binade holding a: subnormals share the 2^-9 step.
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  int unbiased = e - 1;
  if (unbiased < -6) unbiased = -6;
  float step = std::ldexp(1.0f, unbiased - 3);
  float q = std::nearbyint(a / step) * step;  // default rounding mode: ties to even
  if (q >= 448.0f) return sign | 0x7e;
  // Encode q exactly.
  if (q < std::ldexp(1.0f, -6)) {
    int man = int(q / std::ldexp(1.0f, -9));
    return sign | uint8_t(man);
  }
  int qe;
  float qm = std::frexp(q, &qe);  // q = qm * 2^qe, qm in [0.5, 1)
  int exp = qe - 1 + 7;
  int man = int((qm * 2.0f - 1.0f) * 8.0f);
  return sign | uint8_t(exp << 3) | uint8_t(man);
}

uint8_t float_to_e2m1(float f) {
  // Thresholds between grid points; at a tie the even code wins, i.e. ties at
  // 0.25, 1.25, 2.5 and 5 round down and ties at 0.75, 1.75 and 3.5 round up.
  float a = std::fabs(f);
  uint8_t code;
  if (a < 0.25f || a == 0.25f) code = 0;
  else if (a < 0.75f) code = 1;
  else if (a < 1.25f || a == 1.25f) code = 2;
  else if (a < 1.75f) code = 3;
  else if (a < 2.5f || a == 2.5f) code = 4;
  else if (a < 3.5f) code = 5;
  else if (a < 5.0f || a == 5.0f) code = 6;
  else code = 7;
  return code | (std::signbit(f) ? 8 : 0);
}

}  // namespace deepinfer
