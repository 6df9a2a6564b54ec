// The DeepSeek-V4.1 text model on the CPU backend: load a checkpoint directory
// (config.json, safetensors, tokenizer.json when the model has Engram layers) and
// run the forward pass over a sequence's new tokens, appending to its state.
//
//   auto model = v41::Model::load("/path/to/model");
//   v41::SequenceState seq = model->new_sequence();
//   std::vector<float> logits = model->forward(seq, {0, 17, 42});  // [3, vocab]
//   logits = model->forward(seq, {7});                               // [1, vocab], position 3
//
// forward is const and thread-compatible: distinct sequences may run concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/v41/engram.h"
#include "model/v41/state.h"
#include "model/v41/weights.h"

namespace deepinfer::v41 {

class Model {
 public:
  // Throws InputError on a missing or malformed config, checkpoint or tokenizer.
  static std::unique_ptr<Model> load(const std::string& dir);

  const ModelConfig& config() const { return cfg_; }
  SequenceState new_sequence() const;

  // Feeds `tokens` (ids in [0, vocab)) at positions seq.num_tokens...; returns the
  // logits of every fed position, row-major [tokens.size(), vocab_size].
  std::vector<float> forward(SequenceState& seq, const std::vector<int64_t>& tokens) const;

 private:
  struct Shared;  // per-forward state published by source layers (see model.cpp)
  struct Batch;   // the tokens of one forward call and their positions

  void attention(const Batch& b, int64_t layer, const float* x, SequenceState& seq, Shared& shared,
                 float* out) const;
  void compressor(const Batch& b, int64_t layer, const float* x, LayerState& st, std::vector<float>& latent,
                  int64_t& num_groups, int64_t& first_group_position) const;
  void indexer(const Batch& b, int64_t layer, const float* x, const float* qr, const std::vector<float>& latent,
               int64_t num_groups, int64_t first_group_position, LayerState& st, Shared& shared) const;
  void moe(int64_t layer, const float* x, int64_t n, float* out) const;

  ModelConfig cfg_;
  std::unique_ptr<Checkpoint> ckpt_;
  ModelWeights w_;
  std::vector<float> main_inv_freq_, compress_inv_freq_;
  std::unique_ptr<EngramHasher> engram_;  // null without Engram layers
};

}  // namespace deepinfer::v41
