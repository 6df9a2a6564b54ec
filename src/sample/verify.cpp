#include "sample/verify.h"

#include <cmath>
#include <limits>

#include "common/check.h"

namespace deepinfer::sampling {

bool accept_draft(const ProcessedRow& target, const ProcessedRow& draft, int64_t token, uint64_t seed,
                  int64_t position) {
  DI_CHECK(target.logits.size() == draft.logits.size(), "target and draft rows differ in vocabulary");
  const double q = draft.prob(token);
  DI_CHECK(q > 0, "draft token ", token, " has probability 0 under the draft distribution");
  const double u = uniform(seed, position, Purpose::kAccept, 0);
  // u * q < p rather than u < p / q: no division, and the same for q == 1.
  return u * q < target.prob(token);
}

int64_t sample_residual(const ProcessedRow& target, const ProcessedRow& draft, uint64_t seed, int64_t position) {
  DI_CHECK(target.logits.size() == draft.logits.size(), "target and draft rows differ in vocabulary");
  const int64_t vocab = int64_t(target.logits.size());
  int64_t best = -1;
  double best_score = -std::numeric_limits<double>::infinity();
  for (int64_t lo = 0; lo < vocab; lo += 4) {
    const int64_t hi = std::min(vocab, lo + 4);
    std::array<double, 4> mass{};
    bool any = false;
    for (int64_t v = lo; v < hi; ++v) {
      mass[v - lo] = target.prob(v) - draft.prob(v);
      any |= mass[v - lo] > 0;
    }
    if (!any) continue;
    const std::array<float, 4> u = uniform_block(seed, position, Purpose::kResidual, lo / 4);
    for (int64_t v = lo; v < hi; ++v) {
      if (!(mass[v - lo] > 0)) continue;
      // Gumbel-max needs only unnormalized log-weights.
      const double score = std::log(mass[v - lo]) + gumbel(u[v - lo]);
      if (score > best_score) {
        best_score = score;
        best = v;
      }
    }
  }
  if (best < 0) return draw(target, seed, position, Purpose::kResidual);
  return best;
}

}  // namespace deepinfer::sampling
