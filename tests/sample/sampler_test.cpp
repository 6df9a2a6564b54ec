#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>

#include "common/check.h"

namespace deepinfer::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

SampleInput row(const std::vector<float>& logits, const SamplingParams& p, uint64_t seed = 1, int64_t pos = 0) {
  SampleInput in;
  in.logits = logits.data();
  in.vocab = int64_t(logits.size());
  in.params = &p;
  in.seed = seed;
  in.position = pos;
  return in;
}

std::vector<float> random_logits(std::mt19937& rng, int64_t vocab, float scale) {
  std::normal_distribution<float> n(0.0f, scale);
  std::vector<float> l(vocab);
  for (float& x : l) x = n(rng);
  return l;
}

std::vector<int64_t> kept(const ProcessedRow& r) {
  std::vector<int64_t> ids;
  for (int64_t v = 0; v < int64_t(r.logits.size()); ++v) {
    if (r.logits[v] != kNegInf) ids.push_back(v);
  }
  return ids;
}

TEST(Sampler, SameKeySameTokenDifferentSeedsDiffer) {
  std::mt19937 rng(1);
  std::vector<float> logits(1000, 0.0f);  // flat: every draw is pure noise
  SamplingParams p;
  int differ = 0;
  for (int64_t pos = 0; pos < 200; ++pos) {
    int64_t a = sample(row(logits, p, /*seed=*/11, pos)).token;
    EXPECT_EQ(a, sample(row(logits, p, 11, pos)).token);
    differ += a != sample(row(logits, p, 12, pos)).token;
  }
  EXPECT_GT(differ, 190);  // equal with probability 1/1000 per position
}

TEST(Sampler, GreedyTakesTheLowestIdOnTies) {
  SamplingParams p;
  p.temperature = 0;
  EXPECT_EQ(sample(row({1, 3, 3, 2}, p)).token, 1);
  EXPECT_EQ(sample(row({kNegInf, 5, 4, 5}, p)).token, 1);
  p.temperature = 1e-6f;  // below kGreedyTemperature: greedy too
  EXPECT_EQ(sample(row({1, 3, 3, 2}, p)).token, 1);
  // Greedy logprobs are log_softmax of the unscaled logits.
  SampleResult r = sample(row({0, std::log(3.0f)}, p));
  EXPECT_EQ(r.token, 1);
  EXPECT_NEAR(r.logprob, std::log(0.75), 1e-6);
}

TEST(Sampler, GumbelTiesGoToTheLowerId) {
  // An exact tie needs equal logits and equal uniforms; with 23-bit uniforms two lanes
  // collide about once per 2^23 keys, so search for such a key.
  int64_t pos = 0;
  while (uniform(3, pos, Purpose::kTarget, 0) != uniform(3, pos, Purpose::kTarget, 1)) ++pos;
  SamplingParams p;
  EXPECT_EQ(sample(row({0.5f, 0.5f}, p, 3, pos)).token, 0);
  EXPECT_EQ(sample(row({0.5f, 0.5f, -9.0f}, p, 3, pos)).token, 0);
}

TEST(Sampler, DuplicateLogitsAreAFairCoin) {
  SamplingParams p;
  std::vector<float> logits = {2, 2};
  int first = 0;
  for (int64_t pos = 0; pos < 4000; ++pos) first += sample(row(logits, p, 3, pos)).token == 0;
  EXPECT_NEAR(first / 4000.0, 0.5, 0.04);
}

TEST(Sampler, PenaltiesKnownCase) {
  SamplingParams p;
  p.repetition_penalty = 2;
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  std::vector<float> logits = {2, -1, 0.5f, 3, 1};
  std::vector<int64_t> prompt = {0, 0};
  std::vector<int64_t> output = {1, 3, 1};
  SampleInput in = row(logits, p);
  in.prompt_ids = prompt;
  in.output_ids = output;
  ProcessedRow r = process(in);
  // 0: prompt only, positive: 2 / 2.  1: twice in output, negative: -1 * 2 - 2 * 0.25 - 0.5.
  // 2, 4: untouched.  3: once in output: 3 / 2 - 0.25 - 0.5.
  EXPECT_EQ(r.logits, (std::vector<float>{1.0f, -3.0f, 0.5f, 0.75f, 1.0f}));
  // Negative penalties reward repetition.
  p = SamplingParams{};
  p.presence_penalty = -1;
  in = row(logits, p);
  in.output_ids = output;
  EXPECT_EQ(process(in).logits, (std::vector<float>{2, 0, 0.5f, 4, 1}));
}

