#include "fake_engine.h"

#include <algorithm>

#include "common/check.h"
#include "sample/philox.h"

namespace deepinfer::testing {

std::vector<int64_t> FakeEngine::tokenize(const std::string& text) const {
  std::vector<int64_t> ids;
  for (unsigned char c : text) ids.push_back(int64_t(c) + 4);
  return ids;
}

std::string FakeEngine::detokenize(const std::vector<int64_t>& ids) const {
  std::string text;
  for (int64_t id : ids)
    if (id >= 4 && id < kFakeVocab) text.push_back(char(id - 4));
  return text;
}

std::string FakeEngine::add_request(const GenerateRequest& request) {
  DI_CHECK_INPUT(!request.prompt_ids.empty(), "empty prompt");
  for (int64_t id : request.prompt_ids) DI_CHECK_INPUT(id >= 0 && id < kFakeVocab, "token id ", id, " out of range");
  DI_CHECK_INPUT(int64_t(request.prompt_ids.size()) + request.params.max_tokens <= max_model_len_,
                 "prompt and max_tokens exceed the context");
  DI_CHECK_INPUT(request.params.max_tokens >= 1, "max_tokens must be positive");
  DI_CHECK_INPUT(request.params.n >= 1 && request.params.n <= 128, "n must be in [1, 128]");
  std::string id = request.request_id.empty() ? str_cat("fake-", num_added_) : request.request_id;
  DI_CHECK_INPUT(!active_.count({id, 0}), "duplicate request id ", id);
  Active a;
  a.req = request;
  a.req.request_id = id;
  const std::string prompt = detokenize(request.prompt_ids);
  // Lets tests make the engine refuse the second sequence of a request.
  DI_CHECK_INPUT(prompt.find("[[reject-second]]") == std::string::npos || id.size() < 2 ||
                     id.compare(id.size() - 2, 2, "-1") != 0,
                 "the engine refuses this sequence");
  if (auto at = prompt.find("[[say:"); at != std::string::npos) {
    auto end = prompt.find("]]", at);
    a.script = prompt.substr(at + 6, end == std::string::npos ? std::string::npos : end - at - 6);
    a.scripted = true;
  }
  prefix_queries_ += int64_t(request.prompt_ids.size());
  if (!seen_prompts_.insert(request.prompt_ids).second) {
    a.cached = int64_t(request.prompt_ids.size()) - 1;
    prefix_hits_ += a.cached;
  }
  for (int64_t i = 0; i < request.params.n; ++i) {
    Active sample = a;
    sample.index = i;
    sample.seed = sampling::derive_seed(request.params.seed.value_or(0), uint64_t(i));
    active_.emplace(std::make_pair(id, i), std::move(sample));
  }
  ++num_added_;
  return id;
}

void FakeEngine::abort_request(const std::string& request_id) {
  for (auto it = active_.lower_bound({request_id, 0}); it != active_.end() && it->first.first == request_id; ++it)
    it->second.aborted = true;
}

int64_t FakeEngine::next_token(const Active& a) const {
  if (a.scripted) return a.generated < int64_t(a.script.size()) ? int64_t((unsigned char)a.script[a.generated]) + 4 : kFakeEos;
  int64_t start = 0;
  for (int64_t id : a.req.prompt_ids) start += id;
  if (a.req.params.temperature == 0) return 4 + 'a' + (start + a.generated) % 26;
  // A splitmix-style hash of (seed, position): a pure function, as the engine promises.
  uint64_t x = a.seed * 0x9E3779B97F4A7C15ull + uint64_t(a.generated + 1) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return 4 + 'a' + int64_t(x % 26);
}

RequestOutput FakeEngine::advance(Active& a) {
  RequestOutput out;
  out.request_id = a.req.request_id;
  out.index = a.index;
  out.prompt_tokens = int64_t(a.req.prompt_ids.size());
  out.cached_tokens = a.cached;
  if (a.aborted) {
    out.finished = true;
    out.finish_reason = "abort";
    out.completion_tokens = a.generated;
    return out;
  }
  const RequestSampling& p = a.req.params;
  const int64_t token = next_token(a);
  a.generated++;
  out.new_token_ids = {token};
  out.completion_tokens = a.generated;
  if (p.logprobs >= 0) {
    TokenLogprob lp{token, -0.25f, {}};
    for (int64_t k = 0; k < p.logprobs; ++k) lp.top.emplace_back(k == 0 ? token : 4 + 'a' + (token + k) % 26, -0.25f * float(k + 1));
    out.logprobs.push_back(lp);
  }
  const bool eos = token == kFakeEos && !p.ignore_eos;
  const bool stop_id = std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
  if (!eos && !stop_id) a.text += detokenize({token});
  // Stop strings: cut at the earliest match; hold back a tail that may still become one.
  size_t cut = std::string::npos, hold = 0;
  for (const std::string& s : p.stop) {
    cut = std::min(cut, a.text.find(s));
    for (size_t k = std::min(s.size() - 1, a.text.size()); k > 0; --k)
      if (a.text.compare(a.text.size() - k, k, s, 0, k) == 0) {
        hold = std::max(hold, k);
        break;
      }
  }
  if (cut != std::string::npos) {
    a.text.resize(cut);
    out.finished = true;
    out.finish_reason = "stop";
  } else if (eos || stop_id) {
    out.finished = true;
    out.finish_reason = "stop";
  } else if (a.generated >= p.max_tokens) {
    out.finished = true;
    out.finish_reason = "length";
  }
  const size_t upto = out.finished ? a.text.size() : a.text.size() - hold;
  if (upto > a.emitted) {
    out.text_delta = a.text.substr(a.emitted, upto - a.emitted);
    a.emitted = upto;
  }
  return out;
}

std::vector<RequestOutput> FakeEngine::step() {
  std::vector<RequestOutput> outs;
  for (auto it = active_.begin(); it != active_.end();) {
    outs.push_back(advance(it->second));
    it = outs.back().finished ? active_.erase(it) : std::next(it);
  }
  return outs;
}

EngineStats FakeEngine::stats() const {
  EngineStats s;
  s.running = int64_t(active_.size());
  s.cache_blocks_total = 100;
  s.cache_blocks_used = std::min<int64_t>(100, int64_t(active_.size()));
  s.prefix_queries = prefix_queries_;
  s.prefix_hits = prefix_hits_;
  return s;
}

FakeBackend::FakeBackend(std::unique_ptr<FakeEngine> engine, std::chrono::milliseconds step_delay)
    : engine_(std::move(engine)), step_delay_ms_(step_delay.count()), thread_([this] { loop(); }) {}

FakeBackend::~FakeBackend() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    // Like AsyncEngine: whatever is pending finishes with "abort".
    for (auto& [id, cb] : callbacks_) engine_->abort_request(id);
  }
  cv_.notify_all();
  thread_.join();
}

