// Activations::kFP8 (ops/linear.h) on the CPU oracle: the activation quantization rule
// of MODEL_V41.md §9.3 on hand-checked values (scale rounding, the 1e-4 amax clamp, zero
// blocks, a ragged K tail) and the block-scaled linear against sums written out here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <vector>

#include "common/check.h"
#include "common/numeric.h"
#include "ops/linear.h"
#include "ops/moe.h"
#include "ops/quant.h"
#include "fp8_test_weight.h"

namespace deepinfer {
namespace {

float decode(uint8_t c) { return e4m3_to_float(c); }

TEST(Fp8Activations, BlockScaleAndCodesHandChecked) {
  std::vector<uint8_t> codes(32);
  // amax 1: 1/448 = 2^-8.81 -> s = 2^-8; x / s = 256 x.
  std::vector<float> v(32, 0.0f);
  v[0] = 1.0f;
  v[1] = 0.3f;      // 76.8 -> on [64, 128) the e4m3 step is 8: 80 -> 0.3125
  v[2] = -0.3f;     // symmetric
  v[3] = 0.0146484375f;  // 3.75 = 1.875 * 2: exactly on the grid (e4m3 [2, 4) step 0.25)
  v[4] = 0.01123046875f; // 2.875: between 2.75 and 3.0, a tie -> even mantissa (3.0)
  v[5] = 1e-6f;     // 2.56e-4 -> subnormal step 2^-9: round(0.131) = 0
  EXPECT_EQ(ops::quant_fp8_block(v.data(), 32, codes.data()), std::ldexp(1.0f, -8));
  EXPECT_EQ(decode(codes[0]), 256.0f);
  EXPECT_EQ(decode(codes[1]), 80.0f);
  EXPECT_EQ(decode(codes[2]), -80.0f);
  EXPECT_EQ(decode(codes[3]), 3.75f);
  EXPECT_EQ(decode(codes[4]), 3.0f);
  EXPECT_EQ(decode(codes[5]), 0.0f);
  EXPECT_EQ(decode(codes[6]), 0.0f);

  // amax exactly 448 * 2^k: s = 2^k and the largest value maps to code 448 (0x7e).
  std::fill(v.begin(), v.end(), 0.5f);
  v[7] = 448.0f * 4.0f;
  EXPECT_EQ(ops::quant_fp8_block(v.data(), 32, codes.data()), 4.0f);
  EXPECT_EQ(codes[7], 0x7e);
  EXPECT_EQ(decode(codes[0]), 0.125f);

  // amax just above 448: s = 2 (ceil), values halve.
  v[7] = 448.5f;
  EXPECT_EQ(ops::quant_fp8_block(v.data(), 32, codes.data()), 2.0f);
  EXPECT_EQ(decode(codes[7]), 224.0f);  // 224.25 -> step 16 on [128, 256): 224
}

TEST(Fp8Activations, AmaxClampAndZeroBlocks) {
  std::vector<uint8_t> codes(32, 0xaa);
  // Every |x| below 1e-4: amax clamps to 1e-4, 1e-4 / 448 = 2^-22.09 -> s = 2^-22.
  std::vector<float> v(32, 1e-6f);
  v[1] = -5e-5f;
  const float s = ops::quant_fp8_block(v.data(), 32, codes.data());
  EXPECT_EQ(s, std::ldexp(1.0f, -22));
  EXPECT_EQ(decode(codes[0]), 4.0f);       // 1e-6 * 2^22 = 4.19 -> 4 (step 0.5)
  EXPECT_EQ(decode(codes[1]), -208.0f);    // 209.7 -> step 16 on [128, 256): 208
  // A zero block: the clamped scale, zero codes (not NaN).
  std::fill(v.begin(), v.end(), 0.0f);
  EXPECT_EQ(ops::quant_fp8_block(v.data(), 32, codes.data()), std::ldexp(1.0f, -22));
  for (uint8_t c : codes) EXPECT_EQ(decode(c), 0.0f);
  // fake_quant_fp8 (window KV) applies the same rule in place: code * s.
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> x(64), y(64);
  for (auto& e : x) e = nd(rng);
  y = x;
  ops::cpu::fake_quant_fp8({y.data(), 1, 64, 32});
  for (int b = 0; b < 2; ++b) {
    const float sb = ops::quant_fp8_block(x.data() + 32 * b, 32, codes.data());
    for (int i = 0; i < 32; ++i) EXPECT_EQ(y[32 * b + i], decode(codes[i]) * sb);
  }
}

// An identity-like e4m3 weight with 32x32 ue8m0 blocks; y written out by hand.
TEST(Fp8Activations, LinearBlockScalesAndRaggedTail) {
  const int64_t rows = 2, cols = 40;  // blocks of 32 and 8 (the ragged tail)
  std::vector<uint8_t> w(rows * cols, 0);
  // Row 0: 1.0 (0x38) at columns 0 and 35; row 1: 2.0 (0x40) at column 1, -1.0 at 39.
  w[0] = 0x38;
  w[35] = 0x38;
  w[cols + 1] = 0x40;
  w[cols + 39] = 0xb8;
  std::vector<uint8_t> sc = {127 + 2, 127 - 1};  // block (0, 0): 4, block (0, 1): 0.5
  const ops::WeightRef ref = testing::fp8_ref(w, sc, rows, cols);
  std::vector<float> x(cols, 0.0f);
  x[0] = 0.3f;  // block 0 amax 1 (x[1]): s = 2^-8, 0.3 -> 80 / 256 = 0.3125
  x[1] = 1.0f;
  x[35] = 1e-5f;   // tail block alone: amax clamps to 1e-4, s = 2^-22, 41.9 -> 40 (step 4)
  x[39] = -2e-5f;  // 83.9 -> 80 (step 8): -80 * 2^-22
  std::vector<float> y(rows);
  ops::cpu::linear({x.data(), y.data(), 1, ref, 0, -1, ops::Activations::kFP8});
  EXPECT_EQ(y[0], float(0.3125 * 4.0 + 40.0 * std::ldexp(1.0, -22) * 0.5));
  EXPECT_EQ(y[1], float(1.0 * 2.0 * 4.0 + (-80.0 * std::ldexp(1.0, -22)) * (-1.0) * 0.5));
  // A row slice gives the same values.
  float y1 = 0;
  ops::cpu::linear({x.data(), &y1, 1, ref, 1, 1, ops::Activations::kFP8});
  EXPECT_EQ(y1, y[1]);
}

// Random case against the definition: per-block exact dot of codes, scaled, summed.
TEST(Fp8Activations, LinearMatchesDefinitionAndDiffersFromBf16) {
  std::mt19937 rng(7);
  const int64_t rows = 40, cols = 96, n = 3;
  const testing::Fp8TestWeight fw(rng, rows, cols);
  const ops::WeightRef ref = fw.ref();
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n * cols);
  for (auto& v : x) v = nd(rng);
  std::vector<float> y(n * rows), yb(n * rows);
  ops::cpu::linear({x.data(), y.data(), n, ref, 0, -1, ops::Activations::kFP8});
  ops::cpu::linear({x.data(), yb.data(), n, ref, 0, -1, ops::Activations::kBF16});
  double max_shift = 0;
  std::vector<uint8_t> codes(32);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < rows; ++r) {
      double acc = 0;
      for (int64_t b = 0; b < 3; ++b) {
        const float s = ops::quant_fp8_block(x.data() + t * cols + 32 * b, 32, codes.data());
        double dot = 0;
        for (int i = 0; i < 32; ++i) dot += double(decode(codes[i])) * double(decode(fw.codes[r * cols + 32 * b + i]));
        acc += dot * double(s) * double(e8m0_to_float(fw.scales[(r / 32) * 3 + b]));
      }
      EXPECT_EQ(y[t * rows + r], float(acc)) << t << "," << r;
      max_shift = std::max(max_shift, std::fabs(double(y[t * rows + r]) - double(yb[t * rows + r])));
    }
  EXPECT_GT(max_shift, 1e-3);  // e4m3 x is much coarser than bf16 x
}

