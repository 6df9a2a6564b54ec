// Steps 1-7 of sampler.h: turning a raw logits row into the distribution to draw from.

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/check.h"
#include "sample/sampler.h"

namespace deepinfer::sampling {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The order every selection in this file uses: larger logit first, then lower id.
struct Better {
  const float* z;
  bool operator()(int64_t a, int64_t b) const { return z[a] > z[b] || (z[a] == z[b] && a < b); }
};

std::vector<int64_t> unmasked_ids(const std::vector<float>& z) {
  std::vector<int64_t> ids;
  for (int64_t v = 0; v < int64_t(z.size()); ++v) {
    if (z[v] != kNegInf) ids.push_back(v);
  }
  return ids;
}

void check_ids(std::span<const int64_t> ids, int64_t vocab, const char* what) {
  for (int64_t id : ids) {
    DI_CHECK_INPUT(id >= 0 && id < vocab, what, " token id ", id, " is outside the vocabulary [0, ", vocab, ")");
  }
}

void apply_bitmask(std::vector<float>& z, const uint32_t* mask) {
  for (int64_t v = 0; v < int64_t(z.size()); ++v) {
    if (((mask[v >> 5] >> (v & 31)) & 1u) == 0) z[v] = kNegInf;
  }
}

void apply_logit_bias(std::vector<float>& z, const SamplingParams& p) {
  for (const auto& [id, bias] : p.logit_bias) {
    DI_CHECK_INPUT(id >= 0 && id < int64_t(z.size()), "logit_bias token id ", id, " is outside the vocabulary");
    z[id] += bias;
  }
}

// vLLM's arithmetic: repetition divides positive logits and multiplies the others, so
// it always makes a seen token less likely; frequency and presence subtract.
void apply_penalties(std::vector<float>& z, const SampleInput& in) {
  const SamplingParams& p = *in.params;
  const bool repetition = p.repetition_penalty != 1.0f;
  const bool additive = p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
  if (!repetition && !additive) return;
  const int64_t vocab = int64_t(z.size());
  // Vocabulary-sized tables cost O(vocab + tokens) per row, which stays cheap even for a
  // million-token prompt, unlike sorting the prompt at every step.
  check_ids(in.output_ids, vocab, "output");
  std::vector<int32_t> count(vocab, 0);
  for (int64_t id : in.output_ids) ++count[id];
  if (repetition) {
    check_ids(in.prompt_ids, vocab, "prompt");
    std::vector<uint8_t> in_prompt(vocab, 0);
    for (int64_t id : in.prompt_ids) in_prompt[id] = 1;
    const float r = p.repetition_penalty;
    for (int64_t v = 0; v < vocab; ++v) {
      if (in_prompt[v] || count[v] > 0) z[v] = z[v] > 0.0f ? z[v] / r : z[v] * r;
    }
  }
  if (additive) {
    for (int64_t v = 0; v < vocab; ++v) {
      if (count[v] == 0) continue;
      z[v] -= p.frequency_penalty * float(count[v]);
      z[v] -= p.presence_penalty;
    }
  }
}

void apply_temperature(std::vector<float>& z, float temperature) {
  for (float& x : z) {
    x = x / temperature;
    DI_CHECK_INPUT(x != std::numeric_limits<float>::infinity(), "logits overflow FP32 at temperature ",
                   temperature);
  }
}

void apply_top_k(std::vector<float>& z, int64_t k) {
  std::vector<int64_t> ids = unmasked_ids(z);
  if (k <= 0 || k >= int64_t(ids.size())) return;
  std::nth_element(ids.begin(), ids.begin() + k, ids.end(), Better{z.data()});
  for (auto it = ids.begin() + k; it != ids.end(); ++it) z[*it] = kNegInf;
}

void apply_top_p(std::vector<float>& z, float top_p) {
  if (top_p >= 1.0f) return;  // at 1 rounding could otherwise drop the far tail
  std::vector<int64_t> ids = unmasked_ids(z);
  if (ids.empty()) return;
  const Better better{z.data()};
  const int64_t z_max_id = *std::min_element(ids.begin(), ids.end(), better);
  const double z_max = z[z_max_id];
  double total = 0;  // in token order
  for (int64_t v : ids) total += std::exp(double(z[v]) - z_max);
  const double target = double(top_p) * total;
  // The nucleus is usually a small head of the vocabulary: sort a head of doubling size
  // until it covers the target mass. The sorted head is the same prefix a full sort gives
  // (Better is a strict total order), so the kept set does not depend on the head size.
  const int64_t n = int64_t(ids.size());
  double before = 0;  // mass of the tokens ranked above ids[i]
  int64_t i = 0;
  for (int64_t head = std::min<int64_t>(n, 256);; head = std::min(n, head * 4)) {
    std::partial_sort(ids.begin() + i, ids.begin() + head, ids.end(), better);
    for (; i < head; ++i) {
      if (before >= target) {
        // ids[i, head) are sorted and ids[head, n) all rank below them: mask both.
        for (int64_t j = i; j < n; ++j) z[ids[j]] = kNegInf;
        return;
      }
      before += std::exp(double(z[ids[i]]) - z_max);
    }
    if (head == n) return;
  }
}

void apply_min_p(std::vector<float>& z, float min_p) {
  if (min_p <= 0.0f) return;
  const double z_max = *std::max_element(z.begin(), z.end());
  for (float& x : z) {
    // p / p_max = exp(z - z_max); no normalizer needed.
    if (x != kNegInf && std::exp(double(x) - z_max) < double(min_p)) x = kNegInf;
  }
}

// argmax (lowest id) and the FP64 log-sum-exp, summed in token order.
void finish(ProcessedRow& row) {
  const std::vector<float>& z = row.logits;
  int64_t best = -1;
  for (int64_t v = 0; v < int64_t(z.size()); ++v) {
    if (z[v] != kNegInf && (best < 0 || z[v] > z[best])) best = v;
  }
  DI_CHECK_INPUT(best >= 0, "every token is masked; nothing can be sampled");
  const double z_max = z[best];
  double sum = 0;
  for (float x : z) {
    if (x != kNegInf) sum += std::exp(double(x) - z_max);
  }
  row.argmax = best;
  row.log_normalizer = z_max + std::log(sum);
}

}  // namespace

ProcessedRow process(const SampleInput& in) {
  DI_CHECK(in.logits != nullptr && in.params != nullptr, "SampleInput needs logits and params");
  DI_CHECK(in.vocab > 0 && in.vocab <= kMaxRandomIndex + 1, "bad vocab size ", in.vocab);
  const SamplingParams& p = *in.params;
  ProcessedRow row;
  row.logits.assign(in.logits, in.logits + in.vocab);
  for (int64_t v = 0; v < in.vocab; ++v) {
    float x = row.logits[v];
    DI_CHECK_INPUT(!std::isnan(x) && x != std::numeric_limits<float>::infinity(), "logit of token ", v,
                   " is ", x, "; cannot sample");
  }
  if (in.token_bitmask != nullptr) apply_bitmask(row.logits, in.token_bitmask);
  apply_logit_bias(row.logits, p);
  apply_penalties(row.logits, in);
  row.greedy = p.greedy();
  if (!row.greedy) {
    apply_temperature(row.logits, p.temperature);
    apply_top_k(row.logits, p.top_k);
    apply_top_p(row.logits, p.top_p);
    apply_min_p(row.logits, p.min_p);
  }
  finish(row);
  return row;
}

}  // namespace deepinfer::sampling