std::string FakeBackend::submit(const GenerateRequest& request, Callback callback) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string id = engine_->add_request(request);
  callbacks_[id] = {std::move(callback), request.params.n};
  cv_.notify_all();
  return id;
}

void FakeBackend::abort(const std::string& request_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (callbacks_.count(request_id)) ++aborts_;
  engine_->abort_request(request_id);
}

EngineStats FakeBackend::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return engine_->stats();
}

int64_t FakeBackend::num_submitted() const {
  std::lock_guard<std::mutex> lock(mu_);
  return engine_->num_added();
}

int64_t FakeBackend::num_aborts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return aborts_;
}

void FakeBackend::loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || engine_->has_unfinished(); });
    if (stop_ && !engine_->has_unfinished()) return;
    std::vector<RequestOutput> outs = engine_->step();
    std::vector<std::pair<Callback, RequestOutput>> calls;
    for (RequestOutput& out : outs) {
      auto it = callbacks_.find(out.request_id);
      if (it == callbacks_.end()) continue;
      const bool last = out.finished && --it->second.second == 0;
      calls.emplace_back(last ? std::move(it->second.first) : it->second.first, std::move(out));
      if (last) callbacks_.erase(it);
    }
    lock.unlock();
    for (auto& [cb, out] : calls) cb(out);
    if (step_delay_ms_ > 0 && !stop_) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms_.load()));
    lock.lock();
  }
}

}  // namespace deepinfer::testing
