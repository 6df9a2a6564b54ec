// Facts about the served model that request validation needs, and the checks that
// both generation endpoints share.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "server/json_fields.h"

namespace deepinfer::server {

struct ModelInfo {
  std::string name;  // --served-model-name, or the engine's model name
  int64_t vocab_size = 0;
  int64_t max_model_len = 0;
};

// Prompts and choices one request may fan out to; each becomes an engine sequence.
constexpr int64_t kMaxPromptsPerRequest = 64;
constexpr int64_t kMaxSequencesPerRequest = 256;

// 404 model_not_found when 'model' names another model (absent is fine).
void check_model(const JsonFields& fields, const ModelInfo& model);

// 400 context_length_exceeded when prompt + completion do not fit the context.
// max_tokens <= 0 means "not given": then only the prompt must leave room for one token.
void check_context_length(int64_t prompt_tokens, int64_t max_tokens, const ModelInfo& model, const char* param);

// A token-id array from the request: 400 unless every entry is an id in [0, vocab).
std::vector<int64_t> parse_token_ids(const Json& value, const ModelInfo& model, const std::string& param);

}  // namespace deepinfer::server
