// Asynchronous scheduling changes when work is planned, never what is computed: on
// mixed workloads (chunked prefill, prefix hits, preemption, sampled and greedy rows,
// logprobs, stop strings, stop token ids, aborts, n > 1) every sample's tokens, logprob
// bits, text and finish reason are identical with async scheduling on and off.
#include <gtest/gtest.h>

#include <set>

#include "engine_test_util.h"

namespace deepinfer {
namespace {

using testing::Records;
using testing::tokens_for;

const std::string kModel = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_f32";

struct Workload {
  std::vector<GenerateRequest> reqs;
  std::map<std::string, int64_t> abort_after;  // request id -> tokens seen before aborting it
};

// `base`: the shortest stem; prefix hits need more than the replay cone (57 tokens on
// this model) plus a block.
Workload make_workload(int64_t vocab, int64_t base) {
  Workload w;
  for (int i = 0; i < 20; ++i) {
    GenerateRequest r;
    r.request_id = "w" + std::to_string(i);
    // Prompts from four stems, so later ones hit the prefix cache; lengths vary.
    r.prompt_ids = tokens_for(40 + i % 4, base + 5 * (i % 7), vocab);
    auto tail = tokens_for(900 + i, 1 + i % 5, vocab);
    r.prompt_ids.insert(r.prompt_ids.end(), tail.begin(), tail.end());
    r.params.max_tokens = 4 + (i * 5) % 13;
    if (i % 3 == 0) {
      r.params.temperature = 0;
    } else {
      r.params.temperature = 0.7f + 0.1f * float(i % 4);
      r.params.top_p = i % 2 ? 0.9f : 1.0f;
      r.params.top_k = i % 5 == 1 ? 20 : -1;
      if (i % 4 == 2) r.params.seed = 500 + i;
    }
    if (i % 4 == 1) r.params.presence_penalty = 0.5f;
    if (i % 6 == 5) r.params.repetition_penalty = 1.3f;
    if (i % 2 == 0) r.params.logprobs = i % 4;
    if (i % 7 == 3) r.params.n = 3;
    if (i % 9 == 4) w.abort_after[r.request_id] = 2 + i % 3;
    if (i == 18) w.abort_after[r.request_id] = 0;  // aborted before it runs
    w.reqs.push_back(r);
  }
  return w;
}

Records run(EngineOptions o, const Workload& w, bool async) {
  o.async_scheduling = async;
  auto e = Engine::create(o);
  for (const auto& r : w.reqs) e->add_request(r);
  std::set<std::string> aborted;
  auto maybe_abort = [&](Engine& eng, const std::string& id, int64_t seen) {
    auto it = w.abort_after.find(id);
    if (it != w.abort_after.end() && seen >= it->second && aborted.insert(id).second) eng.abort_request(id);
  };
  for (const auto& [id, after] : w.abort_after) maybe_abort(*e, id, 0);
  Records rec = testing::drive(*e, [&](Engine& eng, const RequestOutput& o, const Records& so_far) {
    maybe_abort(eng, o.request_id, int64_t(so_far.at({o.request_id, o.index}).tokens.size()));
  });
  const EngineStats st = e->stats();
  EXPECT_EQ(st.running + st.waiting + st.requests + st.slots_used + st.block_refs, 0);
  return rec;
}

// Adds stop strings and stop token ids taken from a first run's outputs, so they fire.
void add_stops(Workload& w, const Records& first) {
  for (size_t i = 0; i < w.reqs.size(); ++i) {
    GenerateRequest& r = w.reqs[i];
    const testing::SampleRecord& s = first.at({r.request_id, 0});
    if (i % 3 == 1 && s.text.size() >= 6) r.params.stop = {s.text.substr(s.text.size() / 2, 2)};
    if (i % 5 == 2 && s.tokens.size() >= 3) r.params.stop_token_ids = {s.tokens[s.tokens.size() / 2]};
  }
}

void expect_same(const Records& a, const Records& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [key, rec] : a) {
    SCOPED_TRACE(key.first + "/" + std::to_string(key.second));
    ASSERT_TRUE(b.count(key));
    const testing::SampleRecord& other = b.at(key);
    EXPECT_EQ(rec.tokens, other.tokens);
    EXPECT_EQ(rec.logprob_bits, other.logprob_bits);
    EXPECT_EQ(rec.text, other.text);
    EXPECT_EQ(rec.finish_reason, other.finish_reason);
    EXPECT_EQ(rec.outputs_after_finish, 0);
    EXPECT_EQ(other.outputs_after_finish, 0);
  }
}

void check(const EngineOptions& o, int64_t base) {
  auto probe = Engine::create(o);
  Workload w = make_workload(probe->vocab_size(), base);
  probe.reset();
  Workload plain = w;
  plain.abort_after.clear();
  add_stops(w, run(o, plain, /*async=*/false));
  const Records off = run(o, w, false), on = run(o, w, true);
  expect_same(off, on);
  std::map<std::string, int> reasons;
  for (const auto& [key, rec] : on) ++reasons[rec.finish_reason];
  // The workload exercises every way to end: length, stop (strings and ids), abort.
  EXPECT_GT(reasons["length"], 0);
  EXPECT_GT(reasons["stop"], 2);
  EXPECT_GE(reasons["abort"], 2);
}

TEST(AsyncScheduling, SameOutputsWithChunkedPrefillAndPrefixHits) {
  EngineOptions o;
  o.model_dir = kModel;
  o.block_size = 8;
  o.max_num_batched_tokens = 48;  // chunked prefill mixed with decode
  o.max_num_seqs = 16;
  check(o, 64);
}

TEST(AsyncScheduling, SameOutputsUnderPreemption) {
  EngineOptions o;
  o.model_dir = kModel;
  o.block_size = 8;
  o.cache_blocks = 14;  // 112 positions for 8 running requests of up to ~70 tokens: preemption
  o.max_num_seqs = 8;
  // Exact replay on prefix hits. (With --swa-replay, approximate by design, a hit that
  // lands in another step -- async commits blocks one step later -- can change outputs.)
  check(o, 20);
}

}  // namespace
}  // namespace deepinfer
