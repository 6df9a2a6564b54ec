// StepRunner samples from ModelRunner::forward_view: a device runner's own buffer read
// in place (the CUDA runner's pinned logits), or forward()'s vector by default. Both
// must give the same draws from the same rows.
#include <gtest/gtest.h>

#include <map>

#include "runtime/runner.h"
#include "runtime/step_runner.h"

namespace deepinfer {
namespace {

constexpr int64_t kVocab = 50;

// Logits of row r of a call: token (7 * slot + 3 * position) % vocab is the largest, so
// a greedy draw names the slot and position the row came from.
std::vector<float> rows_for(const std::vector<runtime::RunItem>& items, const std::map<int64_t, int64_t>& at) {
  std::vector<float> out;
  for (const runtime::RunItem& it : items) {
    std::vector<float> row(kVocab, 0.0f);
    const int64_t pos = at.at(it.slot) + int64_t(it.tokens.size()) - 1;
    row[size_t((7 * it.slot + 3 * pos) % kVocab)] = 5.0f;
    out.insert(out.end(), row.begin(), row.end());
  }
  return out;
}

// A runner with the rows computed by rows_for; `view` overrides forward_view (the CUDA
// runner's shape: forward() must then not be what the step runner calls).
class FakeRunner : public runtime::ModelRunner {
 public:
  explicit FakeRunner(bool view) : view_(view) { cfg_.vocab_size = kVocab; }
  const ModelConfig& config() const override { return cfg_; }
  int64_t num_blocks() const override { return 16; }
  int64_t slot_position(int64_t slot) const override { return at_.count(slot) ? at_.at(slot) : 0; }
  void reset_slot(int64_t slot, int64_t replay_start, int64_t, std::span<const int64_t>) override {
    at_[slot] = replay_start;
  }
  std::vector<float> forward(std::vector<runtime::RunItem>& items) override {
    ++forward_calls;
    return advance(items);
  }
  std::span<const float> forward_view(std::vector<runtime::RunItem>& items) override {
    if (!view_) return ModelRunner::forward_view(items);
    ++view_calls;
    own_ = advance(items);
    return own_;
  }
  void copy_slot(int64_t, int64_t) override {}
  void copy_block(int64_t, int64_t) override {}
  int forward_calls = 0, view_calls = 0;

 private:
  std::vector<float> advance(std::vector<runtime::RunItem>& items) {
    for (const auto& it : items) at_.try_emplace(it.slot, 0);
    std::vector<float> rows = rows_for(items, at_);
    for (const auto& it : items) at_[it.slot] += int64_t(it.tokens.size());
    return rows;
  }
  bool view_;
  ModelConfig cfg_;
  std::map<int64_t, int64_t> at_;
  std::vector<float> own_;
};

runtime::RunPlan plan_at(int64_t step) {
  runtime::RunPlan p;
  for (int64_t slot : {3, 1}) {
    runtime::RunChunk c;
    c.slot = slot;
    c.start = step;
    c.tokens = {int64_t(10 + slot)};
    c.block_table = {0};
    p.chunks.push_back(c);
    runtime::RunDraw d;
    d.chunk = int64_t(p.chunks.size()) - 1;
    d.params.temperature = 0.0f;  // greedy: the row's argmax
    d.position = step + 1;
    p.draws.push_back(d);
  }
  return p;
}

TEST(StepRunnerView, DrawsFromTheRunnersViewOrItsDefault) {
  FakeRunner viewing(true), plain(false);
  runtime::StepRunner a(viewing), b(plain);
  for (int64_t step = 0; step < 3; ++step) {
    const runtime::RunResult ra = a.execute(plan_at(step)), rb = b.execute(plan_at(step));
    ASSERT_EQ(ra.draws.size(), 2u);
    ASSERT_EQ(rb.draws.size(), 2u);
    // Chunk 0 is slot 3, chunk 1 slot 1, each at position `step`.
    EXPECT_EQ(ra.draws[0].token, (7 * 3 + 3 * step) % kVocab);
    EXPECT_EQ(ra.draws[1].token, (7 * 1 + 3 * step) % kVocab);
    for (size_t k = 0; k < 2; ++k) EXPECT_EQ(ra.draws[k].token, rb.draws[k].token);
  }
  // The viewing runner was read in place; the plain one through forward().
  EXPECT_EQ(viewing.view_calls, 3);
  EXPECT_EQ(viewing.forward_calls, 0);
  EXPECT_EQ(plain.forward_calls, 3);
}

}  // namespace
}  // namespace deepinfer