TEST(Fp8Activations, RejectsWeightsItCannotTake) {
  std::vector<uint16_t> w(4 * 32, 0x3f80);
  ops::WeightRef ref;
  ref.dtype = DType::BF16;
  ref.data = reinterpret_cast<const uint8_t*>(w.data());
  ref.rows = 4;
  ref.cols = 32;
  std::vector<float> x(32, 1.0f), y(4);
  EXPECT_FALSE(ops::fp8_activation_weight(ref));
  EXPECT_THROW(ops::cpu::linear({x.data(), y.data(), 1, ref, 0, -1, ops::Activations::kFP8}), InputError);
  // e4m3 with 16-wide scale blocks: a block of x would span two weight scales.
  std::vector<uint8_t> w8(4 * 32, 0x38), sc(2, 127);
  ops::WeightRef r8;
  r8.dtype = DType::F8_E4M3;
  r8.data = w8.data();
  r8.rows = 4;
  r8.cols = 32;
  r8.scale = sc.data();
  r8.scale_cols = 2;
  r8.block_rows = 32;
  r8.block_cols = 16;
  EXPECT_FALSE(ops::fp8_activation_weight(r8));
  r8.block_cols = 32;
  r8.scale_cols = 1;
  EXPECT_TRUE(ops::fp8_activation_weight(r8));
  ops::cpu::linear({x.data(), y.data(), 1, r8, 0, -1, ops::Activations::kFP8});
  for (float v : y) EXPECT_EQ(v, 32.0f);  // codes 256 (s = 2^-8) times 1.0, 32 of them
}

