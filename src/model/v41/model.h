// The DeepSeek-V4.1 text model on the CPU backend: load a checkpoint directory
// (config.json, safetensors, tokenizer.json when the model has Engram layers) and
// run the forward pass over a sequence's new tokens, appending to its state.
//
//   auto model = v41::Model::load("/path/to/model");
//   v41::SequenceState seq = model->new_sequence();
//   std::vector<float> logits = model->forward(seq, {0, 17, 42});  // [3, vocab]
//   logits = model->forward(seq, {7});                               // [1, vocab], position 3
//
// The engine uses forward_batch over state slots and a shared paged history pool.
// Both are const: distinct sequences (and pools) may run concurrently.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/config.h"
#include "model/v41/engram.h"
#include "model/v41/state.h"
#include "model/v41/weights.h"
#include "ops/linear.h"

namespace deepinfer::v41 {

// One sequence's part of a ragged batch: its state and the tokens to append.
struct BatchItem {
  SequenceRef seq;
  std::vector<int64_t> tokens;
  bool all_logits = false;  // true: logits of every position; false: the last only
};

struct ModelOptions {
  // What enters every linear and expert matrix product (ops/linear.h): fp32 as
  // computed, or rounded to bf16 (the reference's bf16 run; --activations bf16), or
  // kFP8: the dense FP8 linears' x quantized per 32-K block, bf16 elsewhere
  // (ops::activations_for; --activations fp8).
  ops::Activations activations = ops::Activations::kF32;
};

class Model {
 public:
  // Throws InputError on a missing or malformed config, checkpoint or tokenizer.
  static std::unique_ptr<Model> load(const std::string& dir, const ModelOptions& options = {});

  const ModelConfig& config() const { return cfg_; }
  // A single-sequence state with a private history pool (oracle API).
  SequenceState new_sequence(int64_t block_size = 64) const { return SequenceState(cfg_, block_size); }

  // Feeds `tokens` (ids in [0, vocab)) at positions seq.num_tokens()...; returns the
  // logits of every fed position, row-major [tokens.size(), vocab_size].
  std::vector<float> forward(SequenceState& seq, const std::vector<int64_t>& tokens) const;

  // Runs a ragged batch of sequences in one pass: per-token work (projections, MoE,
  // hyper-connections) over all tokens together, per-sequence work (attention over
  // its window and history, compressor, indexer) on each sequence's own state.
  // Returns the requested logits rows in item order. Each item's logits are bitwise
  // independent of the other items (batch invariance). The caller guarantees every
  // block table covers the positions written.
  std::vector<float> forward_batch(HistoryPool& pool, std::vector<BatchItem>& items) const;

  // What StateSlot::reset_for_replay keeps of the tokens before a replay's start (their
  // Engram hash ids; empty without Engram layers).
  std::vector<int64_t> replay_recent_ids(std::span<const int64_t> preceding) const;

 private:
  struct Shared;  // per-sequence state published by source layers within one call
  struct Batch;   // the ragged batch: token ranges, positions, sequences

  void attention(Batch& b, int64_t layer, const float* x, float* out) const;
  void compressor(Batch& b, size_t item, int64_t layer, const float* x, std::vector<float>& latent,
                  std::vector<int64_t>& group_positions) const;
  void indexer(Batch& b, size_t item, int64_t layer, const float* x, const float* qr,
               const std::vector<float>& latent, const std::vector<int64_t>& group_positions) const;
  void moe(int64_t layer, const float* x, int64_t n, float* out) const;

  ModelConfig cfg_;
  std::unique_ptr<Checkpoint> ckpt_;
  ModelWeights w_;
  std::vector<float> main_inv_freq_, compress_inv_freq_;
  std::unique_ptr<EngramHasher> engram_;  // null without Engram layers
  ops::Activations act_ = ops::Activations::kF32;
};

}  // namespace deepinfer::v41
