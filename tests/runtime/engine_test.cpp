// The engine on the golden fixtures: greedy generation equals the single-sequence
// oracle, concurrency and preemption do not change any request's tokens, and prefix
// caching reuses history exactly.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "deepinfer/engine.h"
#include "model/v41/model.h"
#include "engine_test_util.h"

namespace deepinfer {
namespace {

const std::string kModel = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_f32";

using testing::tokens_for;

// Runs requests to completion; returns the generated ids per request id.
std::map<std::string, std::vector<int64_t>> run_all(Engine& e, const std::vector<GenerateRequest>& reqs,
                                                    std::map<std::string, int64_t>* cached = nullptr) {
  for (const auto& r : reqs) e.add_request(r);
  std::map<std::string, std::vector<int64_t>> out;
  while (e.has_unfinished())
    for (const auto& o : e.step()) {
      auto& v = out[o.request_id];
      v.insert(v.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished && cached) (*cached)[o.request_id] = o.cached_tokens;
    }
  return out;
}

GenerateRequest greedy(const std::string& id, std::vector<int64_t> prompt, int64_t max_tokens) {
  GenerateRequest r;
  r.request_id = id;
  r.prompt_ids = std::move(prompt);
  r.params.temperature = 0;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

TEST(Engine, GreedyMatchesTheOracle) {
  auto model = v41::Model::load(kModel);
  const int64_t vocab = model->config().vocab_size;
  auto prompt = tokens_for(1, 12, vocab);
  // Oracle: single sequence, argmax, token by token.
  auto seq = model->new_sequence();
  std::vector<int64_t> expect;
  auto logits = model->forward(seq, prompt);
  for (int i = 0; i < 10; ++i) {
    const float* last = logits.data() + (logits.size() / vocab - 1) * vocab;
    int64_t best = int64_t(std::max_element(last, last + vocab) - last);
    expect.push_back(best);
    logits = model->forward(seq, {best});
  }
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  auto got = run_all(*e, {greedy("a", prompt, 10)});
  EXPECT_EQ(got["a"], expect);
}

// The reference's own token-by-token greedy continuation (tools/make_greedy_reference.py,
// transformers on the same checkpoint), for both fixtures, through the full engine.
TEST(Engine, GreedyMatchesTheReferenceContinuation) {
  for (const char* name : {"v41_tiny_f32", "v41_tiny_quant"}) {
    SCOPED_TRACE(name);
    const std::string dir = std::string(DEEPINFER_FIXTURES) + "/" + name;
    std::ifstream f(dir + "/greedy.json");
    ASSERT_TRUE(f.good());
    nlohmann::json g = nlohmann::json::parse(f);
    ASSERT_GT(g["min_margin"].get<double>(), 1e-3) << "near-tie in the reference: regenerate with another prompt";
    EngineOptions o;
    o.model_dir = dir;
    auto e = Engine::create(o);
    auto expect = g["greedy"].get<std::vector<int64_t>>();
    auto got = run_all(*e, {greedy("g", g["prompt"].get<std::vector<int64_t>>(), int64_t(expect.size()))});
    EXPECT_EQ(got["g"], expect);
  }
}

TEST(Engine, ConcurrentRequestsMatchRunningAlone) {
  EngineOptions o;
  o.model_dir = kModel;
  o.max_num_batched_tokens = 40;  // forces chunked prefill mixed with decode
  auto e = Engine::create(o);
  const int64_t vocab = e->vocab_size();
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 64; ++i) {
    GenerateRequest r = greedy("r" + std::to_string(i), tokens_for(100 + i, 3 + (i * 7) % 45, vocab), 3 + i % 5);
    if (i % 3 == 1) {  // sampled requests, seeded
      r.params.temperature = 0.8f;
      r.params.top_p = 0.9f;
      r.params.seed = 1000 + i;
    }
    reqs.push_back(r);
  }
  auto together = run_all(*e, reqs);
  for (int i = 0; i < 64; i += 9) {  // a sample of them alone (keeps the test fast)
    auto alone = Engine::create(o);
    auto one = run_all(*alone, {reqs[i]});
    EXPECT_EQ(one[reqs[i].request_id], together[reqs[i].request_id]) << i;
  }
  for (const auto& r : reqs) EXPECT_EQ(int64_t(together[r.request_id].size()), r.params.max_tokens);
}

TEST(Engine, PreemptionDoesNotChangeOutputs) {
  EngineOptions small, big;
  small.model_dir = big.model_dir = kModel;
  small.block_size = big.block_size = 8;
  small.cache_blocks = 12;  // 96 positions for 6 requests of ~40 tokens: preemption
  small.enable_prefix_caching = big.enable_prefix_caching = false;
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(greedy("p" + std::to_string(i), tokens_for(7 + i, 30, 384), 8));
  auto a = Engine::create(small), b = Engine::create(big);
  EXPECT_EQ(run_all(*a, reqs), run_all(*b, reqs));
}

TEST(Engine, PrefixCacheReusesHistoryExactly) {
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  const int64_t vocab = e->vocab_size();
  auto shared = tokens_for(5, 1000, vocab);
  auto p1 = shared, p2 = shared;
  p1.push_back(11);
  p2.push_back(12);
  std::map<std::string, int64_t> cached;
  auto first = run_all(*e, {greedy("one", p1, 4)}, &cached);
  auto second = run_all(*e, {greedy("two", p2, 4)}, &cached);
  EXPECT_EQ(cached["one"], 0);
  EXPECT_GE(cached["two"], 900) << "cached tokens of a 1001-token prompt sharing 1000";
  // Exact mode: the same output as a cold engine.
  auto cold = Engine::create(o);
  EXPECT_EQ(run_all(*cold, {greedy("two", p2, 4)})["two"], second["two"]);
}

// Streamed text deltas add up to the decoded output, and a stop string cuts the text
// before its first occurrence with finish_reason "stop".
TEST(Engine, TextDeltasAndStopStrings) {
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  auto run = [&](const GenerateRequest& r, std::string* reason) {
    e->add_request(r);
    std::string text;
    while (e->has_unfinished())
      for (const auto& out : e->step()) {
        text += out.text_delta;
        if (out.finished) *reason = out.finish_reason;
      }
    return text;
  };
  auto req = greedy("t", tokens_for(3, 10, e->vocab_size()), 24);
  std::string reason;
  const std::string full = run(req, &reason);
  EXPECT_EQ(reason, "length");
  ASSERT_GE(full.size(), 12u);
  // A stop string taken from the middle of the output (it may also occur earlier).
  const std::string stop = full.substr(full.size() / 2, 2);
  req.request_id = "t2";
  req.params.stop = {stop};
  const std::string cut = run(req, &reason);
  EXPECT_EQ(reason, "stop");
  EXPECT_EQ(cut, full.substr(0, full.find(stop)));
}

// Many requests through a small pool: shared prefixes hit, eviction recycles blocks,
// everything completes, and the pool never grows (it is allocated once, up front).
TEST(Engine, ManyRequestsStayWithinTheCachePool) {
  EngineOptions o;
  o.model_dir = kModel;
  o.block_size = 8;
  o.cache_blocks = 160;  // room for 8 running requests plus the 8 stems' cached prefixes
  o.max_num_seqs = 8;
  auto e = Engine::create(o);
  std::vector<GenerateRequest> reqs;
  for (int i = 0; i < 150; ++i) {
    // Prompts drawn from 8 stems so that prefixes repeat; longer than the replay cone.
    auto p = tokens_for(i % 8, 96 + (i % 5) * 4, e->vocab_size());
    p.push_back(3 + i % 50);
    reqs.push_back(greedy("m" + std::to_string(i), p, 2));
  }
  std::map<std::string, int64_t> cached;
  auto out = run_all(*e, reqs, &cached);
  EXPECT_EQ(out.size(), reqs.size());
  int64_t hits = 0;
  for (auto& [id, c] : cached) hits += c > 0;
  EXPECT_GT(hits, 100);
  const EngineStats st = e->stats();
  EXPECT_EQ(st.running + st.waiting, 0);
  EXPECT_EQ(st.cache_blocks_total, 160);
  EXPECT_LE(st.cache_blocks_used, 160);
}

TEST(Engine, RejectsBadRequests) {
  EngineOptions o;
  o.model_dir = kModel;
  auto e = Engine::create(o);
  EXPECT_THROW(e->add_request(greedy("x", {}, 4)), InputError);
  EXPECT_THROW(e->add_request(greedy("x", {1, 100000}, 4)), InputError);
  EXPECT_THROW(e->add_request(greedy("x", {1, 2}, 100000)), InputError);
  auto bad = greedy("y", {1, 2}, 4);
  bad.params.top_p = 2;
  EXPECT_THROW(e->add_request(bad), InputError);
  e->add_request(greedy("z", {1, 2}, 4));
  EXPECT_THROW(e->add_request(greedy("z", {1, 2}, 4)), InputError);
  e->abort_request("z");
  auto outs = e->step();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].finish_reason, "abort");
  EXPECT_FALSE(e->has_unfinished());
}

}  // namespace
}  // namespace deepinfer
