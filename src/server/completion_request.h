// POST /v1/completions: the request body parsed, validated and tokenized.
#pragma once

#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "server/json_fields.h"
#include "server/request_common.h"
#include "server/sampling_fields.h"

namespace deepinfer::server {

struct CompletionPrompt {
  std::vector<int64_t> ids;
  std::string text;  // as given, or the detokenized ids (for echo)
};

struct CompletionRequest {
  std::vector<CompletionPrompt> prompts;
  RequestSampling sampling;  // max_tokens and logprobs filled in
  int64_t n = 1;
  bool echo = false;
  bool return_token_ids = false;  // vLLM: prompt_token_ids / token_ids in each choice
  StreamFlags stream;
};

// prompt: a string, an array of strings, an array of token ids, or an array of
// arrays of token ids. Throws ApiError (4xx) for anything malformed.
CompletionRequest parse_completion_request(const Json& body, const Engine& engine, const ModelInfo& model);

}  // namespace deepinfer::server
