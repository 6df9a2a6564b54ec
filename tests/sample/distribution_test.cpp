// The sampler's draws against the distribution it claims (FEATURES.md §7): 200k keyed
// draws per case, one position per draw, compared by Pearson's chi-square with the
// 0.001 critical value. The expected distributions are written out here from the
// definitions (softmax of l / T over a hand-derived kept set), not read back from the
// sampler, so each case checks the processors and the Gumbel draw together.

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "sample/sampler.h"
#include "stats.h"

namespace deepinfer::sampling {
namespace {

using testing::chi_square;
using testing::chi_square_critical_001;
using testing::count_impossible;
using testing::degrees_of_freedom;
using testing::total_variation;

constexpr int64_t kDraws = 200000;

// Sorted by probability at T = 0.7: 4 .365, 10 .238, 2 .155, 7 .087, 6 .066, 0 .028,
// 9 .024, 3 .018, 5 .009, 11 .007, 1 .003, 8 .001.
const std::vector<float> kLogits = {0.3f, -1.2f, 1.5f, 0.0f, 2.1f, -0.5f, 0.9f, 1.1f, -2.0f, 0.2f, 1.8f, -0.7f};

std::vector<double> softmax_over(const std::vector<float>& logits, double temperature, const std::vector<int>& keep) {
  std::vector<double> p(logits.size(), 0.0);
  double total = 0;
  for (int v : keep) total += p[v] = std::exp(double(logits[v]) / temperature);
  for (double& x : p) x /= total;
  return p;
}

std::vector<int> all_of(size_t n) {
  std::vector<int> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = int(i);
  return ids;
}

void expect_distribution(const std::vector<float>& logits, const SamplingParams& params,
                         const std::vector<double>& expected, uint64_t seed) {
  SampleInput in;
  in.logits = logits.data();
  in.vocab = int64_t(logits.size());
  in.params = &params;
  ProcessedRow row = process(in);
  for (size_t v = 0; v < logits.size(); ++v) EXPECT_NEAR(row.prob(int64_t(v)), expected[v], 1e-6) << "token " << v;

  std::vector<int64_t> counts(logits.size(), 0);
  for (int64_t pos = 0; pos < kDraws; ++pos) ++counts[draw(row, seed, pos, Purpose::kTarget)];
  const double stat = chi_square(counts, expected, kDraws);
  const int df = degrees_of_freedom(expected);
  EXPECT_EQ(count_impossible(counts, expected), 0) << "a masked token was drawn";
  EXPECT_LT(stat, chi_square_critical_001(df)) << "df " << df;
  EXPECT_LT(total_variation(counts, expected, kDraws), 0.01);
}

TEST(Distribution, CriticalValuesMatchTheTables) {
  // Upper 0.001 points of chi-square (standard tables).
  const std::pair<int, double> table[] = {{3, 16.266}, {4, 18.467}, {5, 20.515}, {7, 24.322},
                                          {11, 31.264}, {20, 45.315}, {30, 59.703}};
  for (auto [df, crit] : table) {
    EXPECT_GE(chi_square_critical_001(df), crit * 0.995) << df;
    EXPECT_LE(chi_square_critical_001(df), crit * 1.02) << df;
  }
}

TEST(Distribution, TemperatureMatchesSoftmax) {
  SamplingParams p;
  p.temperature = 0.7f;
  expect_distribution(kLogits, p, softmax_over(kLogits, 0.7, all_of(12)), 101);
  p.temperature = 1.6f;
  expect_distribution(kLogits, p, softmax_over(kLogits, 1.6, all_of(12)), 102);
}

TEST(Distribution, TopK) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 5;
  expect_distribution(kLogits, p, softmax_over(kLogits, 0.7, {4, 10, 2, 7, 6}), 103);
}

TEST(Distribution, TopP) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_p = 0.8f;  // mass before 7 is 0.757 < 0.8, before 6 it is 0.844
  expect_distribution(kLogits, p, softmax_over(kLogits, 0.7, {4, 10, 2, 7}), 104);
  p.top_p = 0.75f;  // 0.757 >= 0.75: 7 goes too
  expect_distribution(kLogits, p, softmax_over(kLogits, 0.7, {4, 10, 2}), 105);
}

TEST(Distribution, MinP) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.min_p = 0.05f;  // p / p_max: 9 is 0.066, 3 is 0.0498
  expect_distribution(kLogits, p, softmax_over(kLogits, 0.7, {4, 10, 2, 7, 6, 0, 9}), 106);
}

TEST(Distribution, AllMasksTogether) {
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 8;      // drops 5, 11, 1, 8
  p.top_p = 0.93f;  // renormalized over the 8: mass before 0 is 0.928, before 9 0.957
  p.min_p = 0.07f;  // 0 survives (0.076)
  expect_distribution(kLogits, p, softmax_over(kLogits, 0.7, {4, 10, 2, 7, 6, 0}), 107);
}

TEST(Distribution, TiedLogitsUnderMasks) {
  const std::vector<float> tied = {1.0f, 1.0f, 1.0f, 0.5f, 0.5f, 0.0f, 2.0f, 2.0f};
  SamplingParams p;
  p.temperature = 0.7f;
  expect_distribution(tied, p, softmax_over(tied, 0.7, all_of(8)), 108);
  p.top_k = 4;  // 6, 7, then the lower two of the three tied 1.0s
  expect_distribution(tied, p, softmax_over(tied, 0.7, {6, 7, 0, 1}), 109);
  p.top_k = -1;
  p.top_p = 0.8f;  // 6, 7 hold 0.66 of the mass, each 1.0 adds 0.08: 0 and 1 reach 0.82
  expect_distribution(tied, p, softmax_over(tied, 0.7, {6, 7, 0, 1}), 110);
}

TEST(Distribution, PenaltiesAndBiasShiftTheLogits) {
  // The same distribution reached two ways: penalties and bias on kLogits, or the
  // adjusted logits written out by hand.
  SamplingParams p;
  p.temperature = 0.7f;
  p.repetition_penalty = 1.5f;
  p.frequency_penalty = 0.5f;
  p.logit_bias = {{8, 3.0f}};
  std::vector<int64_t> output = {4, 4, 1};
  SampleInput in;
  in.logits = kLogits.data();
  in.vocab = 12;
  in.params = &p;
  in.output_ids = output;
  std::vector<float> adjusted = kLogits;
  adjusted[4] = 2.1f / 1.5f - 1.0f;   // repetition, then twice the frequency penalty
  adjusted[1] = -1.2f * 1.5f - 0.5f;
  adjusted[8] = -2.0f + 3.0f;
  std::vector<double> expected = softmax_over(adjusted, 0.7, all_of(12));
  ProcessedRow row = process(in);
  std::vector<int64_t> counts(12, 0);
  for (int64_t pos = 0; pos < kDraws; ++pos) ++counts[draw(row, 111, pos, Purpose::kTarget)];
  EXPECT_LT(chi_square(counts, expected, kDraws), chi_square_critical_001(11));
}

TEST(Distribution, GreedyIsAPointMass) {
  SamplingParams p;
  p.temperature = 0;
  SampleInput in;
  in.logits = kLogits.data();
  in.vocab = 12;
  in.params = &p;
  ProcessedRow row = process(in);
  for (int64_t pos = 0; pos < 1000; ++pos) ASSERT_EQ(draw(row, 5, pos, Purpose::kTarget), 4);
}

}  // namespace
}  // namespace deepinfer::sampling
