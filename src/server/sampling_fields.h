// The request fields shared by /v1/completions and /v1/chat/completions: sampling
// parameters (OpenAI's plus vLLM's extensions: top_k, min_p, repetition_penalty,
// stop_token_ids, ignore_eos) and the list of recognised-but-unsupported fields,
// which are refused with a clear 400 instead of being silently ignored.
#pragma once

#include <cstdint>
#include <optional>

#include "deepinfer/engine.h"
#include "server/json_fields.h"

namespace deepinfer::server {

constexpr int64_t kMaxChoices = 128;       // n
constexpr int64_t kMaxStopStrings = 16;
constexpr size_t kMaxStopBytes = 1024;
constexpr int64_t kMaxStopTokenIds = 256;
constexpr int64_t kMaxLogitBias = 1024;
constexpr int64_t kMaxTopLogprobs = 20;

// Fills everything in RequestSampling except max_tokens and logprobs, which the two
// endpoints spell differently. vocab_size bounds token ids (logit_bias, stop_token_ids).
RequestSampling parse_sampling(const JsonFields& fields, int64_t vocab_size);

// 400 for fields that ask for a feature the server does not have yet
// (guided_whitespace_pattern, beam search, prompt_logprobs, ...).
void reject_unsupported_fields(const JsonFields& fields);

// The structured-output constraint of a request (response_format json_object /
// json_schema, vLLM's structured_outputs and guided_json / guided_regex /
// guided_grammar / guided_choice; runtime/constraint_fields.h), compiled once through
// the engine's cache so that a bad schema, regex or grammar is a 400 naming the field.
std::optional<StructuredConstraint> parse_structured_outputs(const Json& body, const Engine& engine);

// stream and stream_options.include_usage; stream_options without stream is a 400
// as in OpenAI's API.
struct StreamFlags {
  bool stream = false;
  bool include_usage = false;
};
StreamFlags parse_stream_flags(const JsonFields& fields);

}  // namespace deepinfer::server