TEST(Sampler, PenaltyTokenIdsOutsideTheVocabularyAreInputErrors) {
  SamplingParams p;
  p.frequency_penalty = 1;
  std::vector<float> logits = {1, 2};
  std::vector<int64_t> bad = {5};
  SampleInput in = row(logits, p);
  in.output_ids = bad;
  EXPECT_THROW(sample(in), InputError);
  p = SamplingParams{};
  p.repetition_penalty = 1.5f;
  in = row(logits, p);
  in.prompt_ids = bad;
  EXPECT_THROW(sample(in), InputError);
}

TEST(Sampler, LogitBiasForcesAndForbids) {
  std::vector<float> logits = {5, 0, 0, 0};
  SamplingParams p;
  p.logit_bias = {{0, -100.0f}, {2, 100.0f}};
  for (int64_t pos = 0; pos < 200; ++pos) EXPECT_EQ(sample(row(logits, p, 9, pos)).token, 2);
  p.logit_bias = {{0, -100.0f}};
  p.temperature = 0;
  EXPECT_EQ(sample(row(logits, p)).token, 1);  // bias applies before greedy; tie -> id 1
}

TEST(Sampler, TokenBitmaskMasksFirst) {
  std::vector<float> logits = {9, 1, 8, 2, 7};
  std::vector<uint32_t> mask = {0b11010};  // allow 1, 3, 4
  SamplingParams p;
  p.temperature = 0;
  SampleInput in = row(logits, p);
  in.token_bitmask = mask.data();
  EXPECT_EQ(sample(in).token, 4);
  p.temperature = 1;
  p.logit_bias = {{0, 100.0f}};  // a bias cannot resurrect a masked token
  for (int64_t pos = 0; pos < 100; ++pos) {
    in.position = pos;
    int64_t t = sample(in).token;
    EXPECT_TRUE(t == 1 || t == 3 || t == 4) << t;
  }
  mask = {0};
  EXPECT_THROW(sample(in), InputError);
}

TEST(Sampler, TopKKeepsExactlyKTiesByLowerId) {
  SamplingParams p;
  p.top_k = 2;
  ProcessedRow r = process(row({1, 2, 2, 2, 0}, p));
  EXPECT_EQ(kept(r), (std::vector<int64_t>{1, 2}));
  p.top_k = 10;  // more than the vocabulary: off
  EXPECT_EQ(kept(process(row({1, 2, 2, 2, 0}, p))).size(), 5u);
}

TEST(Sampler, TopPKeepsTheShortestPrefixTiesByLowerId) {
  std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.2f), std::log(0.1f)};
  SamplingParams p;
  p.top_p = 0.65f;
  EXPECT_EQ(kept(process(row(logits, p))), (std::vector<int64_t>{0, 1}));
  p.top_p = 0.75f;
  EXPECT_EQ(kept(process(row(logits, p))), (std::vector<int64_t>{0, 1, 2}));
  p.top_p = 0.3f;
  EXPECT_EQ(kept(process(row(logits, p))), (std::vector<int64_t>{0}));
  p.top_p = 0.5f;  // four equal tokens: exactly half the mass is two tokens, lower ids first
  EXPECT_EQ(kept(process(row({1, 1, 1, 1}, p))), (std::vector<int64_t>{0, 1}));
  // Top-p sees the distribution renormalized after top-k: of {0.4, 0.3}, 0.65 needs both.
  p.top_k = 2;
  p.top_p = 0.65f;
  EXPECT_EQ(kept(process(row(logits, p))), (std::vector<int64_t>{0, 1}));
  p.top_p = 0.55f;  // 0.4 / 0.7 = 0.57 >= 0.55
  EXPECT_EQ(kept(process(row(logits, p))), (std::vector<int64_t>{0}));
}

// Large nuclei take process()'s growing-head path; the kept set must be the one a full
// sort by (probability desc, id asc) gives, ties included.
TEST(Sampler, TopPOnLargeVocabulariesMatchesAFullSort) {
  std::mt19937 rng(3);
  for (float top_p : {0.05f, 0.5f, 0.9f, 0.999f}) {
    std::vector<float> logits = random_logits(rng, 5000, 1.5f);
    for (float& x : logits) x = std::round(x * 4) / 4;  // many exact ties
    SamplingParams p;
    p.top_p = top_p;
    std::vector<int64_t> order(5000);
    for (int64_t v = 0; v < 5000; ++v) order[v] = v;
    std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    double total = 0;
    for (int64_t v = 0; v < 5000; ++v) total += std::exp(double(logits[v]) - logits[order[0]]);
    std::vector<int64_t> expected;
    double before = 0;
    for (int64_t v : order) {
      if (before >= double(top_p) * total) break;
      expected.push_back(v);
      before += std::exp(double(logits[v]) - logits[order[0]]);
    }
    std::sort(expected.begin(), expected.end());
    EXPECT_EQ(kept(process(row(logits, p))), expected) << "top_p " << top_p;
  }
}

