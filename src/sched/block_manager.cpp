#include "sched/block_manager.h"

#include <algorithm>

#include "common/check.h"

namespace deepinfer::sched {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  // splitmix64 finalizer over h ^ v: a well-distributed, deterministic 64-bit chain
  // (the same tokens and salt give the same hash in every process).
  uint64_t z = h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2));
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

BlockManager::BlockManager(int64_t num_blocks, int64_t block_size, uint64_t namespace_salt)
    : block_size_(block_size), salt_(namespace_salt), meta_(num_blocks) {
  DI_CHECK(num_blocks > 0 && block_size > 0);
  for (int64_t b = num_blocks - 1; b >= 0; --b) free_.push_back(b);
}

uint64_t BlockManager::chain_hash(uint64_t parent, const int64_t* tokens) const {
  uint64_t h = mix(parent, salt_);
  for (int64_t i = 0; i < block_size_; ++i) h = mix(h, uint64_t(tokens[i]));
  return h;
}

void BlockManager::take(int64_t block) {
  Meta& m = meta_[block];
  if (m.in_lru) {
    lru_.erase(m.lru_it);
    m.in_lru = false;
  }
  ++m.refs;
  ++total_refs_;
}

void BlockManager::share(const std::vector<int64_t>& blocks) {
  for (int64_t b : blocks) {
    DI_CHECK(meta_[b].refs > 0, "block ", b, " shared while unreferenced");
    take(b);
  }
}

void BlockManager::uncache(int64_t block) {
  Meta& m = meta_[block];
  if (!m.cached) return;
  auto it = by_hash_.find(m.hash);
  if (it != by_hash_.end() && it->second == block) by_hash_.erase(it);
  m.cached = false;
  m.tokens.clear();
}

std::vector<int64_t> BlockManager::match_and_take(const std::vector<int64_t>& tokens, int64_t max_blocks) {
  std::vector<int64_t> out;
  uint64_t h = 0;
  for (int64_t i = 0; i < max_blocks && (i + 1) * block_size_ <= int64_t(tokens.size()); ++i) {
    const int64_t* blk = tokens.data() + i * block_size_;
    h = chain_hash(h, blk);
    auto it = by_hash_.find(h);
    if (it == by_hash_.end()) break;
    const Meta& m = meta_[it->second];
    if (!std::equal(m.tokens.begin(), m.tokens.end(), blk)) break;
    out.push_back(it->second);
  }
  for (int64_t b : out) take(b);
  return out;
}

std::optional<std::vector<int64_t>> BlockManager::allocate(int64_t n) {
  if (n > num_available()) return std::nullopt;
  std::vector<int64_t> out;
  while (int64_t(out.size()) < n) {
    int64_t b;
    if (!free_.empty()) {
      b = free_.back();
      free_.pop_back();
    } else {
      b = lru_.front();  // evict the least recently used unreferenced cached block
      lru_.pop_front();
      meta_[b].in_lru = false;
      uncache(b);
    }
    meta_[b].refs = 1;
    ++total_refs_;
    out.push_back(b);
  }
  return out;
}

void BlockManager::release(const std::vector<int64_t>& blocks) {
  for (int64_t b : blocks) {
    Meta& m = meta_[b];
    DI_CHECK(m.refs > 0, "block ", b, " released more often than taken");
    --total_refs_;
    if (--m.refs > 0) continue;
    if (m.cached) {
      m.lru_it = lru_.insert(lru_.end(), b);
      m.in_lru = true;
    } else {
      free_.push_back(b);
    }
  }
}

void BlockManager::commit(const std::vector<int64_t>& table, int64_t index, const std::vector<int64_t>& tokens) {
  DI_CHECK(index < int64_t(table.size()) && (index + 1) * block_size_ <= int64_t(tokens.size()));
  Meta& m = meta_[table[index]];
  if (m.cached) return;
  uint64_t parent = 0;
  if (index > 0) {
    const Meta& prev = meta_[table[index - 1]];
    if (!prev.cached) return;
    parent = prev.hash;
  }
  const int64_t* blk = tokens.data() + index * block_size_;
  const uint64_t h = chain_hash(parent, blk);
  if (by_hash_.count(h)) return;  // an identical block is already cached
  m.cached = true;
  m.hash = h;
  m.tokens.assign(blk, blk + block_size_);
  by_hash_[h] = table[index];
}

}  // namespace deepinfer::sched
