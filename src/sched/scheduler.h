// The scheduler: continuous batching under a per-step token budget, chunked prefill
// mixed with decode, admission by slot and block capacity, preemption by
// recomputation, and prefix-cache admission with replay (FEATURES.md §3, §11).
//
// It owns request bookkeeping and block accounting only; it never touches tensors.
// schedule() returns a StepPlan of plain data that the runner executes; after the
// runner has run a plan, complete() records what was computed.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "sched/block_manager.h"
#include "sched/request.h"

namespace deepinfer::sched {

struct SchedulerConfig {
  int64_t max_num_seqs = 64;
  int64_t max_num_batched_tokens = 2048;
  bool enable_prefix_caching = true;
  // Tokens recomputed before a prefix-cache hit point to rebuild the private state:
  // the full causal cone W + (L-1)(W-1) for an exact rebuild, or fewer (bounded replay).
  int64_t replay_tokens = 0;
  int64_t position_align = 2;  // replay starts on a multiple of every compress ratio
};

struct ScheduledChunk {
  Request* request = nullptr;
  int64_t start = 0;      // first position fed
  int64_t count = 0;      // tokens fed
  bool fresh = false;     // the slot must be reset (to replay_start / history_floor) first
  bool sample = false;    // the chunk ends at the last known token
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& cfg, BlockManager& blocks);

  void add(Request* r);  // WAITING, appended to the queue
  StepPlan schedule();
  // Records a run plan: advances num_computed and commits full blocks to the cache.
  void complete(const StepPlan& plan);
  // RUNNING or WAITING -> FINISHED: releases the slot and blocks.
  void finish(Request* r, const std::string& reason);

  int64_t num_running() const { return int64_t(running_.size()); }
  int64_t num_waiting() const { return int64_t(waiting_.size()); }
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }

 private:
  bool ensure_blocks(Request* r, int64_t end);
  bool admit(Request* r, int64_t budget, StepPlan& plan, int64_t& used);
  void preempt(Request* r);
  void release(Request* r);

  SchedulerConfig cfg_;
  BlockManager& blocks_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // admission order
  std::vector<int64_t> free_slots_;
  int64_t prefix_query_tokens_ = 0, prefix_hit_tokens_ = 0;
};

}  // namespace deepinfer::sched
