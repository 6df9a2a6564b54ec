// Bit-level number formats and the model's fake-quantization rounding.
#include <gtest/gtest.h>

#include <cmath>

#include "common/numeric.h"
#include "ops/quant.h"

namespace deepinfer {
namespace {

TEST(Numeric, E4m3RoundTripsEveryCode) {
  for (int v = 0; v < 256; ++v) {
    if ((v & 0x7f) == 0x7f) continue;  // NaN
    float f = e4m3_to_float(uint8_t(v));
    if (f == 0.0f) continue;  // +-0 both map to their own sign
    EXPECT_EQ(float_to_e4m3(f), uint8_t(v)) << v;
  }
  EXPECT_EQ(e4m3_to_float(0x7e), 448.0f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
}

TEST(Numeric, E4m3RoundsToNearestEven) {
  // Between 1.0 (m=0) and 1.125 (m=1) the tie 1.0625 goes to the even mantissa.
  EXPECT_EQ(round_e4m3(1.0625f), 1.0f);
  EXPECT_EQ(round_e4m3(1.1875f), 1.25f);  // tie between 1.125 (odd) and 1.25 (even)
  EXPECT_EQ(round_e4m3(-3.3f), -3.25f);
  EXPECT_EQ(round_e4m3(500.0f), 448.0f);
  EXPECT_EQ(round_e4m3(std::ldexp(1.5f, -10)), std::ldexp(1.0f, -9));  // 0.75 subnormal steps -> 1 step
}

TEST(Numeric, E2m1TiesGoToEvenCode) {
  const float in[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, 5.5f, 0.3f, -0.75f};
  const float out[] = {0.0f, 1.0f, 1.0f, 2.0f, 2.0f, 4.0f, 4.0f, 6.0f, 0.5f, -1.0f};
  for (size_t i = 0; i < std::size(in); ++i) EXPECT_EQ(e2m1_to_float(float_to_e2m1(in[i])), out[i]) << in[i];
}

TEST(Numeric, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.00390625f)), 1.0f);    // tie -> even
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.01171875f)), 1.015625f);  // tie -> even (up)
}

TEST(Numeric, Pow2Ceil) {
  EXPECT_EQ(pow2_ceil(1.0f), 1.0f);
  EXPECT_EQ(pow2_ceil(1.0001f), 2.0f);
  EXPECT_EQ(pow2_ceil(0.3f), 0.5f);
}

TEST(FakeQuant, Fp8BlockUsesPowerOfTwoScale) {
  std::vector<float> x(32, 0.0f);
  x[0] = 448.0f * 3.0f;  // amax/448 = 3 -> scale 4; 1344/4 = 336 is a tie -> 320 (even)
  x[1] = 5.0f;           // 5/4 = 1.25 -> e4m3 1.25 -> 5
  x[2] = 1.1f;           // 0.275 -> nearest e4m3 0.28125 -> 1.125
  ops::cpu::fake_quant_fp8({x.data(), 1, 32, 32});
  EXPECT_EQ(x[0], 1280.0f);
  EXPECT_EQ(x[1], 5.0f);
  EXPECT_EQ(x[2], 1.125f);
}

TEST(FakeQuant, SkipsWidthsThatAreNotBlockMultiples) {
  std::vector<float> x = {0.123f, 0.456f, 7.0f};
  auto copy = x;
  ops::cpu::fake_quant_fp8({x.data(), 1, 3, 32});
  EXPECT_EQ(x, copy);
}

TEST(FakeQuant, Fp4E4m3Scale) {
  std::vector<float> x(16, 0.0f);
  x[0] = 6.0f;   // amax 6 -> scale e4m3(1) = 1
  x[1] = 2.6f;   // -> 3
  x[2] = -0.3f;  // -> -0.5
  ops::cpu::fake_quant_fp4({x.data(), 1, 16, 16}, ops::Fp4Scale::kE4m3);
  EXPECT_EQ(x[0], 6.0f);
  EXPECT_EQ(x[1], 3.0f);
  EXPECT_EQ(x[2], -0.5f);
}

}  // namespace
}  // namespace deepinfer
