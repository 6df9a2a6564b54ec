#include "server/completion_request.h"

#include "common/check.h"

namespace deepinfer::server {

namespace {

constexpr int64_t kDefaultMaxTokens = 16;  // OpenAI's default for completions

std::vector<CompletionPrompt> parse_prompts(const JsonFields& f, const Engine& engine, const ModelInfo& model) {
  const Json* p = f.get("prompt");
  if (!p) throw ApiError(400, "'prompt' is required", "prompt", "missing_required_parameter");
  auto from_text = [&](const std::string& text) { return CompletionPrompt{engine.tokenize(text), text}; };
  auto from_ids = [&](const Json& ids) {
    CompletionPrompt cp{parse_token_ids(ids, model, "prompt"), ""};
    cp.text = engine.detokenize(cp.ids);
    return cp;
  };
  std::vector<CompletionPrompt> out;
  if (p->is_string()) {
    out.push_back(from_text(p->get_ref<const std::string&>()));
  } else if (p->is_array() && !p->empty()) {
    // A flat array of integers is one tokenized prompt; otherwise a batch.
    const bool one_tokenized = (*p)[0].is_number();
    if (one_tokenized) {
      out.push_back(from_ids(*p));
    } else {
      if (int64_t(p->size()) > kMaxPromptsPerRequest)
        throw f.error("prompt", str_cat("holds more than ", kMaxPromptsPerRequest, " prompts"));
      for (const Json& item : *p) {
        if (item.is_string()) out.push_back(from_text(item.get_ref<const std::string&>()));
        else if (item.is_array()) out.push_back(from_ids(item));
        else throw f.error("prompt", "must be a string, an array of strings, or token ids");
      }
    }
  } else if (p->is_array()) {
    throw f.error("prompt", "must not be an empty array");
  } else {
    throw f.error("prompt", str_cat("must be a string, an array of strings, or token ids, got ", json_type_name(*p)));
  }
  for (const CompletionPrompt& cp : out)
    if (cp.ids.empty()) throw f.error("prompt", "must not be empty");
  return out;
}

}  // namespace

CompletionRequest parse_completion_request(const Json& body, const Engine& engine, const ModelInfo& model) {
  JsonFields f(body);
  check_model(f, model);
  reject_unsupported_fields(f);
  (void)f.string("user");
  CompletionRequest r;
  r.n = f.integer("n", 1, kMaxChoices).value_or(1);
  if (auto best_of = f.integer("best_of", 1, kMaxChoices); best_of && *best_of != r.n)
    throw ApiError(400, "best_of different from n is not supported yet", "best_of", "unsupported_parameter");
  r.echo = f.boolean("echo").value_or(false);
  r.return_token_ids = f.boolean("return_token_ids").value_or(false);
  r.stream = parse_stream_flags(f);
  r.sampling = parse_sampling(f, model.vocab_size);
  r.sampling.max_tokens = f.integer("max_tokens", 1, model.max_model_len).value_or(kDefaultMaxTokens);
  if (auto lp = f.integer("logprobs", 0, kMaxTopLogprobs)) r.sampling.logprobs = *lp;
  if (r.echo && r.sampling.logprobs >= 0)
    throw ApiError(400, "echo together with logprobs (prompt logprobs) is not supported yet", "echo",
                   "unsupported_parameter");
  // Validate the cheap fields before tokenizing a possibly large prompt.
  r.prompts = parse_prompts(f, engine, model);
  r.sampling.structured = parse_structured_outputs(body, engine);
  if (int64_t(r.prompts.size()) * r.n > kMaxSequencesPerRequest)
    throw f.error("n", str_cat("times the number of prompts must be at most ", kMaxSequencesPerRequest));
  for (const CompletionPrompt& cp : r.prompts)
    check_context_length(int64_t(cp.ids.size()), r.sampling.max_tokens, model, "prompt");
  return r;
}

}  // namespace deepinfer::server
