#include "sample/sampling_params.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "common/check.h"

namespace deepinfer::sampling {
namespace {

using Json = nlohmann::json;

// Written as "!(lo <= x <= hi)" checks so that NaN fails them.
bool in_closed(float x, float lo, float hi) { return x >= lo && x <= hi; }

// A double outside FP32's range converts to float with undefined behaviour; saturate
// to +-inf instead and let validate() reject it.
float to_float(double d) {
  if (std::isnan(d)) return std::numeric_limits<float>::quiet_NaN();
  if (d > double(std::numeric_limits<float>::max())) return std::numeric_limits<float>::infinity();
  if (d < -double(std::numeric_limits<float>::max())) return -std::numeric_limits<float>::infinity();
  return float(d);
}

// The field's value, or nullptr when it is absent or null.
const Json* field(const Json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

float as_float(const Json& v, const char* name) {
  DI_CHECK_INPUT(v.is_number(), name, " must be a number (got ", v.type_name(), ")");
  return to_float(v.get<double>());
}

int64_t as_int(const Json& v, const char* name) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    DI_CHECK_INPUT(u <= uint64_t(std::numeric_limits<int64_t>::max()), name, " is out of range");
    return int64_t(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    // Clients in loosely typed languages send 5.0 for 5; accept exact integers only.
    double d = v.get<double>();
    DI_CHECK_INPUT(std::isfinite(d) && d == std::floor(d), name, " must be an integer");
    DI_CHECK_INPUT(d >= -0x1p63 && d < 0x1p63, name, " is out of range");
    return int64_t(d);
  }
  throw InputError(str_cat(name, " must be an integer (got ", v.type_name(), ")"));
}

bool as_bool(const Json& v, const char* name) {
  DI_CHECK_INPUT(v.is_boolean(), name, " must be a boolean (got ", v.type_name(), ")");
  return v.get<bool>();
}

uint64_t as_seed(const Json& v) {
  // Any 64-bit integer, signed or not, is a seed; negative ones keep their bits.
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  return uint64_t(as_int(v, "seed"));
}

std::vector<std::string> as_stop(const Json& v) {
  if (v.is_string()) return {v.get<std::string>()};
  DI_CHECK_INPUT(v.is_array(), "stop must be a string or an array of strings (got ", v.type_name(), ")");
  DI_CHECK_INPUT(v.size() <= kMaxStopStrings, "stop has ", v.size(), " strings; at most ", kMaxStopStrings,
                 " are allowed");
  std::vector<std::string> out;
  for (const Json& s : v) {
    DI_CHECK_INPUT(s.is_string(), "stop must be a string or an array of strings (got an array element of type ",
                   s.type_name(), ")");
    out.push_back(s.get<std::string>());
  }
  return out;
}

std::vector<std::pair<int64_t, float>> as_logit_bias(const Json& v) {
  DI_CHECK_INPUT(v.is_object(), "logit_bias must be an object of \"token id\": bias (got ", v.type_name(), ")");
  std::vector<std::pair<int64_t, float>> out;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& key = it.key();
    int64_t id = 0;
    auto [end, ec] = std::from_chars(key.data(), key.data() + key.size(), id);
    // The key itself may hold anything (newlines included), so it stays out of the message.
    DI_CHECK_INPUT(ec == std::errc() && end == key.data() + key.size() && !key.empty(),
                   "logit_bias keys must be token ids written as decimal integers");
    DI_CHECK_INPUT(it.value().is_number(), "logit_bias values must be numbers (got ", it.value().type_name(),
                   " for token ", id, ")");
    out.emplace_back(id, to_float(it.value().get<double>()));
  }
  return out;
}

std::vector<int64_t> as_token_ids(const Json& v, const char* name) {
  DI_CHECK_INPUT(v.is_array(), name, " must be an array of integers (got ", v.type_name(), ")");
  DI_CHECK_INPUT(v.size() <= kMaxStopTokenIds, name, " has ", v.size(), " entries; at most ",
                 kMaxStopTokenIds, " are allowed");
  std::vector<int64_t> out;
  for (const Json& e : v) out.push_back(as_int(e, name));
  return out;
}

}  // namespace

bool SamplingParams::is_stop_token(int64_t token, int64_t eos_token_id) const {
  if (!ignore_eos && token == eos_token_id) return true;
  return std::find(stop_token_ids.begin(), stop_token_ids.end(), token) != stop_token_ids.end();
}

