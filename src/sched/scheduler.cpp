#include "sched/scheduler.h"

#include <algorithm>

#include "common/check.h"

namespace deepinfer::sched {

Scheduler::Scheduler(const SchedulerConfig& cfg, BlockManager& blocks) : cfg_(cfg), blocks_(blocks) {
  for (int64_t s = cfg.max_num_seqs - 1; s >= 0; --s) free_slots_.push_back(s);
}

void Scheduler::add(Request* r) {
  DI_CHECK(r->state == RequestState::kWaiting);
  waiting_.push_back(r);
}

bool Scheduler::ensure_blocks(Request* r, int64_t end) {
  const int64_t need = (end + blocks_.block_size() - 1) / blocks_.block_size() - int64_t(r->blocks.size());
  if (need <= 0) return true;
  auto got = blocks_.allocate(need);
  if (!got) return false;
  r->blocks.insert(r->blocks.end(), got->begin(), got->end());
  return true;
}

void Scheduler::release(Request* r) {
  blocks_.release(r->blocks);
  r->blocks.clear();
  if (r->slot >= 0) free_slots_.push_back(r->slot);
  r->slot = -1;
}

void Scheduler::preempt(Request* r) {
  DI_CHECK(r->state == RequestState::kRunning);
  release(r);
  r->state = RequestState::kWaiting;
  r->num_computed = 0;
  running_.erase(std::find(running_.begin(), running_.end(), r));
  waiting_.push_front(r);  // first in line again
}

void Scheduler::finish(Request* r, const std::string& reason) {
  if (r->state == RequestState::kFinished) return;
  if (r->state == RequestState::kRunning) running_.erase(std::find(running_.begin(), running_.end(), r));
  if (r->state == RequestState::kWaiting) {
    auto it = std::find(waiting_.begin(), waiting_.end(), r);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  release(r);
  r->state = RequestState::kFinished;
  r->finish_reason = reason;
}

// Admits a waiting request: looks its known tokens up in the prefix cache, places
// the replay start, and schedules its first chunk. False if it does not fit now.
bool Scheduler::admit(Request* r, int64_t budget, StepPlan& plan, int64_t& used) {
  if (free_slots_.empty() || budget <= 0) return false;
  const int64_t known = r->num_known();
  const int64_t bs = blocks_.block_size();
  int64_t floor = 0, start = 0;
  std::vector<int64_t> matched;
  if (cfg_.enable_prefix_caching) {
    // At least the last known token is always computed (its logits are sampled).
    matched = blocks_.match_and_take(r->known_tokens(), (known - 1) / bs);
    floor = int64_t(matched.size()) * bs;
    start = (floor - cfg_.replay_tokens) / cfg_.position_align * cfg_.position_align;
    if (start <= 0) {  // no hit, or one within the replay range, which saves nothing
      blocks_.release(matched);
      matched.clear();
      floor = start = 0;
    }
    prefix_query_tokens_ += int64_t(r->prompt.size());
    prefix_hit_tokens_ += std::min<int64_t>(start, int64_t(r->prompt.size()));
  }
  r->blocks = matched;
  const int64_t count = std::min(known - start, budget);
  if (!ensure_blocks(r, start + count)) {
    blocks_.release(r->blocks);
    r->blocks.clear();
    return false;
  }
  r->slot = free_slots_.back();
  free_slots_.pop_back();
  r->state = RequestState::kRunning;
  r->replay_start = start;
  r->history_floor = floor;
  r->num_computed = start;
  r->cached_tokens = std::min<int64_t>(start, int64_t(r->prompt.size()));
  running_.push_back(r);
  plan.chunks.push_back({r, start, count, /*fresh=*/true, start + count == known});
  used += count;
  return true;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int64_t used = 0;
  const int64_t budget = cfg_.max_num_batched_tokens;
  // Running requests first, oldest first: decodes cost one token each, and a partial
  // prefill continues where it stopped.
  for (size_t i = 0; i < running_.size() && used < budget;) {
    Request* r = running_[i];
    const int64_t count = std::min(r->num_known() - r->num_computed, budget - used);
    DI_CHECK(count > 0, "running request ", r->id, " has nothing to compute");
    bool ok = ensure_blocks(r, r->num_computed + count);
    while (!ok && running_.back() != r) {
      Request* victim = running_.back();  // the most recently admitted gives way
      for (auto it = plan.chunks.begin(); it != plan.chunks.end(); ++it)
        if (it->request == victim) {
          used -= it->count;
          plan.chunks.erase(it);
          break;
        }
      preempt(victim);
      ok = ensure_blocks(r, r->num_computed + count);
    }
    if (!ok) {  // nothing left to preempt but r itself
      preempt(r);
      continue;
    }
    plan.chunks.push_back({r, r->num_computed, count, false, r->num_computed + count == r->num_known()});
    used += count;
    ++i;
  }
  while (!waiting_.empty() && used < budget) {
    Request* r = waiting_.front();
    if (!admit(r, budget - used, plan, used)) break;
    waiting_.pop_front();
  }
  return plan;
}

void Scheduler::complete(const StepPlan& plan) {
  const int64_t bs = blocks_.block_size();
  for (const ScheduledChunk& c : plan.chunks) {
    Request* r = c.request;
    if (r->state != RequestState::kRunning) continue;
    r->num_computed = c.start + c.count;
    // Blocks whose every position is computed are committed for reuse.
    const int64_t full = r->num_computed / bs;
    if (cfg_.enable_prefix_caching && full > 0) {
      const auto tokens = r->known_tokens();
      for (int64_t b = 0; b < full; ++b) blocks_.commit(r->blocks, b, tokens);
    }
  }
}

}  // namespace deepinfer::sched
