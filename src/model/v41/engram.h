// Engram conditional memory (MODEL_V41.md §5): n-gram hashing of the token stream
// into per-layer tables, and the gated write of the looked-up value into every
// hyper-connection stream.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <span>
#include <vector>

#include "model/config.h"
#include "model/v41/engram_layout.h"
#include "model/v41/weights.h"
#include "ops/linear.h"

namespace deepinfer::v41 {

class EngramHasher {
 public:
  // Builds the compressed vocabulary from tokenizer.json and the hash layout;
  // InputError if the derived vocabulary size differs from the config's.
  static std::unique_ptr<EngramHasher> create(const ModelConfig& cfg, const std::string& tokenizer_path);

  int64_t num_columns() const;  // (max_ngram_size - 1) * n_heads
  // Table rows for each new token and engram layer: [n, num_layers, num_columns].
  // `recent` holds the compressed ids of the preceding tokens (oldest first) and is
  // updated to include the new tokens. Positions before the oldest id held (the sequence's
  // start, or after a replay reset the replay's start) hash as padding.
  std::vector<int64_t> hash(const std::vector<int64_t>& tokens, int64_t first_position,
                            std::vector<int64_t>& recent) const;
  // The `recent` a slot holds after `tokens` (the ids just before a position, oldest first):
  // what a replay reset keeps, so that the replayed tokens' n-grams reach back past the
  // replay's start as a full recompute's do (the last max_ngram_size - 1 suffice).
  std::vector<int64_t> recent_ids(std::span<const int64_t> tokens) const;
  int64_t lookback() const { return layout_.max_ngram_size - 1; }

 private:
  int64_t compressed_id(int64_t token) const;  // the tokenizer's compressed id, or padding

  EngramLayout layout_;
  std::vector<int64_t> token_map_;
  int64_t pad_id_ = 0;
};

// h [n, hc, dim] += gate * value, from the looked-up rows of one engram layer. act: the
// wkv linear's activations (the rows are exact in bf16 already, so only the path changes).
void apply_engram(const ModelConfig& cfg, const EngramWeights& w, const int64_t* rows /* [n, cols] stride */,
                  int64_t row_stride, int64_t n, float* h, ops::Activations act = ops::Activations::kF32);

}  // namespace deepinfer::v41
