#include "sched/scheduler.h"

#include <algorithm>
#include <optional>

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
  // Tokens already in flight still arrive (they were sampled from a correct state)
  // and are recomputed with the rest after readmission.
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
  r->forks.clear();  // an unforked sample only ends with its leader (abort finishes all)
  r->state = RequestState::kFinished;
  r->finish_reason = reason;
}

// Admits a waiting request: looks its known tokens up in the prefix cache, places
// the replay start, and schedules its first chunk. False if it does not fit now.
bool Scheduler::admit(Request* r, int64_t budget, StepPlan& plan, int64_t& used) {
  // A request whose sampled token is still in flight (preempted, or a fork without room)
  // waits for it: the prefix lookup and the replay need every token id.
  if (free_slots_.empty() || budget <= 0 || r->num_inflight > 0) return false;
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
  r->cached_tokens = std::min<int64_t>(start, int64_t(r->prompt.size()));
  ++r->epoch;
  running_.push_back(r);
  const bool sample = start + count == known;
  plan.chunks.push_back({r, start, count, /*fresh=*/true, sample, r->epoch, {}});
  r->num_computed = start + count;
  r->num_inflight += sample;
  used += count;
  return true;
}

// Sets up the samples waiting for the leader of chunk c, whose prompt the chunk
// completes. Each draws its first token from the leader's logits row in this step; one
// that gets a slot (and a block for the partial last block) continues from a copy of
// the leader's state, so the prompt is computed once. One that does not is queued for
// recomputation, like a preempted request: the same tokens, only slower.
void Scheduler::fork(ScheduledChunk& c, std::vector<Request*>& queued) {
  Request* lead = c.request;
  const int64_t len = c.start + c.count, bs = blocks_.block_size();
  const int64_t full = len / bs;
  const bool partial = len % bs != 0;
  DI_CHECK(lead->output.empty() && int64_t(lead->blocks.size()) == full + partial);
  for (Request* f : lead->forks) {
    if (f->state == RequestState::kFinished) continue;  // aborted before its prompt was done
    DI_CHECK(f->state == RequestState::kWaiting && f->num_inflight == 0 && f->prompt == lead->prompt);
    ScheduledFork sf;
    sf.request = f;
    f->num_inflight = 1;  // its first token comes from the leader's row in this step
    std::optional<std::vector<int64_t>> tail;
    if (!free_slots_.empty()) tail = partial ? blocks_.allocate(1) : std::vector<int64_t>{};
    if (tail) {
      f->blocks.assign(lead->blocks.begin(), lead->blocks.begin() + full);
      blocks_.share(f->blocks);  // full blocks are never written again: shared by reference
      if (partial) {
        f->blocks.push_back(tail->front());
        sf.block_copies.emplace_back(lead->blocks[full], tail->front());
      }
      f->slot = sf.slot = free_slots_.back();
      free_slots_.pop_back();
      f->state = RequestState::kRunning;
      f->replay_start = lead->replay_start;
      f->history_floor = lead->history_floor;
      f->cached_tokens = lead->cached_tokens;
      f->num_computed = len;
      ++f->epoch;
      running_.push_back(f);
    } else {
      queued.push_back(f);
    }
    c.forks.push_back(std::move(sf));
  }
  lead->forks.clear();
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int64_t used = 0;
  const int64_t budget = cfg_.max_num_batched_tokens;
  // Running requests first, oldest first: decodes cost one token each, and a partial
  // prefill continues where it stopped.
  for (size_t i = 0; i < running_.size() && used < budget;) {
    Request* r = running_[i];
    // Planned ahead of its results: the tokens in flight will finish it anyway.
    if (r->surely_finished(cfg_.max_model_len)) {
      ++i;
      continue;
    }
    const int64_t count = std::min(r->num_tokens() - r->num_computed, budget - used);
    DI_CHECK(count > 0, "running request ", r->id, " has nothing to compute");
    bool ok = ensure_blocks(r, r->num_computed + count);
    while (!ok && running_.back() != r) {
      Request* victim = running_.back();  // the most recently admitted gives way
      for (auto it = plan.chunks.begin(); it != plan.chunks.end(); ++it)
        if (it->request == victim) {
          used -= it->count;
          victim->num_inflight -= it->sample;  // the removed chunk samples nothing
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
    const bool sample = r->num_computed + count == r->num_tokens();
    plan.chunks.push_back({r, r->num_computed, count, false, sample, r->epoch, {}});
    r->num_computed += count;
    r->num_inflight += sample;
    used += count;
    ++i;
  }
  while (!waiting_.empty() && used < budget) {
    Request* r = waiting_.front();
    if (!admit(r, budget - used, plan, used)) break;
    waiting_.pop_front();
  }
  // Forks last, once no chunk can be removed any more: a leader whose chunk completes
  // its prompt hands its state to its other samples.
  std::vector<Request*> queued;
  for (ScheduledChunk& c : plan.chunks)
    if (c.sample && !c.request->forks.empty()) fork(c, queued);
  for (auto it = queued.rbegin(); it != queued.rend(); ++it) waiting_.push_front(*it);
  return plan;
}

void Scheduler::token_arrived(Request* r) {
  DI_CHECK(r->num_inflight > 0, "a token arrived for ", r->id, " that no plan sampled");
  --r->num_inflight;
}

int64_t Scheduler::table_blocks() const {
  int64_t n = 0;
  for (const Request* r : running_) n += int64_t(r->blocks.size());
  return n;
}

void Scheduler::complete(const StepPlan& plan) {
  const int64_t bs = blocks_.block_size();
  for (const ScheduledChunk& c : plan.chunks) {
    Request* r = c.request;
    // Preempted (and perhaps readmitted with other blocks) since the plan was made.
    if (r->state != RequestState::kRunning || r->epoch != c.epoch) continue;
    // Blocks whose every position is computed are committed for reuse.
    const int64_t full = (c.start + c.count) / bs;
    if (cfg_.enable_prefix_caching && full > 0) {
      const auto tokens = r->known_tokens();
      for (int64_t b = 0; b < full; ++b) blocks_.commit(r->blocks, b, tokens);
    }
  }
}

}  // namespace deepinfer::sched
