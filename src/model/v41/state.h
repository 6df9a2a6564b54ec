// Inference state of the V4.1 model (MODEL_V41.md §8, FEATURES.md §3/§11), in the two
// families the engine manages differently:
//
//  * StateSlot: fixed-size private state of one running sequence -- the sliding-window
//    ring of every layer, the compressor's pending tokens, the n-gram history and the
//    counters. Never shared; rebuilt by replay after a prefix-cache hit.
//  * HistoryPool: paged, shareable history -- compressed KV entries and indexer keys of
//    every KV-source layer, in blocks of `block_size` tokens (block_size / ratio entries
//    per source per block). A sequence addresses it through its block table; prefix
//    caching shares blocks between sequences.
//
// SequenceState bundles a slot with a private, growing pool: the simple form used by
// the CPU oracle's single-sequence API and its tests.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace deepinfer::v41 {

struct LayerSlot {
  std::vector<float> window;  // [sliding_window, head_dim], slot = position % window
  // KV sources: compressor tokens of the group being filled (fp32 a = wkv.x, g = wgate.x).
  std::vector<float> pending_kv, pending_gate;  // [num_pending, head_dim]
  int64_t num_pending = 0;
  int64_t next_group_position = 0;  // absolute position of the pending group's first token
  int64_t num_entries = 0;          // history entries this sequence has (written or shared)
};

struct StateSlot {
  int64_t num_tokens = 0;    // position of the next token
  int64_t window_start = 0;  // window entries below this position are not valid (replay)
  int64_t write_floor = 0;   // history groups starting below this are already stored
  std::vector<LayerSlot> layers;
  std::vector<int64_t> recent_ngram_ids;  // compressed ids of the last max_ngram-1 tokens

  // A fresh slot for a sequence starting at position 0.
  static StateSlot create(const ModelConfig& cfg);
  // Resets the slot to resume a sequence whose history is stored for [0, history_end)
  // and whose tokens are replayed from `replay_start` (aligned to every ratio).
  // recent_ids: the Engram hash's ids of the tokens just before replay_start
  // (EngramHasher::recent_ids); without them the replayed tokens' n-grams stop at
  // replay_start (padding before it).
  void reset_for_replay(const ModelConfig& cfg, int64_t replay_start, int64_t history_end,
                        std::vector<int64_t> recent_ids = {});
  void reset(const ModelConfig& cfg) { reset_for_replay(cfg, 0, 0); }
};

class HistoryPool {
 public:
  // block_size must be a multiple of every compress ratio.
  HistoryPool(const ModelConfig& cfg, int64_t block_size, int64_t num_blocks);
  // The bytes one block takes over every KV source (entries and index keys, f32): the
  // CPU pool's and the GPU's, which keeps the same layout. InputError as the constructor.
  static int64_t bytes_per_block(const ModelConfig& cfg, int64_t block_size);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }
  void grow(int64_t num_blocks);  // adds blocks (used by SequenceState only)

  // Source s is the s-th KV-source layer (ModelConfig::kv_source_layer_ids order).
  int64_t source_index(int64_t layer) const;
  float* entry(int64_t source, int64_t block, int64_t offset);
  float* key(int64_t source, int64_t block, int64_t offset);
  int64_t entries_per_block(int64_t source) const { return sources_[source].entries_per_block; }
  // Copies block `from` to block `to` in every source (a fork's copy of a partial block).
  void copy_block(int64_t from, int64_t to);

 private:
  struct Source {
    int64_t layer = 0, ratio = 1, entries_per_block = 0;
    std::vector<float> entries, keys;  // [num_blocks, entries_per_block, dim]
  };
  int64_t block_size_, num_blocks_, head_dim_, index_head_dim_;
  std::vector<Source> sources_;
};

// A sequence as the model sees it in one forward call.
struct SequenceRef {
  StateSlot* slot = nullptr;
  const std::vector<int64_t>* block_table = nullptr;  // must cover every position written
};

// Single-sequence convenience: a slot plus a private pool that grows as needed.
struct SequenceState {
  StateSlot slot;
  HistoryPool pool;
  std::vector<int64_t> block_table;
  SequenceState(const ModelConfig& cfg, int64_t block_size);
  // Makes the block table cover positions [0, end).
  void ensure_capacity(int64_t end);
  int64_t num_tokens() const { return slot.num_tokens; }
};

// The rows of a ragged batch whose logits a forward returns: every row of an item that
// asks for all_logits, else its last. Item i's rows are begin[i] .. begin[i + 1] - 1.
// One rule for the CPU and the CUDA model (their item types differ).
template <class Item>
std::vector<int64_t> logit_rows(const std::vector<Item>& items, const std::vector<int64_t>& begin) {
  std::vector<int64_t> rows;
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].all_logits)
      for (int64_t t = begin[i]; t < begin[i + 1]; ++t) rows.push_back(t);
    else
      rows.push_back(begin[i + 1] - 1);
  }
  return rows;
}

}  // namespace deepinfer::v41
