#include "runtime/step_runner.h"

#include "common/check.h"

namespace deepinfer::runtime {

RunResult StepRunner::execute(const RunPlan& plan) {
  const ModelConfig& c = model_.config();
  std::vector<RunItem> items(plan.chunks.size());
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const RunChunk& ch = plan.chunks[i];
    if (ch.reset) model_.reset_slot(ch.slot, ch.replay_start, ch.history_floor, ch.preceding);
    const int64_t at = model_.slot_position(ch.slot);
    DI_CHECK(at == ch.start, "slot ", ch.slot, " is at ", at, ", plan says ", ch.start);
    items[i].slot = ch.slot;
    items[i].blocks = &ch.block_table;
    items[i].tokens = ch.tokens;
  }
  // Read in place (the runner's buffer) until the draws below are done.
  std::span<const float> logits;
  if (!items.empty()) logits = model_.forward_view(items);

  // Forks copy the state the forward has just left in the leader's slot and block.
  for (const RunFork& f : plan.forks) {
    model_.copy_slot(f.from_slot, f.to_slot);
    for (const auto& [from, to] : f.block_copies) model_.copy_block(from, to);
  }

  std::vector<sampling::SampleInput> rows(plan.draws.size());
  for (size_t k = 0; k < plan.draws.size(); ++k) {
    const RunDraw& d = plan.draws[k];
    sampling::SampleInput& in = rows[k];
    DI_CHECK(size_t((d.chunk + 1) * c.vocab_size) <= logits.size(), "draw of chunk ", d.chunk, " has no logits row");
    in.logits = logits.data() + d.chunk * c.vocab_size;
    in.vocab = c.vocab_size;
    in.params = &d.params;
    in.seed = d.seed;
    in.position = d.position;
    in.prompt_ids = d.prompt_ids;
    in.output_ids = d.output_ids;
    if (!d.token_bitmask.empty()) in.token_bitmask = d.token_bitmask.data();
  }
  RunResult r;
  r.draws.resize(rows.size());
  sampling::sample_batch(rows, r.draws);
  return r;
}

RunnerThread::RunnerThread(StepRunner& runner) : runner_(runner), thread_([this] { loop(); }) {}

RunnerThread::~RunnerThread() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();  // the loop finishes a plan in flight first
}

void RunnerThread::launch(RunPlan plan) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    DI_CHECK(!launched_, "a plan is already in flight");
    plan_ = std::move(plan);
    launched_ = true;
  }
  cv_.notify_all();
}

RunResult RunnerThread::wait() {
  std::unique_lock<std::mutex> lk(mu_);
  DI_CHECK(launched_, "no plan in flight");
  cv_.wait(lk, [&] { return result_.has_value() || error_ != nullptr; });
  launched_ = false;
  if (error_) {
    std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  RunResult r = std::move(*result_);
  result_.reset();
  return r;
}

void RunnerThread::loop() {
  for (;;) {
    RunPlan plan;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || plan_.has_value(); });
      if (!plan_) return;  // stopping with nothing in flight
      plan = std::move(*plan_);
      plan_.reset();
    }
    std::optional<RunResult> result;
    std::exception_ptr error;
    try {
      result = runner_.execute(plan);
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      result_ = std::move(result);
      error_ = error;
    }
    cv_.notify_all();
  }
}

}  // namespace deepinfer::runtime
