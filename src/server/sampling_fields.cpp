#include "server/sampling_fields.h"

#include <limits>

#include "common/check.h"
#include "runtime/constraint_fields.h"

namespace deepinfer::server {

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

std::vector<std::string> parse_stop(const JsonFields& f) {
  const Json* v = f.get("stop");
  if (!v) return {};
  std::vector<std::string> out;
  auto add = [&](const Json& s) {
    if (!s.is_string()) throw f.error("stop", "must be a string or an array of strings");
    const auto& str = s.get_ref<const std::string&>();
    if (str.empty()) throw f.error("stop", "must not contain empty strings");
    if (str.size() > kMaxStopBytes) throw f.error("stop", str_cat("strings must be at most ", kMaxStopBytes, " bytes"));
    out.push_back(str);
  };
  if (v->is_string()) {
    add(*v);
  } else if (v->is_array()) {
    if (int64_t(v->size()) > kMaxStopStrings) throw f.error("stop", str_cat("has more than ", kMaxStopStrings, " entries"));
    for (const Json& s : *v) add(s);
  } else {
    throw f.error("stop", str_cat("must be a string or an array of strings, got ", json_type_name(*v)));
  }
  return out;
}

std::vector<std::pair<int64_t, float>> parse_logit_bias(const JsonFields& f, int64_t vocab_size) {
  const Json* v = f.object("logit_bias");
  if (!v) return {};
  if (int64_t(v->size()) > kMaxLogitBias) throw f.error("logit_bias", str_cat("has more than ", kMaxLogitBias, " entries"));
  std::vector<std::pair<int64_t, float>> out;
  for (auto it = v->begin(); it != v->end(); ++it) {
    const std::string& key = it.key();
    int64_t id = -1;
    bool digits = !key.empty() && key.size() <= 18;
    for (char c : key) digits = digits && c >= '0' && c <= '9';
    if (digits) id = std::stoll(key);
    if (id < 0 || id >= vocab_size)
      throw f.error("logit_bias", str_cat("key '", key, "' is not a token id in [0, ", vocab_size, ")"));
    if (!it->is_number() || it->get<double>() < -100 || it->get<double>() > 100)
      throw f.error("logit_bias", str_cat("value for token ", id, " must be a number between -100 and 100"));
    out.emplace_back(id, it->get<float>());
  }
  return out;
}

std::vector<int64_t> parse_stop_token_ids(const JsonFields& f, int64_t vocab_size) {
  const Json* v = f.array("stop_token_ids");
  if (!v) return {};
  if (int64_t(v->size()) > kMaxStopTokenIds)
    throw f.error("stop_token_ids", str_cat("has more than ", kMaxStopTokenIds, " entries"));
  std::vector<int64_t> out;
  for (const Json& id : *v) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= vocab_size)
      throw f.error("stop_token_ids", str_cat("entries must be token ids in [0, ", vocab_size, ")"));
    out.push_back(id.get<int64_t>());
  }
  return out;
}

}  // namespace

RequestSampling parse_sampling(const JsonFields& f, int64_t vocab_size) {
  RequestSampling s;
  s.temperature = float(f.number("temperature", 0, 2).value_or(1.0));
  s.top_p = float(f.number("top_p", 0, 1).value_or(1.0));
  if (s.top_p <= 0) throw f.error("top_p", "must be greater than 0");
  // vLLM treats 0 like -1 (no top-k).
  s.top_k = f.integer("top_k", -1, kInt64Max).value_or(-1);
  if (s.top_k == 0) s.top_k = -1;
  s.min_p = float(f.number("min_p", 0, 1).value_or(0.0));
  s.presence_penalty = float(f.number("presence_penalty", -2, 2).value_or(0.0));
  s.frequency_penalty = float(f.number("frequency_penalty", -2, 2).value_or(0.0));
  s.repetition_penalty = float(f.number("repetition_penalty", 0, 10).value_or(1.0));
  if (s.repetition_penalty <= 0) throw f.error("repetition_penalty", "must be greater than 0");
  s.logit_bias = parse_logit_bias(f, vocab_size);
  s.stop = parse_stop(f);
  s.stop_token_ids = parse_stop_token_ids(f, vocab_size);
  s.ignore_eos = f.boolean("ignore_eos").value_or(false);
  // OpenAI documents seed as an integer of either sign; the engine's seed is 64 bits.
  if (auto seed = f.integer("seed", kInt64Min, kInt64Max)) s.seed = uint64_t(*seed);
  return s;
}

void reject_unsupported_fields(const JsonFields& f) {
  auto not_yet = [&](std::string_view name, const std::string& what) {
    return ApiError(400, str_cat(what, " is not supported yet"), f.param(name), "unsupported_parameter");
  };
  for (const char* name : {"guided_whitespace_pattern", "guided_decoding_backend", "prompt_logprobs",
                           "allowed_token_ids", "bad_words", "min_tokens", "truncate_prompt_tokens", "suffix",
                           "functions", "function_call", "audio", "prediction"}) {
    const Json* v = f.get(name);
    // Zero / empty / false are the defaults clients sometimes send explicitly.
    if (!v || (v->is_number() && v->get<double>() == 0) || (v->is_boolean() && !v->get<bool>()) ||
        ((v->is_array() || v->is_object()) && v->empty()) ||
        (v->is_string() && v->get_ref<const std::string&>().empty()))
      continue;
    throw not_yet(name, str_cat("'", name, "'"));
  }
  if (f.boolean("use_beam_search").value_or(false)) throw not_yet("use_beam_search", "beam search");
  if (f.boolean("include_stop_str_in_output").value_or(false))
    throw not_yet("include_stop_str_in_output", "include_stop_str_in_output");
  if (!f.boolean("skip_special_tokens").value_or(true)) throw not_yet("skip_special_tokens", "skip_special_tokens=false");
  if (const Json* m = f.array("modalities")) {
    for (const Json& x : *m)
      if (x != "text") throw not_yet("modalities", "output modalities other than text");
  }
}

std::optional<StructuredConstraint> parse_structured_outputs(const Json& body, const Engine& engine) {
  std::optional<constraints::RequestConstraint> rc;
  try {
    rc = constraints::constraint_from_request(body);
  } catch (const constraints::FieldError& e) {
    throw bad_request(e.what(), e.param());
  }
  if (!rc) return std::nullopt;
  try {
    engine.check_constraint(rc->constraint);
  } catch (const InputError& e) {
    throw ApiError(400, str_cat("'", rc->param, "': ", e.what()), rc->param, "invalid_constraint");
  }
  return rc->constraint;
}

StreamFlags parse_stream_flags(const JsonFields& f) {
  StreamFlags s;
  s.stream = f.boolean("stream").value_or(false);
  if (const Json* opts = f.object("stream_options")) {
    if (!s.stream) throw f.error("stream_options", "is only allowed when 'stream' is true");
    JsonFields o(*opts, "stream_options.");
    s.include_usage = o.boolean("include_usage").value_or(false);
    (void)o.boolean("continuous_usage_stats");
  }
  return s;
}

}  // namespace deepinfer::server
