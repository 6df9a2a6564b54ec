#include "model/v41/state.h"

#include <algorithm>

#include "common/check.h"

namespace deepinfer::v41 {

StateSlot StateSlot::create(const ModelConfig& cfg) {
  StateSlot s;
  s.layers.resize(cfg.num_hidden_layers);
  for (auto& l : s.layers) l.window.assign(cfg.sliding_window * cfg.head_dim, 0.0f);
  return s;
}

void StateSlot::reset_for_replay(const ModelConfig& cfg, int64_t replay_start, int64_t history_end,
                                 std::vector<int64_t> recent_ids) {
  DI_CHECK(int64_t(recent_ids.size()) <= replay_start, "replay from ", replay_start, " with ", recent_ids.size(),
           " earlier token ids");
  num_tokens = replay_start;
  window_start = replay_start;
  write_floor = history_end;
  recent_ngram_ids = std::move(recent_ids);
  for (int64_t l = 0; l < int64_t(layers.size()); ++l) {
    LayerSlot& ls = layers[l];
    const int64_t ratio = cfg.compress_ratios[l];
    DI_CHECK(ratio == 0 || replay_start % ratio == 0, "replay start not aligned to the compress ratio");
    ls.pending_kv.clear();
    ls.pending_gate.clear();
    ls.num_pending = 0;
    ls.next_group_position = replay_start;
    ls.num_entries = ratio > 0 ? history_end / ratio : 0;
  }
}

namespace {

// Compressed entries of KV-source `layer` in one block; InputError when the block size is
// not a multiple of its ratio. The pool's layout and its size both come from here.
int64_t source_entries_per_block(const ModelConfig& cfg, int64_t block_size, int64_t layer) {
  const int64_t ratio = cfg.compress_ratios[layer];
  DI_CHECK_INPUT(ratio > 0 && block_size % ratio == 0, "block size ", block_size,
                 " must be a multiple of every compress ratio (layer ", layer, " has ratio ", ratio, ")");
  return block_size / ratio;
}

}  // namespace

HistoryPool::HistoryPool(const ModelConfig& cfg, int64_t block_size, int64_t num_blocks)
    : block_size_(block_size), num_blocks_(0), head_dim_(cfg.head_dim), index_head_dim_(cfg.index_head_dim) {
  for (int64_t layer : cfg.kv_source_layer_ids) {
    Source s;
    s.layer = layer;
    s.ratio = cfg.compress_ratios[layer];
    s.entries_per_block = source_entries_per_block(cfg, block_size, layer);
    sources_.push_back(std::move(s));
  }
  grow(num_blocks);
}

int64_t HistoryPool::bytes_per_block(const ModelConfig& cfg, int64_t block_size) {
  int64_t bytes = 0;
  for (int64_t layer : cfg.kv_source_layer_ids)
    bytes += source_entries_per_block(cfg, block_size, layer) * (cfg.head_dim + cfg.index_head_dim) *
             int64_t(sizeof(float));
  return bytes;
}

void HistoryPool::grow(int64_t num_blocks) {
  num_blocks_ += num_blocks;
  for (Source& s : sources_) {
    s.entries.resize(num_blocks_ * s.entries_per_block * head_dim_);
    s.keys.resize(num_blocks_ * s.entries_per_block * index_head_dim_);
  }
}

int64_t HistoryPool::source_index(int64_t layer) const {
  for (size_t i = 0; i < sources_.size(); ++i)
    if (sources_[i].layer == layer) return int64_t(i);
  DI_CHECK(false, "layer ", layer, " is not a KV source");
  return -1;
}

float* HistoryPool::entry(int64_t source, int64_t block, int64_t offset) {
  Source& s = sources_[source];
  DI_DCHECK(block >= 0 && block < num_blocks_ && offset >= 0 && offset < s.entries_per_block);
  return s.entries.data() + (block * s.entries_per_block + offset) * head_dim_;
}

float* HistoryPool::key(int64_t source, int64_t block, int64_t offset) {
  Source& s = sources_[source];
  DI_DCHECK(block >= 0 && block < num_blocks_ && offset >= 0 && offset < s.entries_per_block);
  return s.keys.data() + (block * s.entries_per_block + offset) * index_head_dim_;
}

void HistoryPool::copy_block(int64_t from, int64_t to) {
  DI_CHECK(from >= 0 && from < num_blocks_ && to >= 0 && to < num_blocks_, "copy_block ", from, " -> ", to);
  for (Source& s : sources_) {
    const int64_t e = s.entries_per_block * head_dim_, k = s.entries_per_block * index_head_dim_;
    std::copy_n(s.entries.begin() + from * e, e, s.entries.begin() + to * e);
    std::copy_n(s.keys.begin() + from * k, k, s.keys.begin() + to * k);
  }
}

SequenceState::SequenceState(const ModelConfig& cfg, int64_t block_size)
    : slot(StateSlot::create(cfg)), pool(cfg, block_size, 0) {}

void SequenceState::ensure_capacity(int64_t end) {
  const int64_t need = (end + pool.block_size() - 1) / pool.block_size();
  if (need <= int64_t(block_table.size())) return;
  const int64_t first = pool.num_blocks();
  const int64_t add = need - int64_t(block_table.size());
  pool.grow(add);
  for (int64_t i = 0; i < add; ++i) block_table.push_back(first + i);
}

}  // namespace deepinfer::v41