TEST(Sampler, MinPIsRelativeToTheMostLikelyToken) {
  std::vector<float> logits = {std::log(0.5f), std::log(0.25f), std::log(0.125f), std::log(0.125f)};
  SamplingParams p;
  p.min_p = 0.3f;
  EXPECT_EQ(kept(process(row(logits, p))), (std::vector<int64_t>{0, 1}));
  p.min_p = 1;
  EXPECT_EQ(kept(process(row(logits, p))), (std::vector<int64_t>{0}));
  // After temperature: T = 2 flattens the ratios to sqrt: 0.25 / 0.5 -> 0.707.
  p.min_p = 0.6f;
  p.temperature = 2;
  EXPECT_EQ(kept(process(row(logits, p))), (std::vector<int64_t>{0, 1}));
}

TEST(Sampler, LogprobsAreThoseOfTheSampledDistribution) {
  std::mt19937 rng(5);
  std::vector<float> logits = random_logits(rng, 50, 2.0f);
  SamplingParams p;
  p.temperature = 0.7f;
  p.top_k = 10;
  p.logprobs = 5;
  SampleResult r = sample(row(logits, p, 4, 4));
  ProcessedRow pr = process(row(logits, p, 4, 4));
  double total = 0;
  for (int64_t v = 0; v < 50; ++v) total += pr.prob(v);
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_EQ(kept(pr).size(), 10u);
  EXPECT_EQ(r.logprob, float(pr.logprob(r.token)));
  ASSERT_EQ(r.top_logprobs.size(), 5u);
  for (size_t i = 1; i < 5; ++i) EXPECT_GE(r.top_logprobs[i - 1].second, r.top_logprobs[i].second);
  EXPECT_EQ(r.top_logprobs[0].first, pr.argmax);
  // Never more entries than unmasked tokens, and never -inf.
  EXPECT_EQ(top_logprobs(pr, 20).size(), 10u);
  // Ties in top_logprobs go to the lower id.
  SamplingParams q;
  ProcessedRow flat = process(row({0, 1, 1, 0}, q));
  auto top = top_logprobs(flat, 3);
  EXPECT_EQ(top[0].first, 1);
  EXPECT_EQ(top[1].first, 2);
  EXPECT_EQ(top[2].first, 0);
}

TEST(Sampler, BadLogitsAreInputErrors) {
  SamplingParams p;
  EXPECT_THROW(sample(row({1, std::nanf(""), 2}, p)), InputError);
  EXPECT_THROW(sample(row({1, std::numeric_limits<float>::infinity()}, p)), InputError);
  EXPECT_THROW(sample(row({kNegInf, kNegInf}, p)), InputError);
}

// The skipped-noise shortcut in draw() must pick the same token as a full scan.
TEST(Sampler, DrawEqualsTheFullGumbelScan) {
  std::mt19937 rng(8);
  for (float scale : {1.0f, 8.0f, 30.0f}) {
    std::vector<float> logits = random_logits(rng, 777, scale);
    SamplingParams p;
    p.temperature = 0.9f;
    ProcessedRow r = process(row(logits, p));
    for (int64_t pos = 0; pos < 1500; ++pos) {
      int64_t best = -1;
      double best_score = -INFINITY;
      for (int64_t v = 0; v < 777; ++v) {
        double s = double(r.logits[v]) + gumbel(uniform(21, pos, Purpose::kTarget, v));
        if (s > best_score) best_score = s, best = v;
      }
      ASSERT_EQ(draw(r, 21, pos, Purpose::kTarget), best) << "scale " << scale << " pos " << pos;
    }
  }
}

TEST(Sampler, PurposesDrawIndependentNoise) {
  std::vector<float> logits(500, 0.0f);
  SamplingParams p;
  ProcessedRow r = process(row(logits, p));
  int same = 0;
  for (int64_t pos = 0; pos < 200; ++pos) same += draw(r, 1, pos, Purpose::kTarget) == draw(r, 1, pos, Purpose::kDraft);
  EXPECT_LT(same, 5);
}

// Builds 64 rows that differ in everything a row can differ in.
struct MixedBatch {
  std::vector<std::vector<float>> logits;
  std::vector<SamplingParams> params;
  std::vector<std::vector<int64_t>> prompts, outputs;
  std::vector<std::vector<uint32_t>> masks;
  std::vector<SampleInput> rows;

