#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"
#include "common/parallel.h"

namespace deepinfer::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Gumbel noise is bounded because uniform() is: every g lies in
// [gumbel(kUniformMin), gumbel(kUniformMax)], about [-2.81, 16.64]. A token whose logit
// is more than the spread below the maximum can therefore never beat the argmax token,
// so draw() skips its noise; the result is the same token as the full scan (checked by
// the tests), only cheaper on peaked rows. The margin absorbs the rounding of the sums.
double gumbel_spread() {
  static const double spread = gumbel(kUniformMax) - gumbel(kUniformMin) + 1e-6;
  return spread;
}

}  // namespace

double ProcessedRow::logprob(int64_t token) const {
  DI_CHECK(token >= 0 && token < int64_t(logits.size()), "token ", token, " outside the row");
  return double(logits[token]) - log_normalizer;
}

double ProcessedRow::prob(int64_t token) const {
  if (greedy) return token == argmax ? 1.0 : 0.0;
  return std::exp(logprob(token));
}

int64_t draw(const ProcessedRow& row, uint64_t seed, int64_t position, Purpose purpose) {
  DI_CHECK(row.argmax >= 0, "draw from an unprocessed row");
  if (row.greedy) return row.argmax;
  const std::vector<float>& z = row.logits;
  const int64_t vocab = int64_t(z.size());
  const double floor = double(z[row.argmax]) - gumbel_spread();
  int64_t best = -1;
  double best_score = -std::numeric_limits<double>::infinity();
  for (int64_t lo = 0; lo < vocab; lo += 4) {
    const int64_t hi = std::min(vocab, lo + 4);
    bool any = false;
    for (int64_t v = lo; v < hi; ++v) any |= double(z[v]) >= floor;
    if (!any) continue;
    const std::array<float, 4> u = uniform_block(seed, position, purpose, lo / 4);
    for (int64_t v = lo; v < hi; ++v) {
      if (!(double(z[v]) >= floor)) continue;
      const double score = double(z[v]) + gumbel(u[v - lo]);
      if (score > best_score) {  // strict: ties keep the lower id
        best_score = score;
        best = v;
      }
    }
  }
  DI_CHECK(best >= 0, "Gumbel draw found no token");
  return best;
}

std::vector<std::pair<int64_t, float>> top_logprobs(const ProcessedRow& row, int64_t k) {
  std::vector<std::pair<int64_t, float>> out;
  if (k <= 0) return out;
  const std::vector<float>& z = row.logits;
  std::vector<int64_t> ids;
  for (int64_t v = 0; v < int64_t(z.size()); ++v) {
    if (z[v] != kNegInf) ids.push_back(v);
  }
  const int64_t n = std::min<int64_t>(k, int64_t(ids.size()));
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(),
                    [&](int64_t a, int64_t b) { return z[a] > z[b] || (z[a] == z[b] && a < b); });
  for (int64_t i = 0; i < n; ++i) out.emplace_back(ids[i], float(row.logprob(ids[i])));
  return out;
}

SampleResult sample(const SampleInput& in) {
  ProcessedRow row = process(in);
  SampleResult r;
  r.token = draw(row, in.seed, in.position, in.purpose);
  r.logprob = float(row.logprob(r.token));
  if (in.params->logprobs > 0) r.top_logprobs = top_logprobs(row, in.params->logprobs);
  return r;
}

void sample_batch(std::span<const SampleInput> rows, std::span<SampleResult> out) {
  DI_CHECK(rows.size() == out.size(), "sample_batch: ", rows.size(), " rows but ", out.size(), " results");
  parallel_for(
      int64_t(rows.size()),
      [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          try {
            out[i] = sample(rows[i]);
          } catch (const InputError& e) {
            out[i] = SampleResult{};
            out[i].error = e.what();
          }
        }
      },
      /*min_grain=*/1);
}

}  // namespace deepinfer::sampling
