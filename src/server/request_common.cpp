#include "server/request_common.h"

#include "common/check.h"

namespace deepinfer::server {

void check_model(const JsonFields& f, const ModelInfo& model) {
  auto name = f.string("model", 4096);
  if (name && !name->empty() && *name != model.name)
    throw ApiError(404, str_cat("The model '", *name, "' does not exist; this server serves '", model.name, "'."),
                   "model", "model_not_found");
}

void check_context_length(int64_t prompt_tokens, int64_t max_tokens, const ModelInfo& model, const char* param) {
  const int64_t want = prompt_tokens + std::max<int64_t>(max_tokens, 1);
  if (want <= model.max_model_len) return;
  std::string msg = max_tokens > 0
                        ? str_cat("This model's maximum context length is ", model.max_model_len,
                                  " tokens. However, you requested ", want, " tokens (", prompt_tokens,
                                  " in the prompt, ", max_tokens, " for the completion). Please reduce the length "
                                  "of the prompt or the completion.")
                        : str_cat("This model's maximum context length is ", model.max_model_len,
                                  " tokens. However, the prompt has ", prompt_tokens,
                                  " tokens, leaving no room for the completion.");
  throw ApiError(400, msg, param, "context_length_exceeded");
}

std::vector<int64_t> parse_token_ids(const Json& value, const ModelInfo& model, const std::string& param) {
  if (!value.is_array()) throw bad_request(str_cat("'", param, "' must be an array of token ids"), param);
  std::vector<int64_t> ids;
  ids.reserve(value.size());
  for (const Json& id : value) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= model.vocab_size ||
        (id.is_number_unsigned() && id.get<uint64_t>() >= uint64_t(model.vocab_size)))
      throw bad_request(str_cat("'", param, "' must contain token ids in [0, ", model.vocab_size, "), got ", brief_json(id)),
                        param);
    ids.push_back(id.get<int64_t>());
  }
  return ids;
}

}  // namespace deepinfer::server
