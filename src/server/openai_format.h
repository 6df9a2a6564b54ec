// Pieces of OpenAI's response objects shared by both generation endpoints: ids,
// usage, the two log-probability layouts, and Server-Sent-Events framing.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/engine.h"
#include "server/json_fields.h"

namespace deepinfer::server {

// "cmpl-" / "chatcmpl-" followed by 24 random hex digits.
std::string new_response_id(std::string_view prefix);
int64_t unix_time_s();

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"}}
Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens);

// The text of one token, as the engine decodes it alone.
std::string token_text(const Engine& engine, int64_t token);

// Legacy completions layout: {"tokens", "token_logprobs", "top_logprobs", "text_offset"}.
// Appends to `out` (create it with empty_completion_logprobs()); text_offset counts
// bytes from `offset`, which the caller advances by the returned text length.
Json empty_completion_logprobs();
size_t append_completion_logprobs(Json& out, const std::vector<TokenLogprob>& logprobs, const Engine& engine,
                                  size_t offset);

// Chat layout: one {"token", "logprob", "bytes", "top_logprobs": [...]} per token.
Json chat_logprob_entries(const std::vector<TokenLogprob>& logprobs, const Engine& engine);

// One SSE event carrying a JSON object, and the terminator.
std::string sse_event(const Json& value);
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace deepinfer::server
