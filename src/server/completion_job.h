// The /v1/completions response: text_completion objects and stream chunks.
#pragma once

#include <memory>

#include "server/completion_request.h"
#include "server/generation_job.h"

namespace deepinfer::server {

// Choice index = prompt index * n + choice number, as in OpenAI's API. With a seed,
// choice i samples with seed + i so that n > 1 gives n different samples.
std::shared_ptr<GenerationJob> make_completion_job(JobContext ctx, std::shared_ptr<ResponseChannel> channel,
                                                   CompletionRequest request);

}  // namespace deepinfer::server
