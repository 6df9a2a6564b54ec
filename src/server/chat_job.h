// The /v1/chat/completions response: chat.completion objects and stream chunks,
// with reasoning_content and tool_calls split out of the generated text by the
// V4.1 output parser.
#pragma once

#include <memory>

#include "server/generation_job.h"

namespace deepinfer::server {

// Parses and validates the body (ApiError on failure) and returns the job, not yet
// started. With a seed, choice i samples with seed + i.
std::shared_ptr<GenerationJob> make_chat_job(JobContext ctx, std::shared_ptr<ResponseChannel> channel,
                                             const Json& body);

}  // namespace deepinfer::server
