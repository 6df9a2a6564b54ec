// n parallel samples of one prompt inside the engine. The definition: sample i of a
// request with seed s equals a request with n = 1 and seed derive_seed(s, i) (sample 0:
// s itself), token for token and logprob bit for bit; the prompt is computed once (the
// others copy the leader's state); an abort ends every sample.
#include <gtest/gtest.h>

#include <set>

#include "common/check.h"
#include "engine_test_util.h"
#include "sample/philox.h"

namespace deepinfer {
namespace {

using testing::Records;
using testing::tokens_for;

const std::string kModel = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_f32";

EngineOptions options(bool async) {
  EngineOptions o;
  o.model_dir = kModel;
  o.block_size = 8;
  o.enable_prefix_caching = false;  // so that forward tokens count the prompt exactly
  o.async_scheduling = async;
  return o;
}

GenerateRequest sampled(std::vector<int64_t> prompt, int64_t n, uint64_t seed) {
  GenerateRequest r;
  r.request_id = "p";
  r.prompt_ids = std::move(prompt);
  r.params.temperature = 1.0f;
  r.params.top_k = 50;
  r.params.max_tokens = 6;
  r.params.ignore_eos = true;
  r.params.logprobs = 2;
  r.params.presence_penalty = 0.3f;  // reads each sample's own output
  r.params.n = n;
  r.params.seed = seed;
  return r;
}

// Sample i alone: n = 1 with the derived seed.
testing::SampleRecord alone(const EngineOptions& o, GenerateRequest r, int64_t i) {
  r.params.seed = sampling::derive_seed(*r.params.seed, uint64_t(i));
  r.params.n = 1;
  auto e = Engine::create(o);
  e->add_request(r);
  return testing::drive(*e).at({"p", 0});
}

TEST(ParallelSamples, EqualSeparateRequestsAndComputeThePromptOnce) {
  for (bool async : {false, true}) {
    // 30 tokens end inside a block (the fork copies it), 32 on a block boundary.
    for (size_t len : {30u, 32u}) {
      SCOPED_TRACE(std::string(async ? "async " : "sync ") + std::to_string(len));
      const EngineOptions o = options(async);
      auto e = Engine::create(o);
      const GenerateRequest r = sampled(tokens_for(3, len, e->vocab_size()), 4, 77);
      e->add_request(r);
      const Records rec = testing::drive(*e);
      ASSERT_EQ(rec.size(), 4u);
      std::set<std::vector<int64_t>> distinct;
      for (int64_t i = 0; i < 4; ++i) {
        const testing::SampleRecord& s = rec.at({"p", i});
        EXPECT_EQ(s.finish_reason, "length");
        ASSERT_EQ(s.tokens.size(), 6u);
        EXPECT_TRUE(s == alone(o, r, i)) << "sample " << i;
        distinct.insert(s.tokens);
      }
      EXPECT_GT(distinct.size(), 1u) << "samples of one request should differ";
      // The prompt once, then each sample's tokens but its last.
      const EngineStats st = e->stats();
      EXPECT_EQ(st.forward_tokens, int64_t(len) + 4 * 5);
      EXPECT_EQ(st.slots_used + st.block_refs + st.requests, 0);
    }
  }
}

// More samples than slots: the samples without a slot are recomputed after their first
// token, with the same result; preemption in a small pool does not change them either.
TEST(ParallelSamples, WithoutRoomTheyAreRecomputedIdentically) {
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    EngineOptions o = options(async);
    o.max_num_seqs = 2;
    o.cache_blocks = 12;
    auto e = Engine::create(o);
    const GenerateRequest r = sampled(tokens_for(9, 37, e->vocab_size()), 5, 123);
    e->add_request(r);
    const Records rec = testing::drive(*e);
    ASSERT_EQ(rec.size(), 5u);
    for (int64_t i = 0; i < 5; ++i) EXPECT_TRUE(rec.at({"p", i}) == alone(options(async), r, i)) << "sample " << i;
    EXPECT_GT(e->stats().forward_tokens, 37 + 5 * 5);  // some prompts were recomputed
  }
}

TEST(ParallelSamples, AbortEndsEverySample) {
  for (bool async : {false, true}) {
    SCOPED_TRACE(async ? "async" : "sync");
    auto e = Engine::create(options(async));
    GenerateRequest r = sampled(tokens_for(4, 20, e->vocab_size()), 3, 5);
    r.params.max_tokens = 50;
    e->add_request(r);
    r.request_id = "p3";  // aborted once one of its samples has 3 tokens
    e->add_request(r);
    const Records rec = testing::drive(*e, [&](Engine& eng, const RequestOutput& o, const Records& so_far) {
      if (o.request_id == "p3" && so_far.at({"p3", o.index}).tokens.size() >= 3) eng.abort_request("p3");
    });
    e->abort_request("p3");  // already finished: ignored
    EXPECT_FALSE(e->has_unfinished());
    for (int64_t i = 0; i < 3; ++i) {
      EXPECT_EQ(rec.at({"p3", i}).finish_reason, "abort");
      EXPECT_EQ(rec.at({"p", i}).finish_reason, "length");
    }
    const EngineStats st = e->stats();
    EXPECT_EQ(st.running + st.waiting + st.slots_used + st.block_refs + st.requests, 0);
  }
}

TEST(ParallelSamples, AbortBeforeThePromptEndsEverySample) {
  auto e = Engine::create(options(true));
  GenerateRequest r = sampled(tokens_for(4, 20, e->vocab_size()), 3, 5);
  e->add_request(r);
  e->abort_request("p");
  const Records rec = testing::drive(*e);
  ASSERT_EQ(rec.size(), 3u);
  for (int64_t i = 0; i < 3; ++i) {
    EXPECT_EQ(rec.at({"p", i}).finish_reason, "abort");
    EXPECT_TRUE(rec.at({"p", i}).tokens.empty());
  }
  EXPECT_EQ(e->stats().forward_tokens, 0);
}

TEST(ParallelSamples, RejectsBadN) {
  auto e = Engine::create(options(false));
  GenerateRequest r = sampled({5, 6, 7}, 0, 1);
  EXPECT_THROW(e->add_request(r), InputError);
  r.params.n = 129;
  EXPECT_THROW(e->add_request(r), InputError);
  r.params.n = 128;
  EXPECT_NO_THROW(e->add_request(r));
}

}  // namespace
}  // namespace deepinfer