  explicit MixedBatch(uint32_t seed, int n) {
    std::mt19937 rng(seed);
    logits.resize(n);
    params.resize(n);
    prompts.resize(n);
    outputs.resize(n);
    masks.resize(n);
    for (int i = 0; i < n; ++i) {
      int64_t vocab = 64 + int64_t(rng() % 3000);
      logits[i] = random_logits(rng, vocab, 1.0f + float(rng() % 8));
      SamplingParams& p = params[i];
      p.temperature = (rng() % 5 == 0) ? 0.0f : 0.2f + float(rng() % 100) / 50.0f;
      if (rng() % 2) p.top_k = 1 + rng() % 100;
      if (rng() % 2) p.top_p = 0.5f + float(rng() % 50) / 100.0f;
      if (rng() % 3 == 0) p.min_p = float(rng() % 20) / 100.0f;
      if (rng() % 3 == 0) p.repetition_penalty = 1.3f;
      if (rng() % 3 == 0) p.frequency_penalty = 0.4f;
      if (rng() % 3 == 0) p.presence_penalty = -0.6f;
      if (rng() % 4 == 0) p.logit_bias = {{int64_t(rng() % vocab), 5.0f}};
      p.logprobs = int64_t(rng() % 22) - 1;
      for (int k = 0; k < 20; ++k) prompts[i].push_back(int64_t(rng() % vocab));
      for (int k = 0; k < int(rng() % 30); ++k) outputs[i].push_back(int64_t(rng() % vocab));
      if (rng() % 4 == 0) {
        masks[i].assign((vocab + 31) / 32, 0);
        for (auto& w : masks[i]) w = uint32_t(rng()) | 1u;
      }
    }
    for (int i = 0; i < n; ++i) {
      SampleInput in = row(logits[i], params[i], /*seed=*/rng(), /*pos=*/rng() % 100000);
      in.prompt_ids = prompts[i];
      in.output_ids = outputs[i];
      if (!masks[i].empty()) in.token_bitmask = masks[i].data();
      rows.push_back(in);
    }
  }
};

void expect_same(const SampleResult& a, const SampleResult& b, int i) {
  EXPECT_EQ(a.token, b.token) << "row " << i;
  EXPECT_EQ(std::bit_cast<uint32_t>(a.logprob), std::bit_cast<uint32_t>(b.logprob)) << "row " << i;
  ASSERT_EQ(a.top_logprobs.size(), b.top_logprobs.size()) << "row " << i;
  for (size_t k = 0; k < a.top_logprobs.size(); ++k) {
    EXPECT_EQ(a.top_logprobs[k].first, b.top_logprobs[k].first);
    EXPECT_EQ(std::bit_cast<uint32_t>(a.top_logprobs[k].second), std::bit_cast<uint32_t>(b.top_logprobs[k].second));
  }
}

TEST(SamplerBatch, RowsAreIndependentOfTheirBatch) {
  MixedBatch b(77, 64);
  std::vector<SampleResult> alone;
  for (const SampleInput& in : b.rows) alone.push_back(sample(in));
  std::vector<SampleResult> batched(64);
  sample_batch(b.rows, batched);
  for (int i = 0; i < 64; ++i) expect_same(alone[i], batched[i], i);

  // Reversed order, and each row as a needle among fresh random fillers.
  std::vector<SampleInput> reversed(b.rows.rbegin(), b.rows.rend());
  std::vector<SampleResult> out(64);
  sample_batch(reversed, out);
  for (int i = 0; i < 64; ++i) expect_same(alone[63 - i], out[i], 63 - i);

  MixedBatch fillers(78, 63);
  for (int i = 0; i < 64; i += 9) {
    std::vector<SampleInput> rows = fillers.rows;
    rows.insert(rows.begin() + (i * 7) % 64, b.rows[i]);
    sample_batch(rows, out);
    expect_same(alone[i], out[(i * 7) % 64], i);
  }
}

TEST(SamplerBatch, OneBadRowDoesNotEndItsNeighbours) {
  MixedBatch b(5, 8);
  std::vector<float> nan_row = {1, std::nanf(""), 2};
  SamplingParams p;
  b.rows[3] = row(nan_row, p);
  std::vector<SampleResult> out(8);
  sample_batch(b.rows, out);
  EXPECT_EQ(out[3].token, -1);
  EXPECT_NE(out[3].error.find("logit"), std::string::npos);
  for (int i = 0; i < 8; ++i) {
    if (i == 3) continue;
    EXPECT_TRUE(out[i].error.empty());
    expect_same(sample(b.rows[i]), out[i], i);
  }
}

}  // namespace
}  // namespace deepinfer::sampling
