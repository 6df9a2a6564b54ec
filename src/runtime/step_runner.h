// One engine step as plain data (a RunPlan), executed over a ModelRunner (runner.h:
// the model, its slots and history pool on a device), and the worker thread that runs
// it while the engine plans the next step (asynchronous scheduling).
//
// A RunPlan holds copies of everything the step reads (token ids, block tables,
// sampling parameters, penalty histories), so the engine may change its requests and
// the scheduler's tables while the plan runs. The step runner owns the ModelRunner for
// the duration: nothing else calls into it until wait() returns.
//
// Order within a step: slot resets, one ragged forward over every chunk, forks (slot
// copies and partial-block copies, which read the state the forward left), draws.
#pragma once

#include <condition_variable>
#include <exception>
#include <cstdint>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "runtime/runner.h"
#include "sample/sampler.h"

namespace deepinfer::runtime {

struct RunChunk {
  int64_t slot = 0;
  bool reset = false;  // reset the slot for a replay from replay_start, history below history_floor
  int64_t replay_start = 0, history_floor = 0;
  // With reset: the tokens just before replay_start (at most the model's Engram look-back;
  // empty without Engram layers or from position 0).
  std::vector<int64_t> preceding;
  int64_t start = 0;                 // position of tokens[0]; the slot must be there
  std::vector<int64_t> tokens;
  std::vector<int64_t> block_table;  // covers [0, start + tokens.size())
};

struct RunFork {
  int64_t from_slot = 0, to_slot = 0;
  std::vector<std::pair<int64_t, int64_t>> block_copies;  // (from, to)
};

// One token drawn from the last logits row of chunk `chunk`.
struct RunDraw {
  int64_t chunk = 0;
  sampling::SamplingParams params;
  uint64_t seed = 0;
  int64_t position = 0;             // position of the drawn token
  std::vector<int64_t> prompt_ids;  // only when a penalty reads them (else empty)
  std::vector<int64_t> output_ids;
  std::vector<uint32_t> token_bitmask;  // structured outputs: ceil(vocab / 32) words; empty: none
};

struct RunPlan {
  std::vector<RunChunk> chunks;
  std::vector<RunFork> forks;
  std::vector<RunDraw> draws;
  int64_t num_tokens() const {
    int64_t n = 0;
    for (const RunChunk& c : chunks) n += int64_t(c.tokens.size());
    return n;
  }
};

struct RunResult {
  std::vector<sampling::SampleResult> draws;  // one per RunDraw, in order
};

class StepRunner {
 public:
  explicit StepRunner(ModelRunner& model) : model_(model) {}
  RunResult execute(const RunPlan& plan);

 private:
  ModelRunner& model_;
};

// Runs plans on one worker thread, one at a time: launch() hands a plan over and
// returns at once; wait() returns its result (rethrowing what execute threw).
class RunnerThread {
 public:
  explicit RunnerThread(StepRunner& runner);
  ~RunnerThread();  // waits for a plan in flight
  void launch(RunPlan plan);
  RunResult wait();
  bool busy() const { return launched_; }

 private:
  void loop();
  StepRunner& runner_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::optional<RunPlan> plan_;
  std::optional<RunResult> result_;
  std::exception_ptr error_;
  bool launched_ = false, stop_ = false;
  std::thread thread_;
};

}  // namespace deepinfer::runtime
