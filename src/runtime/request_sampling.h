// Conversions between the public RequestSampling (include/deepinfer/engine.h) and the
// sampler's SamplingParams. The two structs carry the same fields; the public one
// keeps the engine header free of internal includes.
#pragma once

#include "deepinfer/engine.h"
#include "sample/sampling_params.h"

namespace deepinfer {

sampling::SamplingParams to_sampling_params(const RequestSampling& s);
RequestSampling to_request_sampling(const sampling::SamplingParams& p);

}  // namespace deepinfer
