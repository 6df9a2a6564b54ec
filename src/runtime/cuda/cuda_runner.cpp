// The CUDA runner: v41::CudaModel behind the engine's ModelRunner interface.
#include "common/check.h"
#include "model/v41/model_cuda.h"
#include "runtime/runner.h"

namespace deepinfer::runtime {

namespace {

class CudaRunner final : public ModelRunner {
 public:
  CudaRunner(const std::string& dir, const RunnerOptions& o) {
    v41::CudaModelOptions m;
    m.max_slots = o.max_num_seqs;
    m.max_tokens = o.max_num_batched_tokens;
    m.block_size = o.block_size;
    m.num_blocks = o.num_blocks;
    m.max_blocks = std::max<int64_t>(1, o.default_blocks);
    m.batch_invariant = o.batch_invariant;
    m.activations = parse_activations(o.activations, "activations");
    m.cuda_graphs = o.cuda_graphs;
    m.max_context = o.max_model_len;
    check_engram_tables(o.engram_tables, "engram_tables");
    m.engram_tables = o.engram_tables == "host"     ? v41::EngramTables::kHost
                      : o.engram_tables == "device" ? v41::EngramTables::kDevice
                                                    : v41::EngramTables::kAuto;
    check_bf16_weights_for(o.bf16_weights, o.activations, "bf16_weights");
    m.bf16_weights = o.bf16_weights == "on"     ? v41::Bf16Weights::kOn
                     : o.bf16_weights == "auto" ? v41::Bf16Weights::kAuto
                                                : v41::Bf16Weights::kOff;
    model_ = v41::CudaModel::load(dir, m);
  }
  const ModelConfig& config() const override { return model_->config(); }
  int64_t num_blocks() const override { return model_->num_blocks(); }
  int64_t slot_position(int64_t slot) const override { return model_->slot(slot).num_tokens; }
  void reset_slot(int64_t slot, int64_t replay_start, int64_t history_end,
                  std::span<const int64_t> preceding) override {
    model_->reset_slot(slot, replay_start, history_end, preceding);
  }
  void copy_slot(int64_t from, int64_t to) override { model_->copy_slot(from, to); }
  void copy_block(int64_t from, int64_t to) override { model_->copy_block(from, to); }
  std::vector<float> forward(std::vector<RunItem>& items) override {
    const std::span<const float> v = forward_view(items);
    return std::vector<float>(v.begin(), v.end());
  }
  // The model's pinned download buffer, read in place (valid until the next forward).
  std::span<const float> forward_view(std::vector<RunItem>& items) override {
    std::vector<v41::CudaBatchItem> b(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
      b[i].slot = items[i].slot;
      b[i].block_table = items[i].blocks;
      b[i].tokens = std::move(items[i].tokens);
      b[i].all_logits = items[i].all_logits;
    }
    const v41::LogitsView v = model_->forward_batch_view(b);
    return {v.data, size_t(v.rows * v.vocab)};
  }

 private:
  std::unique_ptr<v41::CudaModel> model_;
};

}  // namespace

std::unique_ptr<ModelRunner> create_cuda_runner(const std::string& model_dir, const RunnerOptions& o) {
  return std::make_unique<CudaRunner>(model_dir, o);
}

}  // namespace deepinfer::runtime
