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
  // The results of a plan: every sampled chunk (and fork) appends token 7; finished
  // at max_tokens.
  void results(StepPlan& p) {
    sched.complete(p);
    auto arrive = [&](Request* r) {
      if (r->state == RequestState::kFinished) return;
      sched.token_arrived(r);
      r->output.push_back(7);
      if (int64_t(r->output.size()) >= r->params.max_tokens) sched.finish(r, "length");
    };
    for (auto& c : p.chunks) {
      if (!c.sample) continue;
      arrive(c.request);
      for (auto& f : c.forks) arrive(f.request);
    }
  }
  // Runs a step: plan, then its results.
  StepPlan step() {
    StepPlan p = sched.schedule();
    results(p);
    EXPECT_EQ(sched.table_blocks(), blocks.total_refs());
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
  for (auto& ch : pc.chunks) {
    if (ch.request == c) {
      EXPECT_EQ(ch.start, 0);
    }
  }
  EXPECT_EQ(c->cached_tokens, 0);
}

// Asynchronous scheduling: the next plan is made before the current one's tokens are
// known. A decode advances by the token in flight; a request the tokens in flight
// finish is not planned again; admission waits for a preempted request's token.
TEST(Scheduler, PlansAheadOfResults) {
  SchedulerConfig cfg;
  cfg.enable_prefix_caching = false;
  Harness h(64, 4, cfg);
  Request* a = h.add(5, 3);
  StepPlan p1 = h.sched.schedule();  // prefill, samples token 5
  ASSERT_EQ(p1.chunks.size(), 1u);
  EXPECT_TRUE(p1.chunks[0].sample);
  EXPECT_EQ(a->num_inflight, 1);
  StepPlan p2 = h.sched.schedule();  // planned before p1's token is known
  ASSERT_EQ(p2.chunks.size(), 1u);
  EXPECT_EQ(p2.chunks[0].start, 5);
  EXPECT_EQ(p2.chunks[0].count, 1);
  EXPECT_TRUE(p2.chunks[0].sample);
  EXPECT_EQ(a->num_inflight, 2);
  h.results(p1);
  EXPECT_EQ(a->num_inflight, 1);
  StepPlan p3 = h.sched.schedule();  // output 1 + 2 in flight = max_tokens 3
  EXPECT_EQ(p3.chunks.size(), 1u);
  StepPlan p4 = h.sched.schedule();  // the tokens in flight finish it: nothing to plan
  EXPECT_TRUE(p4.empty());
  h.results(p2);
  h.results(p3);
  EXPECT_EQ(a->state, RequestState::kFinished);
  EXPECT_EQ(a->output.size(), 3u);
  EXPECT_EQ(h.blocks.total_refs(), 0);
}

// n samples: the leader's prompt chunk forks the others: a slot each, full blocks
// shared by reference, the partial last block copied; without a free slot a sample is
// queued for recomputation instead, after its first token (drawn from the leader's row).
TEST(Scheduler, ForksShareFullBlocksAndCopyThePartialOne) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 3;
  cfg.enable_prefix_caching = false;
  Harness h(64, 4, cfg);
  std::vector<std::unique_ptr<Request>> samples;
  Request* lead = h.add(10, 2);  // 2 full blocks + 2 positions in a third
  for (int i = 1; i < 4; ++i) {
    samples.push_back(std::make_unique<Request>(*lead));
    samples.back()->index = i;
    samples.back()->forks.clear();
    lead->forks.push_back(samples.back().get());
  }
  StepPlan p = h.sched.schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  const ScheduledChunk& c = p.chunks[0];
  ASSERT_EQ(c.forks.size(), 3u);
  EXPECT_GE(c.forks[0].slot, 0);
  EXPECT_GE(c.forks[1].slot, 0);
  EXPECT_LT(c.forks[2].slot, 0);  // 3 slots: the last sample has none
  for (int i = 0; i < 2; ++i) {
    Request* f = c.forks[i].request;
    EXPECT_EQ(f->state, RequestState::kRunning);
    EXPECT_EQ(f->num_computed, 10);
    ASSERT_EQ(f->blocks.size(), 3u);
    EXPECT_EQ(f->blocks[0], lead->blocks[0]);
    EXPECT_EQ(f->blocks[1], lead->blocks[1]);
    EXPECT_NE(f->blocks[2], lead->blocks[2]);
    ASSERT_EQ(c.forks[i].block_copies.size(), 1u);
    EXPECT_EQ(c.forks[i].block_copies[0], std::make_pair(lead->blocks[2], f->blocks[2]));
  }
  EXPECT_EQ(h.blocks.refcount(lead->blocks[0]), 3);
  EXPECT_EQ(h.blocks.refcount(lead->blocks[2]), 1);
  Request* queued = c.forks[2].request;
  EXPECT_EQ(queued->state, RequestState::kWaiting);
  EXPECT_EQ(queued->num_inflight, 1);
  EXPECT_EQ(h.sched.num_waiting(), 1);
  EXPECT_EQ(h.sched.table_blocks(), h.blocks.total_refs());
  // Not admitted before its first token is known.
  StepPlan ahead = h.sched.schedule();
  for (const auto& ch : ahead.chunks) EXPECT_NE(ch.request, queued);
  h.results(p);
  h.results(ahead);
  for (int i = 0; i < 20 && (h.sched.num_running() + h.sched.num_waiting()) > 0; ++i) h.step();
  EXPECT_EQ(lead->state, RequestState::kFinished);
  for (auto& s : samples) {
    EXPECT_EQ(s->state, RequestState::kFinished);
    EXPECT_EQ(s->output.size(), 2u);
  }
  EXPECT_EQ(h.blocks.total_refs(), 0);
  EXPECT_EQ(h.blocks.num_used(), 0);
}

}  // namespace
}  // namespace deepinfer::sched
