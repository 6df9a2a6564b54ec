// A request as the scheduler tracks it. State machine (transitions asserted):
//
//   WAITING --admit--> RUNNING --finish--> FINISHED
//      ^                  |
//      +----preempt-------+   (blocks and slot released; recomputed from scratch,
//                               keeping the tokens generated so far)
//
// "Known" tokens are the prompt followed by the generated tokens. num_computed counts
// the known tokens whose effect is in the request's state slot; each step schedules a
// chunk of the rest and samples once the chunk reaches the last known token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sample/sampling_params.h"

namespace deepinfer::sched {

enum class RequestState { kWaiting, kRunning, kFinished };

struct Request {
  std::string id;
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
  bool abort_requested = false;
  std::string finish_reason;

  int64_t num_known() const { return int64_t(prompt.size() + output.size()); }
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
