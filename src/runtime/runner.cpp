#include "runtime/runner.h"

#include <algorithm>

#include "common/check.h"
#include "common/host_memory.h"
#include "model/v41/model.h"

namespace deepinfer::runtime {

#ifdef DEEPINFER_HAVE_CUDA
std::unique_ptr<ModelRunner> create_cuda_runner(const std::string& model_dir, const RunnerOptions& o);  // cuda_runner.cpp
#endif

namespace {

// The CPU oracle: every slot and the whole history pool exist from the start.
class CpuRunner final : public ModelRunner {
 public:
  CpuRunner(const std::string& dir, const RunnerOptions& o)
      : model_(v41::Model::load(dir, {parse_activations(o.activations, "activations")})) {
    const ModelConfig& c = model_->config();
    // Memory is planned up front, so a config whose context makes the default pool larger
    // than the machine gets a smaller pool (or a clear error), not an OOM kill later.
    const int64_t per_block = v41::HistoryPool::bytes_per_block(c, o.block_size);
    const int64_t available = o.host_memory_bytes > 0 ? o.host_memory_bytes : host_memory_available();
    if (o.num_blocks > 0) {
      DI_CHECK_INPUT(available == 0 || o.num_blocks <= available / std::max<int64_t>(per_block, 1), o.num_blocks,
                     " history blocks (", per_block, " bytes each) do not fit in the ", available,
                     " bytes of available host memory");
      num_blocks_ = o.num_blocks;
    } else {
      const int64_t fit = available == 0 ? o.default_blocks : available / 2 / std::max<int64_t>(per_block, 1);
      num_blocks_ = std::min(o.default_blocks, fit);
      DI_CHECK_INPUT(num_blocks_ >= 1, "no host memory is left for the history pool (", available,
                     " bytes available, ", per_block, " bytes per block)");
    }
    pool_ = std::make_unique<v41::HistoryPool>(c, o.block_size, num_blocks_);
    for (int64_t s = 0; s < o.max_num_seqs; ++s) slots_.push_back(v41::StateSlot::create(c));
  }
  const ModelConfig& config() const override { return model_->config(); }
  int64_t num_blocks() const override { return num_blocks_; }
  int64_t slot_position(int64_t slot) const override { return slots_.at(slot).num_tokens; }
  void reset_slot(int64_t slot, int64_t replay_start, int64_t history_end,
                  std::span<const int64_t> preceding) override {
    DI_CHECK(int64_t(preceding.size()) <= replay_start, "slot ", slot, ": ", preceding.size(),
             " tokens before a replay from ", replay_start);
    slots_.at(slot).reset_for_replay(model_->config(), replay_start, history_end,
                                     model_->replay_recent_ids(preceding));
  }
  void copy_slot(int64_t from, int64_t to) override {
    slots_.at(to) = slots_.at(from);  // same shapes: copy-assignment reuses the storage
  }
  void copy_block(int64_t from, int64_t to) override { pool_->copy_block(from, to); }
  std::vector<float> forward(std::vector<RunItem>& items) override {
    std::vector<v41::BatchItem> b(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      DI_CHECK(items[i].slot >= 0 && items[i].slot < int64_t(slots_.size()), "slot ", items[i].slot, " out of range");
      b[i].seq = {&slots_[items[i].slot], items[i].blocks};
      b[i].tokens = std::move(items[i].tokens);
      b[i].all_logits = items[i].all_logits;
    }
    return model_->forward_batch(*pool_, b);
  }

 private:
  std::unique_ptr<v41::Model> model_;
  std::unique_ptr<v41::HistoryPool> pool_;
  std::vector<v41::StateSlot> slots_;
  int64_t num_blocks_ = 0;
};

}  // namespace

void check_engram_tables(const std::string& value, const std::string& what) {
  DI_CHECK_INPUT(value == "auto" || value == "device" || value == "host", what, " must be auto, device or host, got '",
                 value, "'");
}

void check_bf16_weights(const std::string& value, const std::string& what) {
  DI_CHECK_INPUT(value == "off" || value == "on" || value == "auto", what, " must be off, on or auto, got '", value,
                 "'");
}

void check_bf16_weights_for(const std::string& value, const std::string& activations, const std::string& what) {
  check_bf16_weights(value, what);
  DI_CHECK_INPUT(value != "on" || activations == "bf16" || activations == "fp8", what,
                 " on needs bf16 or fp8 activations (--activations bf16|fp8): only their cuBLASLt GEMMs read the "
                 "copies");
}

ops::Activations parse_activations(const std::string& value, const std::string& what) {
  DI_CHECK_INPUT(value == "f32" || value == "bf16" || value == "fp8", what, " must be f32, bf16 or fp8, got '", value,
                 "'");
  return value == "bf16" ? ops::Activations::kBF16 : value == "fp8" ? ops::Activations::kFP8 : ops::Activations::kF32;
}

std::vector<std::string> available_devices() {
#ifdef DEEPINFER_HAVE_CUDA
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

std::unique_ptr<ModelRunner> create_runner(const std::string& model_dir, const RunnerOptions& o) {
  DI_CHECK_INPUT(o.max_num_seqs >= 1, "max_num_seqs must be >= 1");
  check_engram_tables(o.engram_tables, "engram_tables");
  parse_activations(o.activations, "activations");
  check_bf16_weights_for(o.bf16_weights, o.activations, "bf16_weights");
  if (o.device == "cpu") return std::make_unique<CpuRunner>(model_dir, o);
#ifdef DEEPINFER_HAVE_CUDA
  if (o.device == "cuda") return create_cuda_runner(model_dir, o);
  DI_CHECK_INPUT(false, "device '", o.device, "' is unknown (cpu or cuda)");
#else
  DI_CHECK_INPUT(false, "device '", o.device, "' is not available in this build (only cpu; build with -DDEEPINFER_CUDA=ON for cuda)");
#endif
  return nullptr;
}

}  // namespace deepinfer::runtime
