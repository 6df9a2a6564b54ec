#include "server/openai_format.h"

#include <chrono>
#include <random>

namespace deepinfer::server {

namespace {

// JSON has no -inf; OpenAI reports impossible tokens as -9999.
double finite_logprob(float lp) { return lp < -9999.0f ? -9999.0 : double(lp); }

}  // namespace

std::string new_response_id(std::string_view prefix) {
  // Ids only need to be unique, not secret; a per-thread engine avoids a lock.
  thread_local std::mt19937_64 rng(std::random_device{}() ^
                                   uint64_t(std::chrono::steady_clock::now().time_since_epoch().count()));
  static const char* kHex = "0123456789abcdef";
  std::string id(prefix);
  for (int i = 0; i < 24; ++i) id.push_back(kHex[rng() & 15]);
  return id;
}

int64_t unix_time_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

Json usage_json(int64_t prompt_tokens, int64_t completion_tokens, int64_t cached_tokens) {
  return Json{{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", cached_tokens}}}};
}

std::string token_text(const Engine& engine, int64_t token) { return engine.detokenize({token}); }

Json empty_completion_logprobs() {
  return Json{{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
              {"text_offset", Json::array()}};
}

size_t append_completion_logprobs(Json& out, const std::vector<TokenLogprob>& logprobs, const Engine& engine,
                                  size_t offset) {
  size_t advanced = 0;
  for (const TokenLogprob& lp : logprobs) {
    std::string text = token_text(engine, lp.token);
    Json top = Json::object();
    for (const auto& [tok, value] : lp.top) top[token_text(engine, tok)] = finite_logprob(value);
    out["tokens"].push_back(text);
    out["token_logprobs"].push_back(finite_logprob(lp.logprob));
    out["top_logprobs"].push_back(std::move(top));
    out["text_offset"].push_back(offset + advanced);
    advanced += text.size();
  }
  return advanced;
}

namespace {

Json token_bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(int(c));
  return bytes;
}

}  // namespace

Json chat_logprob_entries(const std::vector<TokenLogprob>& logprobs, const Engine& engine) {
  Json entries = Json::array();
  for (const TokenLogprob& lp : logprobs) {
    std::string text = token_text(engine, lp.token);
    Json top = Json::array();
    for (const auto& [tok, value] : lp.top) {
      std::string t = token_text(engine, tok);
      top.push_back({{"token", t}, {"logprob", finite_logprob(value)}, {"bytes", token_bytes(t)}});
    }
    entries.push_back({{"token", text}, {"logprob", finite_logprob(lp.logprob)}, {"bytes", token_bytes(text)}, {"top_logprobs", top}});
  }
  return entries;
}

std::string sse_event(const Json& value) {
  std::string s = "data: ";
  s += dump_json(value);
  s += "\n\n";
  return s;
}

}  // namespace deepinfer::server
