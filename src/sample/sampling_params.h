// Per-request sampling parameters, their OpenAI-style JSON form, and their validation.
//
// Every field here can come from an HTTP request, so every bad value is reported as an
// InputError whose one-line message names the parameter; nothing here aborts.
//
//   SamplingParams p = SamplingParams::from_json(body);  // types and shapes
//   p.validate(model_vocab_size);                         // ranges and ids
//
// The semantics of each processor, and the order in which they apply, are documented in
// sample/sampler.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace deepinfer::sampling {

// Limits on request-controlled sizes (OpenAI's where it publishes one).
inline constexpr float kMaxTemperature = 100.0f;
inline constexpr float kMaxLogitBias = 100.0f;
inline constexpr float kMaxPresencePenalty = 2.0f;   // also frequency; symmetric range
inline constexpr float kMaxRepetitionPenalty = 10.0f;
inline constexpr int64_t kMaxChoices = 128;          // n
inline constexpr int64_t kMaxTopLogprobs = 20;
inline constexpr size_t kMaxStopStrings = 16;
inline constexpr size_t kMaxStopStringBytes = 1024;
inline constexpr size_t kMaxStopTokenIds = 1024;

// Temperatures below this sample greedily: l / T would overflow or turn every draw into
// the argmax anyway (vLLM uses the same threshold).
inline constexpr float kGreedyTemperature = 1e-5f;

struct SamplingParams {
  float temperature = 1.0f;  // 0 (or < kGreedyTemperature): greedy argmax
  int64_t top_k = -1;        // <= 0: off; else keep the k most likely tokens
  float top_p = 1.0f;        // 1: off; else keep the smallest likely set of mass >= top_p
  float min_p = 0.0f;        // 0: off; else drop tokens with p < min_p * max p
  float repetition_penalty = 1.0f;  // 1: off; on tokens of the prompt and the output
  float presence_penalty = 0.0f;    // 0: off; on tokens of the output
  float frequency_penalty = 0.0f;   // 0: off; on tokens of the output, times their count
  std::vector<std::pair<int64_t, float>> logit_bias;  // (token id, added to its logit)
  std::vector<std::string> stop;                      // stop strings, not returned
  std::vector<int64_t> stop_token_ids;                // stop tokens, on top of EOS
  int64_t max_tokens = 16;  // upper bound on generated tokens
  int64_t n = 1;            // choices per request; see derive_seed() in sample/philox.h
  bool ignore_eos = false;  // keep generating after EOS (stop_token_ids still stop)
  int64_t logprobs = -1;    // -1: none; k >= 0: the sampled token's logprob and the top k
  std::optional<uint64_t> seed;  // absent: the engine's fixed default seed (§7.5)

  bool greedy() const { return temperature < kGreedyTemperature; }

  // The seed the sampler keys on: the request's own, else the engine default, so that
  // identical requests give identical output unless the client asks otherwise.
  uint64_t effective_seed(uint64_t engine_seed) const { return seed.value_or(engine_seed); }

  // Whether generating `token` ends the choice: a stop token id, or EOS unless ignored.
  bool is_stop_token(int64_t token, int64_t eos_token_id) const;

  // Throws InputError naming the first parameter that is out of range for a model with
  // `vocab_size` tokens. Checks: temperature in [0, 100]; top_k == -1, 0 or >= 1; top_p
  // in (0, 1]; min_p in [0, 1]; presence and frequency penalties in [-2, 2]; repetition
  // penalty in (0, 10]; logit_bias ids in [0, vocab) without duplicates and values in
  // [-100, 100]; stop: at most 16 non-empty strings of at most 1024 bytes; stop_token_ids
  // in [0, vocab), at most 1024; max_tokens >= 1; n in [1, 128]; logprobs in [-1, 20].
  // NaN fails every range.
  void validate(int64_t vocab_size) const;

  // Parses the OpenAI-style fields of a completion or chat-completion request body;
  // other fields are ignored, and null means "absent". Recognised: temperature, top_p,
  // top_k, min_p, max_tokens, max_completion_tokens (preferred over max_tokens), stop
  // (string or array of strings), seed, presence_penalty, frequency_penalty,
  // repetition_penalty, logit_bias (object {"token id": bias}), logprobs (bool, with
  // top_logprobs giving k; or an integer k as in the legacy completions API),
  // top_logprobs, n, ignore_eos, stop_token_ids. A field of the wrong JSON type, or an
  // integer field holding a fraction or an out-of-range number, throws InputError naming
  // the field. Ranges are left to validate(), which needs the vocabulary size.
  static SamplingParams from_json(const nlohmann::json& body);
};

}  // namespace deepinfer::sampling
