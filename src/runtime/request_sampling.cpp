#include "runtime/request_sampling.h"

namespace deepinfer {
namespace {

// One field list for both directions, so a field added to one struct cannot be
// forgotten in one of the conversions.
template <typename From, typename To>
void copy_fields(const From& f, To& t) {
  t.temperature = f.temperature;
  t.top_k = f.top_k;
  t.top_p = f.top_p;
  t.min_p = f.min_p;
  t.repetition_penalty = f.repetition_penalty;
  t.presence_penalty = f.presence_penalty;
  t.frequency_penalty = f.frequency_penalty;
  t.logit_bias = f.logit_bias;
  t.stop = f.stop;
  t.stop_token_ids = f.stop_token_ids;
  t.max_tokens = f.max_tokens;
  t.ignore_eos = f.ignore_eos;
  t.logprobs = f.logprobs;
  t.seed = f.seed;
  t.n = f.n;
}

}  // namespace

sampling::SamplingParams to_sampling_params(const RequestSampling& s) {
  sampling::SamplingParams p;
  copy_fields(s, p);
  return p;
}

RequestSampling to_request_sampling(const sampling::SamplingParams& p) {
  RequestSampling s;
  copy_fields(p, s);
  return s;
}

}  // namespace deepinfer
