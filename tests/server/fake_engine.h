// A scripted Engine for server tests, and a backend that runs it on a thread the
// way AsyncEngine does. Deterministic and instant (or slowed down on purpose).
//
// Vocabulary: 0 <bos>, 1 <eos>, 2 <pad>, 3 unused, then byte b is token b + 4.
// Generation: a prompt containing "[[say:TEXT]]" generates TEXT then <eos>
// ("stop"); otherwise letters: greedy (temperature 0) cycles a..z from a
// prompt-dependent start, sampled ones come from the seed, so equal seeds give
// equal text. A request with n > 1 runs n samples; sample i uses the seed
// derive_seed(seed, i), as the real engine does. Stop strings, stop_token_ids, max_tokens and logprobs follow the
// Engine contract; a prompt seen before reports all but its last token cached.
// A prompt containing "[[reject-second]]" makes add_request refuse sequence "...-1".
#pragma once

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "deepinfer/engine.h"
#include "server/backend.h"

namespace deepinfer::testing {

constexpr int64_t kFakeVocab = 260;
constexpr int64_t kFakeEos = 1;

class FakeEngine : public Engine {
 public:
  explicit FakeEngine(int64_t max_model_len = 256) : max_model_len_(max_model_len) {}

  std::string add_request(const GenerateRequest& request) override;
  void abort_request(const std::string& request_id) override;
  std::vector<RequestOutput> step() override;
  bool has_unfinished() const override { return !active_.empty(); }
  EngineStats stats() const override;

  std::vector<int64_t> tokenize(const std::string& text) const override;
  std::string detokenize(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return kFakeVocab; }
  int64_t max_model_len() const override { return max_model_len_; }
  int64_t eos_token_id() const override { return kFakeEos; }
  std::string model_name() const override { return "fake-model"; }

  int64_t num_added() const { return num_added_; }

 private:
  struct Active {
    GenerateRequest req;
    int64_t index = 0;      // sample
    uint64_t seed = 0;      // the sample's seed
    std::string script;  // from [[say:...]]; empty: letters
    bool scripted = false;
    std::string text;     // generated so far (before any stop)
    size_t emitted = 0;   // bytes of text already sent as deltas
    int64_t generated = 0;
    int64_t cached = 0;
    bool aborted = false;
  };
  int64_t next_token(const Active& a) const;
  RequestOutput advance(Active& a);

  const int64_t max_model_len_;
  std::map<std::pair<std::string, int64_t>, Active> active_;  // (id, sample); ordered: steps are deterministic
  std::set<std::vector<int64_t>> seen_prompts_;
  int64_t num_added_ = 0, prefix_queries_ = 0, prefix_hits_ = 0;
};

// Runs a FakeEngine's step loop on its own thread; step_delay slows each step.
class FakeBackend : public server::GenerationBackend {
 public:
  explicit FakeBackend(std::unique_ptr<FakeEngine> engine, std::chrono::milliseconds step_delay = {});
  ~FakeBackend() override;

  std::string submit(const GenerateRequest& request, Callback callback) override;
  void abort(const std::string& request_id) override;
  EngineStats stats() const override;
  const Engine& engine() const override { return *engine_; }

  int64_t num_submitted() const;
  int64_t num_aborts() const;  // abort() calls for ids still running
  void set_step_delay(std::chrono::milliseconds d) { step_delay_ms_ = d.count(); }

 private:
  void loop();

  std::unique_ptr<FakeEngine> engine_;
  std::atomic<int64_t> step_delay_ms_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::pair<Callback, int64_t>> callbacks_;  // callback, samples not finished
  std::atomic<bool> stop_{false};
  int64_t aborts_ = 0;
  std::thread thread_;
};

}  // namespace deepinfer::testing