// The model's fp8 mode (ops::activations_for): kFP8 for a weight that can take it, bf16
// for every other; the expert op under kFP8 is exactly the composition of the two linears
// in that mode around the SwiGLU (x not pre-rounded to bf16 for the FP8 weights).
TEST(Fp8Activations, ModelModePicksPerWeightAndSwigluFollows) {
  std::mt19937 rng(11);
  const int64_t dim = 64, inter = 32, n = 2;
  const testing::Fp8TestWeight w1(rng, inter, dim), w3(rng, inter, dim), w2(rng, dim, inter);
  std::vector<uint16_t> bf(4 * 32, 0x3f80);
  ops::WeightRef wb;
  wb.dtype = DType::BF16;
  wb.data = reinterpret_cast<const uint8_t*>(bf.data());
  wb.rows = 4;
  wb.cols = 32;
  EXPECT_EQ(ops::activations_for(ops::Activations::kFP8, w1.ref()), ops::Activations::kFP8);
  EXPECT_EQ(ops::activations_for(ops::Activations::kFP8, wb), ops::Activations::kBF16);
  EXPECT_EQ(ops::activations_for(ops::Activations::kBF16, w1.ref()), ops::Activations::kBF16);
  EXPECT_EQ(ops::activations_for(ops::Activations::kF32, w1.ref()), ops::Activations::kF32);
  EXPECT_EQ(ops::rounding_of(ops::Activations::kFP8), ops::Activations::kBF16);
  EXPECT_EQ(ops::rounding_of(ops::Activations::kF32), ops::Activations::kF32);

  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n * dim);
  for (auto& v : x) v = nd(rng);
  std::vector<float> y(n * dim), yb(n * dim);
  const ops::WeightRef r1 = w1.ref(), r3 = w3.ref(), r2 = w2.ref();
  ops::cpu::swiglu_expert({x.data(), n, r1, r3, r2, nullptr, 10.0f, y.data(), ops::Activations::kFP8});
  ops::cpu::swiglu_expert({x.data(), n, r1, r3, r2, nullptr, 10.0f, yb.data(), ops::Activations::kBF16});
  std::vector<float> g(n * inter), u(n * inter), want(n * dim);
  ops::cpu::linear({x.data(), g.data(), n, w1.ref(), 0, -1, ops::Activations::kFP8});
  ops::cpu::linear({x.data(), u.data(), n, w3.ref(), 0, -1, ops::Activations::kFP8});
  for (size_t i = 0; i < g.size(); ++i) {
    const float gi = std::min(g[i], 10.0f), ui = std::clamp(u[i], -10.0f, 10.0f);
    g[i] = gi / (1.0f + std::exp(-gi)) * ui;
  }
  ops::cpu::linear({g.data(), want.data(), n, w2.ref(), 0, -1, ops::Activations::kFP8});
  double shift = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    EXPECT_EQ(y[i], want[i]) << i;
    shift = std::max(shift, std::fabs(double(y[i]) - double(yb[i])));
  }
  EXPECT_GT(shift, 0.0);  // not the bf16 mode
}

}  // namespace
}  // namespace deepinfer
