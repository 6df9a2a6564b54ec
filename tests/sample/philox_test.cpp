#include "sample/philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace deepinfer::sampling {
namespace {

struct Kat {
  int rounds;
  PhiloxCounter counter;
  PhiloxKey key;
  PhiloxCounter expected;
};

// The Philox4x32 known-answer vectors of Random123 (tests/kat_vectors): all-zero,
// all-ones, and pi-digit inputs, for 7 and 10 rounds.
TEST(Philox, Random123KnownAnswers) {
  const Kat kats[] = {
      {7, {0, 0, 0, 0}, {0, 0}, {0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}},
      {7,
       {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}},
      {7,
       {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}},
      {10, {0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {10,
       {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {10,
       {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) {
    EXPECT_EQ(philox4x32(k.counter, k.key, k.rounds), k.expected) << "rounds " << k.rounds;
  }
}

TEST(Philox, UniformMapsBitsIntoOpenInterval) {
  EXPECT_EQ(uniform_from_bits(0), kUniformMin);
  EXPECT_EQ(uniform_from_bits(0xffffffffu), kUniformMax);
  EXPECT_GT(kUniformMin, 0.0f);
  EXPECT_LT(kUniformMax, 1.0f);
  // Symmetric about 1/2: complementary bits give u and 1 - u exactly.
  for (uint32_t bits : {0u, 12345u << 9, 0x7fffffffu, 0x80000000u, 0xdeadbeefu}) {
    EXPECT_EQ(uniform_from_bits(bits) + uniform_from_bits(~bits), 1.0f) << bits;
  }
  // Only the top 23 bits matter.
  EXPECT_EQ(uniform_from_bits(0xabcde000u), uniform_from_bits(0xabcde1ffu));
}

TEST(Philox, KeyLayoutIsTheDocumentedOne) {
  const uint64_t seed = 0x0123456789abcdefull;
  const int64_t position = (int64_t{5} << 32) + 77;
  for (int64_t index : std::initializer_list<int64_t>{0, 1, 2, 3, 4, 129279, int64_t{1} << 33}) {
    PhiloxCounter c = {uint32_t(index >> 2), 77, 5, uint32_t(Purpose::kAccept)};
    PhiloxCounter out = philox4x32(c, {0x89abcdefu, 0x01234567u});
    EXPECT_EQ(uniform(seed, position, Purpose::kAccept, index), uniform_from_bits(out[index & 3])) << index;
  }
}

TEST(Philox, BlockMatchesSingleDraws) {
  for (int64_t block : std::initializer_list<int64_t>{0, 1, 1000}) {
    auto u = uniform_block(42, 9, Purpose::kTarget, block);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(u[i], uniform(42, 9, Purpose::kTarget, 4 * block + i));
  }
}

TEST(Philox, EveryKeyComponentChangesTheDraw) {
  const float base = uniform(1, 100, Purpose::kTarget, 7);
  EXPECT_EQ(base, uniform(1, 100, Purpose::kTarget, 7));
  EXPECT_NE(base, uniform(2, 100, Purpose::kTarget, 7));
  EXPECT_NE(base, uniform(1ull << 32 | 1, 100, Purpose::kTarget, 7));  // the seed's high word counts
  EXPECT_NE(base, uniform(1, 101, Purpose::kTarget, 7));
  EXPECT_NE(base, uniform(1, 100 + (int64_t{1} << 32), Purpose::kTarget, 7));
  EXPECT_NE(base, uniform(1, 100, Purpose::kDraft, 7));
  EXPECT_NE(base, uniform(1, 100, Purpose::kAccept, 7));
  EXPECT_NE(base, uniform(1, 100, Purpose::kResidual, 7));
  EXPECT_NE(base, uniform(1, 100, Purpose::kTarget, 6));
}

TEST(Philox, UniformMoments) {
  const int64_t n = 1 << 20;
  double sum = 0, sum_sq = 0;
  float lo = 1, hi = 0;
  for (int64_t i = 0; i < n / 4; ++i) {
    for (float u : uniform_block(7, i, Purpose::kTarget, 3)) {
      sum += u;
      sum_sq += double(u) * u;
      lo = std::min(lo, u);
      hi = std::max(hi, u);
    }
  }
  const double mean = sum / n, var = sum_sq / n - mean * mean;
  // Standard errors: 0.29 / sqrt(n) = 2.8e-4 for the mean, about 8e-5 for the variance.
  EXPECT_NEAR(mean, 0.5, 1.5e-3);
  EXPECT_NEAR(var, 1.0 / 12, 5e-4);
  EXPECT_GT(lo, 0.0f);
  EXPECT_LT(hi, 1.0f);
}

TEST(Philox, GumbelIsFiniteAndBounded) {
  EXPECT_NEAR(gumbel(kUniformMin), -std::log(24 * std::log(2.0)), 1e-12);
  EXPECT_NEAR(gumbel(kUniformMax), 16.6355, 1e-3);
  EXPECT_NEAR(gumbel(float(std::exp(-1.0))), 0.0, 1e-7);
}

TEST(Philox, DerivedSeedsAreDistinct) {
  EXPECT_EQ(derive_seed(99, 0), 99u);
  std::set<uint64_t> seen = {99};
  for (uint64_t s = 1; s <= 128; ++s) EXPECT_TRUE(seen.insert(derive_seed(99, s)).second) << s;
  EXPECT_NE(derive_seed(99, 1), derive_seed(100, 1));
}

}  // namespace
}  // namespace deepinfer::sampling