void SamplingParams::validate(int64_t vocab_size) const {
  DI_CHECK_INPUT(in_closed(temperature, 0.0f, kMaxTemperature), "temperature must be in [0, ", kMaxTemperature,
                 "] (got ", temperature, ")");
  DI_CHECK_INPUT(top_k == -1 || top_k >= 0, "top_k must be -1 or 0 (off) or at least 1 (got ", top_k, ")");
  DI_CHECK_INPUT(top_p > 0.0f && top_p <= 1.0f, "top_p must be in (0, 1] (got ", top_p, ")");
  DI_CHECK_INPUT(in_closed(min_p, 0.0f, 1.0f), "min_p must be in [0, 1] (got ", min_p, ")");
  DI_CHECK_INPUT(in_closed(presence_penalty, -kMaxPresencePenalty, kMaxPresencePenalty),
                 "presence_penalty must be in [-2, 2] (got ", presence_penalty, ")");
  DI_CHECK_INPUT(in_closed(frequency_penalty, -kMaxPresencePenalty, kMaxPresencePenalty),
                 "frequency_penalty must be in [-2, 2] (got ", frequency_penalty, ")");
  DI_CHECK_INPUT(repetition_penalty > 0.0f && repetition_penalty <= kMaxRepetitionPenalty,
                 "repetition_penalty must be in (0, ", kMaxRepetitionPenalty, "] (got ", repetition_penalty, ")");

  std::unordered_set<int64_t> biased;
  for (const auto& [id, bias] : logit_bias) {
    DI_CHECK_INPUT(id >= 0 && id < vocab_size, "logit_bias token id ", id, " is outside the vocabulary [0, ",
                   vocab_size, ")");
    DI_CHECK_INPUT(in_closed(bias, -kMaxLogitBias, kMaxLogitBias), "logit_bias for token ", id,
                   " must be in [-100, 100] (got ", bias, ")");
    DI_CHECK_INPUT(biased.insert(id).second, "logit_bias lists token ", id, " twice");
  }

  DI_CHECK_INPUT(stop.size() <= kMaxStopStrings, "stop has ", stop.size(), " strings; at most ", kMaxStopStrings,
                 " are allowed");
  for (const std::string& s : stop) {
    DI_CHECK_INPUT(!s.empty(), "stop strings must not be empty");
    DI_CHECK_INPUT(s.size() <= kMaxStopStringBytes, "stop strings must be at most ", kMaxStopStringBytes,
                   " bytes (got one of ", s.size(), ")");
  }
  DI_CHECK_INPUT(stop_token_ids.size() <= kMaxStopTokenIds, "stop_token_ids has ", stop_token_ids.size(),
                 " entries; at most ", kMaxStopTokenIds, " are allowed");
  for (int64_t id : stop_token_ids) {
    DI_CHECK_INPUT(id >= 0 && id < vocab_size, "stop_token_ids entry ", id, " is outside the vocabulary [0, ",
                   vocab_size, ")");
  }

  DI_CHECK_INPUT(max_tokens >= 1, "max_tokens must be at least 1 (got ", max_tokens, ")");
  DI_CHECK_INPUT(n >= 1 && n <= kMaxChoices, "n must be in [1, ", kMaxChoices, "] (got ", n, ")");
  DI_CHECK_INPUT(logprobs >= -1 && logprobs <= kMaxTopLogprobs, "logprobs must be in [0, ", kMaxTopLogprobs,
                 "] (got ", logprobs, ")");
}

SamplingParams SamplingParams::from_json(const Json& body) {
  DI_CHECK_INPUT(body.is_object(), "request body must be a JSON object (got ", body.type_name(), ")");
  SamplingParams p;
  if (const Json* v = field(body, "temperature")) p.temperature = as_float(*v, "temperature");
  if (const Json* v = field(body, "top_p")) p.top_p = as_float(*v, "top_p");
  if (const Json* v = field(body, "top_k")) p.top_k = as_int(*v, "top_k");
  if (const Json* v = field(body, "min_p")) p.min_p = as_float(*v, "min_p");
  if (const Json* v = field(body, "presence_penalty")) p.presence_penalty = as_float(*v, "presence_penalty");
  if (const Json* v = field(body, "frequency_penalty")) p.frequency_penalty = as_float(*v, "frequency_penalty");
  if (const Json* v = field(body, "repetition_penalty")) {
    p.repetition_penalty = as_float(*v, "repetition_penalty");
  }
  if (const Json* v = field(body, "max_tokens")) p.max_tokens = as_int(*v, "max_tokens");
  // OpenAI renamed max_tokens; the new name wins when a client sends both.
  if (const Json* v = field(body, "max_completion_tokens")) p.max_tokens = as_int(*v, "max_completion_tokens");
  if (const Json* v = field(body, "stop")) p.stop = as_stop(*v);
  if (const Json* v = field(body, "stop_token_ids")) p.stop_token_ids = as_token_ids(*v, "stop_token_ids");
  if (const Json* v = field(body, "seed")) p.seed = as_seed(*v);
  if (const Json* v = field(body, "logit_bias")) p.logit_bias = as_logit_bias(*v);
  if (const Json* v = field(body, "n")) p.n = as_int(*v, "n");
  if (const Json* v = field(body, "ignore_eos")) p.ignore_eos = as_bool(*v, "ignore_eos");

  const Json* logprobs = field(body, "logprobs");
  const Json* top = field(body, "top_logprobs");
  if (logprobs != nullptr && logprobs->is_boolean()) {
    // Chat completions: logprobs switches them on, top_logprobs says how many.
    bool on = logprobs->get<bool>();
    DI_CHECK_INPUT(on || top == nullptr, "top_logprobs requires logprobs to be true");
    if (on) p.logprobs = top != nullptr ? as_int(*top, "top_logprobs") : 0;
    DI_CHECK_INPUT(!on || p.logprobs >= 0, "top_logprobs must be in [0, ", kMaxTopLogprobs,
                   "] (got ", p.logprobs, ")");
  } else if (logprobs != nullptr) {
    // Legacy completions: logprobs is the number of alternatives itself.
    DI_CHECK_INPUT(logprobs->is_number(), "logprobs must be a boolean or an integer (got ", logprobs->type_name(),
                   ")");
    DI_CHECK_INPUT(top == nullptr, "top_logprobs requires logprobs to be true");
    p.logprobs = as_int(*logprobs, "logprobs");
    DI_CHECK_INPUT(p.logprobs >= 0, "logprobs must be in [0, ", kMaxTopLogprobs, "] (got ", p.logprobs, ")");
  } else {
    DI_CHECK_INPUT(top == nullptr, "top_logprobs requires logprobs to be true");
  }
  return p;
}

}  // namespace deepinfer::sampling
