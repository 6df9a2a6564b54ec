// A request as the scheduler tracks it. State machine (transitions asserted):
//
//   WAITING --admit--> RUNNING --finish--> FINISHED
//      ^                  |
//      +----preempt-------+   (blocks and slot released; recomputed from scratch,
//                               keeping the tokens generated so far)
//
// "Known" tokens are the prompt followed by the generated tokens. num_computed counts
// the positions whose effect is in the request's state slot once every planned step has
// run (the scheduler advances it when it plans a chunk); each step schedules a chunk of
// the rest and samples once the chunk reaches the last position.
//
// With asynchronous scheduling the next step is planned before the current one's tokens
// are known: num_inflight counts tokens that planned steps will sample (0, 1 or 2), and
// num_tokens() = known + in flight is the length the scheduler plans against. Token ids
// are read only when a plan is handed to the runner, after the earlier results are in.
//
// n > 1 samples of one prompt: sample 0 leads; samples 1..n-1 wait in `forks` (not in
// any queue) until the leader's prompt is computed, then copy its slot and share its
// history blocks (Scheduler::schedule, "forks").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sample/sampling_params.h"

namespace deepinfer::sched {

enum class RequestState { kWaiting, kRunning, kFinished };

struct Request {
  std::string id;
  int64_t index = 0;    // sample index within the request (RequestSampling.n)
  int64_t arrival = 0;  // admission order key (FCFS)
  std::vector<int64_t> prompt;
  std::vector<int64_t> output;
  sampling::SamplingParams params;
  uint64_t seed = 0;

  RequestState state = RequestState::kWaiting;
  int64_t slot = -1;
  std::vector<int64_t> blocks;  // history block table
  int64_t num_computed = 0;
  int64_t replay_start = 0;     // set at admission: first position the slot recomputes
  int64_t history_floor = 0;    // history below this came from the prefix cache
  int64_t cached_tokens = 0;    // prompt tokens not recomputed thanks to the cache
  int64_t num_inflight = 0;     // tokens planned steps will sample; ids not known yet
  int64_t epoch = 0;            // admissions so far: results of an older admission commit nothing
  std::vector<Request*> forks;  // leader only: samples forked once the prompt is computed
  bool abort_requested = false;
  std::string finish_reason;

  int64_t num_known() const { return int64_t(prompt.size() + output.size()); }
  int64_t num_tokens() const { return num_known() + num_inflight; }
  // The tokens in flight complete the request whatever their values are.
  bool surely_finished(int64_t max_len) const {
    return int64_t(output.size()) + num_inflight >= params.max_tokens || num_tokens() >= max_len;
  }
  int64_t known(int64_t i) const {
    return i < int64_t(prompt.size()) ? prompt[i] : output[i - int64_t(prompt.size())];
  }
  std::vector<int64_t> known_tokens() const {
    std::vector<int64_t> t = prompt;
    t.insert(t.end(), output.begin(), output.end());
    return t;
  }
};

}  // namespace deepinfer::sched
