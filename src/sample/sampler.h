// The CPU sampler: logits processors, the seeded Gumbel-max draw, and logprobs.
//
// It is the reference every other sampler (CUDA, fused kernels) is checked against, so
// it favours a fixed, documented arithmetic over speed.
//
// Processing order for one row (vLLM's order, FEATURES.md §7). Steps 1-4 are in FP32 on
// the raw logits; a masked token's logit becomes -inf and stays -inf.
//   1. token_bitmask      tokens whose bit is clear are masked (grammar, §8)
//   2. logit_bias         l[id] += bias
//   3. penalties          repetition on tokens of prompt + output (l > 0 ? l / r : l * r),
//                         then frequency (l -= f * count in output), then presence
//                         (l -= p if the token occurs in the output)
//   4. temperature        z = l / T (one IEEE division per token, so the bits are the same
//                         wherever z is recomputed). Greedy rows stop here, see below.
//   5. top_k              keep the k largest z; ties go to the lower token id
//   6. top_p              over softmax(z) renormalized after top-k, in order of decreasing
//                         probability (ties: lower id first), keep the shortest prefix whose
//                         mass reaches top_p
//   7. min_p              keep tokens with p >= min_p * max p (unchanged by steps 5-6, which
//                         never remove the most likely token)
// Top-p and min-p read probabilities computed in FP64 from z. vLLM v1 applies min-p
// before top-k; that only matters when top-p and min-p are combined.
//
// Draw: y = argmax_v (z_v + g_v) over unmasked v, with g_v = gumbel(uniform(seed,
// position, purpose, v)) (sample/philox.h), the sum in FP64 and ties to the lower id.
// This draws exactly from softmax(z) restricted to the unmasked tokens, needs no sort or
// prefix sum, and each token's noise depends only on its own key.
//
// Greedy rows (temperature < kGreedyTemperature) return the argmax of step 3's logits
// (lowest id on ties); they skip steps 4-7, whose masks never remove the argmax anyway.
//
// Logprobs are those of the distribution actually sampled from: log_softmax(z) after
// every step (vLLM's "processed_logprobs", not its default "raw_logprobs"), with -inf for
// masked tokens. Greedy rows report log_softmax of step 3's logits (temperature 1, no
// masks), which is what clients that ask for logprobs at temperature 0 expect.
//
// Batch invariance (§6): a row's result depends only on its own SampleInput. Each row is
// computed by one thread with sequential reductions; sample_batch only spreads rows.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sample/philox.h"
#include "sample/sampling_params.h"

namespace deepinfer::sampling {

// One row to sample. Nothing is owned; every pointer and span must outlive the call.
struct SampleInput {
  const float* logits = nullptr;           // [vocab] raw model logits; read only
  int64_t vocab = 0;
  const SamplingParams* params = nullptr;  // already validate()d for this vocab
  uint64_t seed = 0;       // SamplingParams::effective_seed, then derive_seed for choice i
  int64_t position = 0;    // absolute position of the token being sampled
  std::span<const int64_t> prompt_ids;     // read only for repetition_penalty
  std::span<const int64_t> output_ids;     // tokens generated so far (penalties)
  Purpose purpose = Purpose::kTarget;      // kDraft when a drafter samples its own tokens
  // Optional grammar mask, ceil(vocab / 32) words, null = all allowed: token v is allowed
  // iff bit (v % 32) of word v / 32 is set (xgrammar's layout).
  const uint32_t* token_bitmask = nullptr;
};

// A row after every processor: the distribution the sampler draws from. Verification
// (sample/verify.h) compares two of these, target and draft.
struct ProcessedRow {
  std::vector<float> logits;   // [vocab] z after steps 1-7; -inf marks a masked token
  double log_normalizer = 0;   // log sum_v exp(z_v), FP64, summed in token order
  int64_t argmax = -1;         // the lowest id among the largest z
  bool greedy = false;         // the draw is argmax (temperature 0)

  // log_softmax(z)[token]: the reported logprob; -inf if masked.
  double logprob(int64_t token) const;
  // The probability that draw() returns token: exp(logprob) when sampling, 1 or 0 when
  // greedy (a point mass on argmax).
  double prob(int64_t token) const;
};

// Runs steps 1-7 on one row. Throws InputError when the row cannot be sampled: a NaN or
// +inf logit, every token masked, or a prompt or output id outside [0, vocab).
ProcessedRow process(const SampleInput& in);

// Draws one token from a processed row with the keyed Gumbel-max rule above (argmax when
// greedy). Pure: the same row and key give the same token.
int64_t draw(const ProcessedRow& row, uint64_t seed, int64_t position, Purpose purpose);

// The k most likely unmasked tokens, by decreasing logprob, ties to the lower id; fewer
// than k when fewer tokens are unmasked (so no -inf ever reaches a JSON response).
std::vector<std::pair<int64_t, float>> top_logprobs(const ProcessedRow& row, int64_t k);

struct SampleResult {
  int64_t token = -1;  // -1 only when sample_batch reports an error for the row
  float logprob = 0;   // the sampled token's logprob under the processed distribution
  std::vector<std::pair<int64_t, float>> top_logprobs;  // params->logprobs entries, or none
  std::string error;   // sample_batch only: the InputError that ended this row
};

// process + draw + logprobs for one row.
SampleResult sample(const SampleInput& in);

// sample() for every row, rows spread over the thread pool. out.size() == rows.size().
// Row i's result equals sample(rows[i]) bit for bit, whatever the other rows are. A row
// whose sample() throws InputError gets token -1 and the message in `error`; the other
// rows are unaffected, so one bad request never ends its neighbours.
void sample_batch(std::span<const SampleInput> rows, std::span<SampleResult> out);

}  // namespace deepinfer::sampling
