// Per-sequence inference state of the V4.1 model (MODEL_V41.md §8): everything a
// sequence must carry between forward calls so that one call with all tokens, chunks
// of any size, and one token at a time compute the same logits.
//
// This is the CPU oracle's plain representation (fp32 vectors that grow); the
// engine's paged pools (issue: engine core) store the same content in blocks.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::v41 {

struct LayerState {
  // Sliding window ring of post-RoPE, FP8-rounded K=V entries: slot = position % window.
  std::vector<float> window;  // [sliding_window, head_dim]

  // KV-source layers only.
  // Compressor tokens of a group that is not complete yet (ratio > 1): the fp32
  // projections a = wkv.x and g = wgate.x, oldest first.
  std::vector<float> pending_kv, pending_gate;  // [num_pending, head_dim]
  int64_t num_pending = 0;
  // Compressed entries (post-RoPE, FP4-rounded) and indexer keys, one per group.
  std::vector<float> compressed;  // [num_entries, head_dim]
  std::vector<float> index_keys;  // [num_index_keys, index_head_dim]
  int64_t num_entries = 0;
  int64_t num_index_keys = 0;
};

struct SequenceState {
  int64_t num_tokens = 0;  // tokens consumed so far = position of the next token
  std::vector<LayerState> layers;
  // Engram n-gram history: compressed ids of the last (max_ngram_size - 1) tokens,
  // oldest first (fewer at the start of a sequence).
  std::vector<int64_t> recent_ngram_ids;
};

}  // namespace deepinfer::v41
