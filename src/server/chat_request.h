// POST /v1/chat/completions: messages, tools and thinking options parsed and
// rendered through the V4.1 prompt encoding (tokenizer/chat_encoding.h).
//
// Request fields beyond OpenAI's (documented in src/server/README.md):
//   thinking: true | false | {"type": "enabled" | "disabled"}   (default false)
//   reasoning_effort: "low" | "high" | "max"   ("minimal" -> low, "medium" -> high);
//       giving it without 'thinking' turns thinking on
//   chat_template_kwargs: {"thinking" | "enable_thinking": bool, "reasoning_effort": str}  (vLLM)
//   top_k, min_p, repetition_penalty, stop_token_ids, ignore_eos, return_token_ids  (vLLM)
#pragma once

#include <string>
#include <vector>

#include "deepinfer/engine.h"
#include "server/json_fields.h"
#include "server/request_common.h"
#include "server/sampling_fields.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::server {

constexpr int64_t kMaxMessages = 10000;
constexpr int64_t kMaxTools = 256;

// The prompt text of a chat request (messages, tools, thinking), as /tokenize needs it.
struct RenderedChat {
  std::string text;
  bool thinking = false;
  bool tools = false;  // tools were rendered, so tool calls are parsed from the output
};
RenderedChat render_chat_prompt(const Json& body, const ModelInfo& model);

struct ChatRequest {
  RenderedChat prompt;
  std::vector<int64_t> prompt_ids;
  RequestSampling sampling;  // max_tokens and logprobs filled in
  int64_t n = 1;
  bool return_token_ids = false;
  StreamFlags stream;
};
ChatRequest parse_chat_request(const Json& body, const Engine& engine, const ModelInfo& model);

}  // namespace deepinfer::server
