// Speculative verification at one position (FEATURES.md §2): whatever the draft
// distribution q, the committed token must follow the target distribution p.

#include "sample/verify.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "stats.h"

namespace deepinfer::sampling {
namespace {

using testing::chi_square;
using testing::chi_square_critical_001;
using testing::count_impossible;
using testing::degrees_of_freedom;
using testing::total_variation;

constexpr int64_t kTrials = 300000;

struct Dist {
  std::vector<float> logits;
  SamplingParams params;
  ProcessedRow row;
};

Dist make(std::vector<float> logits, SamplingParams params) {
  Dist d{std::move(logits), std::move(params), {}};
  SampleInput in;
  in.logits = d.logits.data();
  in.vocab = int64_t(d.logits.size());
  in.params = &d.params;
  d.row = process(in);
  return d;
}

std::vector<float> random_logits(std::mt19937& rng, int n, float scale) {
  std::normal_distribution<float> g(0, scale);
  std::vector<float> l(n);
  for (float& x : l) x = g(rng);
  return l;
}

// One verify step per trial, each at its own position: draft from q, accept or take the
// residual. Returns the histogram of committed tokens and the acceptance count.
std::vector<int64_t> run(const ProcessedRow& p, const ProcessedRow& q, uint64_t seed, int64_t* accepted) {
  std::vector<int64_t> counts(p.logits.size(), 0);
  *accepted = 0;
  for (int64_t pos = 0; pos < kTrials; ++pos) {
    const int64_t x = draw(q, seed, pos, Purpose::kDraft);
    if (accept_draft(p, q, x, seed, pos)) {
      ++counts[x];
      ++*accepted;
    } else {
      ++counts[sample_residual(p, q, seed, pos)];
    }
  }
  return counts;
}

std::vector<double> probs(const ProcessedRow& r) {
  std::vector<double> out(r.logits.size());
  for (size_t v = 0; v < out.size(); ++v) out[v] = r.prob(int64_t(v));
  return out;
}

double overlap(const ProcessedRow& p, const ProcessedRow& q) {
  double s = 0;
  for (size_t v = 0; v < p.logits.size(); ++v) s += std::min(p.prob(int64_t(v)), q.prob(int64_t(v)));
  return s;
}

void expect_target_law(const ProcessedRow& p, const ProcessedRow& q, uint64_t seed) {
  int64_t accepted = 0;
  std::vector<int64_t> counts = run(p, q, seed, &accepted);
  std::vector<double> expected = probs(p);
  EXPECT_EQ(count_impossible(counts, expected), 0);
  if (degrees_of_freedom(expected) > 0) {
    EXPECT_LT(chi_square(counts, expected, kTrials), chi_square_critical_001(degrees_of_freedom(expected)));
  }
  EXPECT_LT(total_variation(counts, expected, kTrials), 0.01);
  // The acceptance rate is sum_v min(p, q); its standard error here is below 0.001.
  EXPECT_NEAR(double(accepted) / kTrials, overlap(p, q), 0.005);
}

TEST(Verify, SampledDraftsKeepTheTargetLaw) {
  std::mt19937 rng(2024);
  for (int trial = 0; trial < 4; ++trial) {
    int n = 8 + int(rng() % 25);
    SamplingParams tp, dp;
    tp.temperature = 0.8f;
    dp.temperature = 1.2f;
    // Make every expected count large enough for chi-square (>= ~20 at 300k trials).
    Dist p = make(random_logits(rng, n, 0.7f), tp);
    Dist q = make(random_logits(rng, n, 1.0f), dp);
    expect_target_law(p.row, q.row, 1000 + trial);
  }
}

TEST(Verify, MaskedTargetAndMaskedDraft) {
  std::mt19937 rng(7);
  SamplingParams tp, dp;
  tp.top_k = 6;  // the draft proposes tokens the target can never emit
  dp.top_p = 0.9f;
  Dist p = make(random_logits(rng, 16, 0.6f), tp);
  Dist q = make(random_logits(rng, 16, 0.6f), dp);
  expect_target_law(p.row, q.row, 77);
}

TEST(Verify, PointMassDraft) {
  std::mt19937 rng(9);
  SamplingParams tp, greedy;
  greedy.temperature = 0;
  Dist p = make(random_logits(rng, 10, 0.5f), tp);
  Dist q = make(random_logits(rng, 10, 1.0f), greedy);  // greedy drafter: a point mass
  expect_target_law(p.row, q.row, 78);
  // Acceptance is exactly p(x), and a rejection never re-emits x.
  const int64_t x = q.row.argmax;
  for (int64_t pos = 0; pos < 2000; ++pos) {
    if (!accept_draft(p.row, q.row, x, 5, pos)) {
      EXPECT_NE(sample_residual(p.row, q.row, 5, pos), x);
    }
  }
}

TEST(Verify, GreedyTargetAcceptsOnlyItsArgmax) {
  std::mt19937 rng(10);
  SamplingParams greedy, dp;
  greedy.temperature = 0;
  Dist p = make(random_logits(rng, 12, 1.0f), greedy);
  Dist q = make(random_logits(rng, 12, 1.0f), dp);
  for (int64_t pos = 0; pos < 3000; ++pos) {
    int64_t x = draw(q.row, 6, pos, Purpose::kDraft);
    bool ok = accept_draft(p.row, q.row, x, 6, pos);
    EXPECT_EQ(ok, x == p.row.argmax);
    if (!ok) {
      EXPECT_EQ(sample_residual(p.row, q.row, 6, pos), p.row.argmax);
    }
  }
}

TEST(Verify, IdenticalDistributionsAlwaysAccept) {
  std::mt19937 rng(11);
  SamplingParams sp;
  Dist p = make(random_logits(rng, 20, 1.0f), sp);
  for (int64_t pos = 0; pos < 5000; ++pos) {
    int64_t x = draw(p.row, 8, pos, Purpose::kDraft);
    EXPECT_TRUE(accept_draft(p.row, p.row, x, 8, pos));
  }
  // With nothing left over the residual falls back to p itself.
  int64_t t = sample_residual(p.row, p.row, 8, 0);
  EXPECT_TRUE(t >= 0 && t < 20);
}

// Seed-exact mode: accept iff the draft equals the target's own keyed sample, commit that
// sample. The committed stream is the non-speculative one, token for token.
TEST(Verify, SeedExactModeReproducesTheNonSpeculativeDraw) {
  std::mt19937 rng(12);
  SamplingParams sp, greedy;
  greedy.temperature = 0;
  Dist p = make(random_logits(rng, 30, 1.0f), sp);
  Dist q = make(random_logits(rng, 30, 1.0f), greedy);
  for (int64_t pos = 0; pos < 1000; ++pos) {
    const int64_t y = draw(p.row, 13, pos, Purpose::kTarget);
    const int64_t x = draw(q.row, 13, pos, Purpose::kDraft);
    const int64_t committed = (x == y) ? x : y;
    SampleInput in;
    in.logits = p.logits.data();
    in.vocab = 30;
    in.params = &p.params;
    in.seed = 13;
    in.position = pos;
    EXPECT_EQ(committed, sample(in).token);
  }
}

}  // namespace
}  // namespace deepinfer::sampling
