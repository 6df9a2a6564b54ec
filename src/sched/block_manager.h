// Allocation of history blocks and the prefix cache over them (FEATURES.md §11).
//
// A block holds `block_size` tokens' worth of history (compressed KV entries and
// indexer keys of every KV-source layer). Block states:
//   FREE      on the free list, content meaningless
//   OWNED     referenced by >= 1 sequence (refcount > 0); may also be CACHED
//   CACHED    content committed under a chained hash; when its refcount drops to 0 it
//             stays in the cache (LRU) until evicted for an allocation
// Identity of a cached block: h_i = H(h_{i-1}, tokens of block i); a hit needs the hash
// match and equality of the stored tokens (no trust in the hash alone).
#pragma once

#include <cstdint>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace deepinfer::sched {

class BlockManager {
 public:
  BlockManager(int64_t num_blocks, int64_t block_size, uint64_t namespace_salt);

  int64_t block_size() const { return block_size_; }
  int64_t num_blocks() const { return int64_t(meta_.size()); }
  // Blocks an allocation could obtain now: free plus evictable cached ones.
  int64_t num_available() const { return int64_t(free_.size() + lru_.size()); }
  int64_t num_used() const { return num_blocks() - int64_t(free_.size()); }

  // The longest chain of cached full blocks matching the start of `tokens`, taken
  // (refcount + 1) for the caller. At most max_blocks blocks.
  std::vector<int64_t> match_and_take(const std::vector<int64_t>& tokens, int64_t max_blocks);
  // Allocates n blocks (evicting unreferenced cached blocks, oldest first) or returns
  // nullopt without allocating anything if fewer than n are available.
  std::optional<std::vector<int64_t>> allocate(int64_t n);
  // One more reference to each block, which must be referenced already (a fork shares
  // its leader's full blocks).
  void share(const std::vector<int64_t>& blocks);
  // Drops one reference to each block; unreferenced cached blocks stay cached.
  void release(const std::vector<int64_t>& blocks);
  // Commits block `index` of a sequence (all of its tokens computed) under the chain
  // hash of its tokens; `table` is the sequence's block table. Idempotent. Commits
  // only when every earlier block of the table is committed (the chain needs them).
  void commit(const std::vector<int64_t>& table, int64_t index, const std::vector<int64_t>& tokens);

  int64_t refcount(int64_t block) const { return meta_[block].refs; }
  int64_t total_refs() const { return total_refs_; }               // sum of refcounts
  int64_t num_cached() const { return int64_t(by_hash_.size()); }  // prefix-cache entries
  bool is_cached(int64_t block) const { return meta_[block].cached; }

 private:
  struct Meta {
    int64_t refs = 0;
    bool cached = false;
    uint64_t hash = 0;
    std::vector<int64_t> tokens;  // the block's tokens, verified on every hit
    std::list<int64_t>::iterator lru_it;
    bool in_lru = false;
  };
  uint64_t chain_hash(uint64_t parent, const int64_t* tokens) const;
  void take(int64_t block);
  void uncache(int64_t block);

  int64_t block_size_;
  uint64_t salt_;
  std::vector<Meta> meta_;
  std::vector<int64_t> free_;
  std::list<int64_t> lru_;  // unreferenced cached blocks, least recently used first
  std::unordered_map<uint64_t, int64_t> by_hash_;
  int64_t total_refs_ = 0;
};

}  // namespace deepinfer::sched
