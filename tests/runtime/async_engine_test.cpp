// AsyncEngine's contract with its callers (the HTTP threads): submit and abort never
// wait for a running step, bad requests are refused synchronously, and every
// submitted request gets exactly one finished callback per sample.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <mutex>

#include "common/check.h"
#include "deepinfer/engine.h"

namespace deepinfer {
namespace {

// An engine whose step() can be held inside, so a test can call submit while a step runs.
// Each request emits one token per step and finishes after max_tokens tokens.
class GateEngine : public Engine {
 public:
  std::string add_request(const GenerateRequest& r) override {
    validate_request(r);
    const std::string id = r.request_id.empty() ? "gate-" + std::to_string(next_++) : r.request_id;
    DI_CHECK_INPUT(!left_.count(id), "duplicate id ", id);
    left_[id] = r.params.max_tokens;
    return id;
  }
  void validate_request(const GenerateRequest& r) const override {
    DI_CHECK_INPUT(!r.prompt_ids.empty(), "the prompt is empty");
    DI_CHECK_INPUT(r.params.max_tokens >= 1, "max_tokens must be positive");
  }
  void abort_request(const std::string& id) override { aborted_.push_back(id); }
  std::vector<RequestOutput> step() override {
    {
      std::unique_lock<std::mutex> lk(mu);
      ++steps_entered;
      cv.notify_all();
      cv.wait(lk, [&] { return open; });
    }
    std::vector<RequestOutput> outs;
    for (const std::string& id : aborted_) {
      if (!left_.erase(id)) continue;
      RequestOutput o;
      o.request_id = id;
      o.finished = true;
      o.finish_reason = "abort";
      outs.push_back(o);
    }
    aborted_.clear();
    for (auto it = left_.begin(); it != left_.end();) {
      RequestOutput o;
      o.request_id = it->first;
      o.new_token_ids = {7};
      o.finished = --it->second == 0;
      if (o.finished) o.finish_reason = "length";
      outs.push_back(o);
      it = o.finished ? left_.erase(it) : std::next(it);
    }
    return outs;
  }
  bool has_unfinished() const override { return !left_.empty(); }
  EngineStats stats() const override { return {}; }
  std::vector<int64_t> tokenize(const std::string&) const override { return {1}; }
  std::string detokenize(const std::vector<int64_t>&) const override { return ""; }
  int64_t vocab_size() const override { return 16; }
  int64_t max_model_len() const override { return 64; }
  int64_t eos_token_id() const override { return 0; }
  std::string model_name() const override { return "gate"; }

  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  int64_t steps_entered = 0;

 private:
  std::map<std::string, int64_t> left_;
  std::vector<std::string> aborted_;
  int64_t next_ = 0;
};

GenerateRequest request(int64_t max_tokens, std::string id = "") {
  GenerateRequest r;
  r.request_id = std::move(id);
  r.prompt_ids = {1, 2, 3};
  r.params.max_tokens = max_tokens;
  return r;
}

struct Finished {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::string, std::string> reason;  // request id -> finish reason
  std::map<std::string, int64_t> tokens;
  AsyncEngine::Callback callback() {
    return [this](const RequestOutput& o) {
      std::lock_guard<std::mutex> lk(mu);
      tokens[o.request_id] += int64_t(o.new_token_ids.size());
      if (o.finished) {
        EXPECT_FALSE(reason.count(o.request_id)) << "second finished callback for " << o.request_id;
        reason[o.request_id] = o.finish_reason;
        cv.notify_all();
      }
    };
  }
  bool wait_for(size_t n) {
    std::unique_lock<std::mutex> lk(mu);
    return cv.wait_for(lk, std::chrono::seconds(10), [&] { return reason.size() >= n; });
  }
};

TEST(AsyncEngine, SubmitDoesNotWaitForARunningStep) {
  auto owned = std::make_unique<GateEngine>();
  GateEngine* gate = owned.get();
  Finished fin;
  {
    AsyncEngine engine(std::move(owned));
    engine.submit(request(2, "first"), fin.callback());
    {
      std::unique_lock<std::mutex> lk(gate->mu);
      ASSERT_TRUE(gate->cv.wait_for(lk, std::chrono::seconds(10), [&] { return gate->steps_entered >= 1; }));
    }
    // The loop thread is now held inside step(). Submitting, refusing and aborting
    // must all return while it stays there.
    auto submitted = std::async(std::launch::async, [&] {
      std::string id = engine.submit(request(1), fin.callback());
      EXPECT_THROW(engine.submit(request(0), fin.callback()), InputError);    // invalid: refused at once
      EXPECT_THROW(engine.submit(request(3, "first"), fin.callback()), InputError);  // id in use
      engine.submit(request(5, "doomed"), fin.callback());
      engine.abort("doomed");
      return id;
    });
    ASSERT_EQ(submitted.wait_for(std::chrono::seconds(5)), std::future_status::ready)
        << "submit blocked behind a running step";
    const std::string second = submitted.get();
    {
      std::lock_guard<std::mutex> lk(gate->mu);
      gate->open = true;
    }
    gate->cv.notify_all();
    ASSERT_TRUE(fin.wait_for(3));
    std::lock_guard<std::mutex> lk(fin.mu);
    EXPECT_EQ(fin.reason["first"], "length");
    EXPECT_EQ(fin.tokens["first"], 2);
    EXPECT_EQ(fin.reason[second], "length");
    EXPECT_EQ(fin.tokens[second], 1);
    EXPECT_EQ(fin.reason["doomed"], "abort");
  }
}

TEST(AsyncEngine, PendingRequestsAbortOnShutdown) {
  auto owned = std::make_unique<GateEngine>();
  GateEngine* gate = owned.get();
  Finished fin;
  {
    AsyncEngine engine(std::move(owned));
    engine.submit(request(int64_t(1) << 40, "long"), fin.callback());  // never finishes by length
    {
      std::unique_lock<std::mutex> lk(gate->mu);
      ASSERT_TRUE(gate->cv.wait_for(lk, std::chrono::seconds(10), [&] { return gate->steps_entered >= 1; }));
    }
    engine.submit(request(1, "queued"), fin.callback());
    {
      std::lock_guard<std::mutex> lk(gate->mu);
      gate->open = true;
    }
    gate->cv.notify_all();
  }  // the destructor finishes whatever is left with "abort"
  std::lock_guard<std::mutex> lk(fin.mu);
  EXPECT_EQ(fin.reason["long"], "abort");
  ASSERT_TRUE(fin.reason.count("queued"));
}

}  // namespace
}  // namespace deepinfer
