// The scheduler against a fake runner: plans are plain data, so they can be checked
// and "executed" without a model.
#include <gtest/gtest.h>

#include "sched/scheduler.h"

namespace deepinfer::sched {
namespace {

struct Harness {
  BlockManager blocks;
  Scheduler sched;
  std::vector<std::unique_ptr<Request>> reqs;
  Harness(int64_t num_blocks, int64_t block_size, SchedulerConfig cfg)
      : blocks(num_blocks, block_size, 3), sched(cfg, blocks) {}
  Request* add(int64_t prompt_len, int64_t max_tokens, int64_t first = 0) {
    auto r = std::make_unique<Request>();
    r->id = "r" + std::to_string(reqs.size());
    for (int64_t i = 0; i < prompt_len; ++i) r->prompt.push_back(first + i);
    r->params.max_tokens = max_tokens;
    sched.add(r.get());
    reqs.push_back(std::move(r));
    return reqs.back().get();
  }
  // Runs a step: every sampled chunk appends token 7; finished at max_tokens.
  StepPlan step() {
    StepPlan p = sched.schedule();
    sched.complete(p);
    for (auto& c : p.chunks) {
      if (!c.sample) continue;
      c.request->output.push_back(7);
      if (int64_t(c.request->output.size()) >= c.request->params.max_tokens) sched.finish(c.request, "length");
    }
    return p;
  }
};

TEST(Scheduler, ChunkedPrefillUnderTokenBudgetThenDecode) {
  SchedulerConfig cfg;
  cfg.max_num_batched_tokens = 8;
  cfg.enable_prefix_caching = false;
  Harness h(64, 4, cfg);
  Request* a = h.add(10, 2);
  Request* b = h.add(3, 2);
  auto p1 = h.step();
  ASSERT_EQ(p1.chunks.size(), 1u);  // a takes the whole budget
  EXPECT_EQ(p1.chunks[0].count, 8);
  EXPECT_FALSE(p1.chunks[0].sample);
  auto p2 = h.step();  // a finishes its prompt (2) and b is admitted (3), mixed batch
  ASSERT_EQ(p2.chunks.size(), 2u);
  EXPECT_EQ(p2.chunks[0].request, a);
  EXPECT_EQ(p2.chunks[0].count, 2);
  EXPECT_TRUE(p2.chunks[0].sample);
  EXPECT_EQ(p2.chunks[1].request, b);
  EXPECT_TRUE(p2.chunks[1].fresh);
  auto p3 = h.step();  // both decode one token and finish
  EXPECT_EQ(p3.chunks.size(), 2u);
  EXPECT_EQ(a->state, RequestState::kFinished);
  EXPECT_EQ(b->state, RequestState::kFinished);
  EXPECT_EQ(h.blocks.num_used(), 0);
}

TEST(Scheduler, SlotsBoundConcurrency) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 2;
  cfg.enable_prefix_caching = false;
  Harness h(64, 4, cfg);
  for (int i = 0; i < 5; ++i) h.add(3, 3);
  auto p = h.step();
  EXPECT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(h.sched.num_waiting(), 3);
  for (int i = 0; i < 20 && (h.sched.num_running() + h.sched.num_waiting()) > 0; ++i) h.step();
  for (auto& r : h.reqs) EXPECT_EQ(r->state, RequestState::kFinished);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  SchedulerConfig cfg;
  cfg.enable_prefix_caching = false;
  Harness h(5, 4, cfg);  // 20 token positions in total
  Request* a = h.add(6, 8);
  Request* b = h.add(6, 8);
  h.step();  // both admitted: 2 + 2 blocks
  int preempted = 0;
  for (int i = 0; i < 60 && (h.sched.num_running() + h.sched.num_waiting()) > 0; ++i) {
    auto p = h.step();
    for (auto& c : p.chunks)
      if (c.fresh && c.request == b && c.start == 0 && b->output.size() > 0) ++preempted;
  }
  EXPECT_EQ(a->state, RequestState::kFinished);
  EXPECT_EQ(b->state, RequestState::kFinished);
  EXPECT_EQ(a->output.size(), 8u);
  EXPECT_EQ(b->output.size(), 8u);
  EXPECT_GE(preempted, 1);
  EXPECT_EQ(h.blocks.num_used(), 0);
}

TEST(Scheduler, PrefixHitReplaysBeforeTheHitPoint) {
  SchedulerConfig cfg;
  cfg.replay_tokens = 6;
  Harness h(64, 4, cfg);
  Request* a = h.add(20, 1);
  while (a->state != RequestState::kFinished) h.step();
  Request* b = h.add(23, 1);  // shares a's first 20 tokens: 5 full blocks
  auto p = h.step();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(b->history_floor, 20);
  EXPECT_EQ(b->replay_start, 14);  // 20 - 6, aligned to 2
  EXPECT_EQ(p.chunks[0].start, 14);
  EXPECT_EQ(b->cached_tokens, 14);
  // A miss never starts before position 0, whatever the replay length.
  Request* c = h.add(3, 1, 500);
  auto pc = h.step();
  for (auto& ch : pc.chunks)
    if (ch.request == c) EXPECT_EQ(ch.start, 0);
  EXPECT_EQ(c->cached_tokens, 0);
}

}  // namespace
}  // namespace deepinfer::sched
