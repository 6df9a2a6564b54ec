// The scheduler: continuous batching under a per-step token budget, chunked prefill
// mixed with decode, admission by slot and block capacity, preemption by
// recomputation, and prefix-cache admission with replay (FEATURES.md §3, §11).
//
// It owns request bookkeeping and block accounting only; it never touches tensors.
// schedule() returns a StepPlan and advances every planned request as if the plan had
// run (num_computed, num_inflight), so the next plan can be made before this one has
// run (asynchronous scheduling); after the runner has run a plan, complete() commits
// the blocks it filled to the prefix cache.
#pragma once

#include <cstdint>
#include <deque>
#include <utility>
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
  int64_t max_model_len = INT64_MAX;  // a request with this many tokens is finished
};

// A sample forked from its leader's chunk: it draws its first token from the leader's
// logits row; with slot >= 0 it continues from a copy of the leader's state (slot copy,
// full blocks shared, the partial last block copied); with slot < 0 there was no room
// and it waits to be recomputed like a preempted request.
struct ScheduledFork {
  Request* request = nullptr;
  int64_t slot = -1;
  std::vector<std::pair<int64_t, int64_t>> block_copies;  // (from, to): the partial last block
};

struct ScheduledChunk {
  Request* request = nullptr;
  int64_t start = 0;      // first position fed
  int64_t count = 0;      // tokens fed
  bool fresh = false;     // the slot must be reset (to replay_start / history_floor) first
  bool sample = false;    // the chunk ends at the last position: sample the next token
  int64_t epoch = 0;      // the request's admission this chunk belongs to
  std::vector<ScheduledFork> forks;  // samples 1..n-1 that start from this chunk's state
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  Scheduler(const SchedulerConfig& cfg, BlockManager& blocks);

  void add(Request* r);  // WAITING, appended to the queue; r->forks wait for its prompt
  // Plans the next step from the current (possibly predicted) state and advances the
  // planned requests: num_computed to the chunk end, num_inflight + 1 per sample.
  StepPlan schedule();
  // After the runner has run `plan`: commits the blocks it completed to the prefix
  // cache (token ids up to each chunk end must be known by now).
  void complete(const StepPlan& plan);
  // A token sampled by a planned step is now known (appended to r->output by the caller).
  void token_arrived(Request* r);
  // RUNNING or WAITING -> FINISHED: releases the slot and blocks.
  void finish(Request* r, const std::string& reason);

  int64_t num_running() const { return int64_t(running_.size()); }
  int64_t num_waiting() const { return int64_t(waiting_.size()); }
  int64_t num_slots_used() const { return cfg_.max_num_seqs - int64_t(free_slots_.size()); }
  // Sum of the block-table lengths of running requests: equals BlockManager::total_refs().
  int64_t table_blocks() const;
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }

 private:
  bool ensure_blocks(Request* r, int64_t end);
  bool admit(Request* r, int64_t budget, StepPlan& plan, int64_t& used);
  void preempt(Request* r);
  void release(Request* r);
  void fork(ScheduledChunk& c, std::vector<Request*>& queued);

  SchedulerConfig cfg_;
  BlockManager& blocks_;
  std::deque<Request*> waiting_;
  std::vector<Request*> running_;  // admission order
  std::vector<int64_t> free_slots_;
  int64_t prefix_query_tokens_ = 0, prefix_hit_tokens_ = 0;
};

}  // namespace deepinfer::sched
