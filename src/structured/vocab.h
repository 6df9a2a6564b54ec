// The token vocabulary as the structured-output engine sees it: raw bytes per token id,
// independent of any tokenizer implementation.
//
// VocabIndex sorts the distinct byte strings ("ranks") and lays a trie over them in
// depth-first (= lexicographic) order, so a walk can test every token while sharing
// prefixes and skip a whole subtree when a prefix fails. Build it once per tokenizer and
// share it between grammars and threads.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace deepinfer::structured {

struct TokenVocab {
  // Raw bytes each token id decodes to. Its size is the logits width (for DeepSeek-V4:
  // 129,280, padding ids included). Empty strings mark ids that are never allowed
  // (special and padding tokens).
  std::vector<std::string> token_bytes;
  // Allowed exactly when the grammar can end; -1 if none. Its bytes are ignored.
  int64_t eos_id = -1;
};

// What the mask cache knows about one automaton state (see token_masker.h): the tokens
// accepted whoever called the state's rule, and the ranks left to the real parser.
struct MaskEntry {
  // Accepted token ids, either as a full bitmask (dense) or as a sorted id list.
  std::vector<uint32_t> accepted_words;
  std::vector<int32_t> accepted_ids;
  std::vector<uint32_t> uncertain_ranks;  // sorted
  size_t bytes() const { return accepted_words.size() * 4 + accepted_ids.size() * 4 + uncertain_ranks.size() * 4; }
};

// Mask entries of automaton fragments that recur across grammars (the body of a JSON
// string, a key, a number), keyed by an exact canonical encoding of the fragment. One per
// vocabulary, filled by every TokenMasker on it, so a new grammar's string states cost a
// lookup instead of a walk over the whole vocabulary. Thread-safe; stops growing at its
// byte capacity.
class FragmentEntryCache {
 public:
  explicit FragmentEntryCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}
  std::shared_ptr<const MaskEntry> find(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    return it == map_.end() ? nullptr : it->second;
  }
  // The entry now cached under `key`: `e`, or one another thread inserted first. When the
  // cache is full `e` is returned without being kept.
  std::shared_ptr<const MaskEntry> insert(const std::string& key, std::shared_ptr<const MaskEntry> e) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) return it->second;
    if (bytes_ + e->bytes() + key.size() > capacity_) return e;
    bytes_ += e->bytes() + key.size();
    map_.emplace(key, e);
    return e;
  }
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }
  // Anchors: keys of a few recent fragments whose entries accept much of the vocabulary
  // (string bodies). A new fragment that agrees with one on all short tokens derives its
  // entry from the anchor's (TokenMasker::depth_reference), across grammars.
  void add_anchor(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const std::string& a : anchors_)
      if (a == key) return;
    if (anchors_.size() >= kMaxAnchors) anchors_.erase(anchors_.begin());
    anchors_.push_back(key);
  }
  std::vector<std::string> anchors() const {
    std::lock_guard<std::mutex> lock(mu_);
    return anchors_;
  }
  static constexpr size_t kMaxAnchors = 8;
  size_t bytes() const {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }

 private:
  mutable std::mutex mu_;
  size_t capacity_;
  size_t bytes_ = 0;
  std::unordered_map<std::string, std::shared_ptr<const MaskEntry>> map_;
  std::vector<std::string> anchors_;
};

class VocabIndex {
 public:
  // A trie node: the prefix of its depth along the path from the root (node 0).
  struct Node {
    uint32_t end;         // one past the last node of this subtree
    uint32_t parent;      // node 0's parent is 0
    uint32_t rank_begin;  // the ranks under this node are [rank_begin, rank_end)
    uint32_t rank_end;
    int32_t rank;         // the rank spelled exactly by this node, or -1
    uint16_t depth;
    uint8_t byte;         // the last byte of the prefix (unused at the root)
  };

  // The same trie packed for the mask walks (half the bytes of Node; a full walk is
  // bound by reading them): node i's subtree ends at `end`, `rank` as in Node.
  struct WalkNode {
    uint32_t end;
    int32_t rank;
    uint16_t depth;
    uint8_t byte;
  };

  // InputError when a token is longer than 65,535 bytes or eos_id is out of range.
  explicit VocabIndex(const TokenVocab& vocab);

  size_t vocab_size() const { return vocab_size_; }
  // uint32 words of a bitmask over the vocabulary: ceil(vocab_size / 32).
  size_t mask_words() const { return (vocab_size_ + 31) / 32; }
  int64_t eos_id() const { return eos_id_; }

  uint32_t num_ranks() const { return uint32_t(rank_offset_.size() - 1); }
  std::string_view rank_bytes(uint32_t r) const {
    return std::string_view(bytes_).substr(rank_offset_[r], rank_offset_[r + 1] - rank_offset_[r]);
  }
  std::span<const int32_t> rank_tokens(uint32_t r) const {
    return {rank_token_ids_.data() + rank_token_begin_[r], rank_token_ids_.data() + rank_token_begin_[r + 1]};
  }
  // The rank of a token id, or -1 for ids that are never allowed (empty bytes, EOS).
  int32_t token_rank(int64_t id) const { return id >= 0 && size_t(id) < vocab_size_ ? token_rank_[id] : -1; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<WalkNode>& walk_nodes() const { return walk_nodes_; }
  // The depth-1 node of first byte b (its subtree holds every token starting with b),
  // or 0 when no token starts with b.
  uint32_t first_byte_node(uint8_t b) const { return first_byte_node_[b]; }
  // The first token id of rank r, and whether r has more than one (duplicates).
  int32_t rank_first_token(uint32_t r) const { return rank_token_ids_[rank_token_begin_[r]]; }
  bool rank_has_duplicates(uint32_t r) const { return rank_token_begin_[r + 1] - rank_token_begin_[r] > 1; }
  size_t max_token_bytes() const { return max_token_bytes_; }
  // The trie nodes of depth d (d >= 1), in trie order: their subtrees hold exactly the
  // tokens longer than d - 1 bytes. Empty past max_token_bytes.
  std::span<const uint32_t> nodes_at_depth(size_t d) const {
    if (d == 0 || d >= depth_begin_.size() - 1) return {};
    return {depth_nodes_.data() + depth_begin_[d], depth_nodes_.data() + depth_begin_[d + 1]};
  }
  // How many trie nodes lie deeper than d (the work of a walk of the tokens longer than d).
  size_t nodes_deeper_than(size_t d) const {
    return d + 1 >= depth_begin_.size() ? 0 : depth_nodes_.size() - depth_begin_[d + 1];
  }
  // One past the last rank whose bytes start with the first `len` bytes of rank r.
  uint32_t prefix_rank_end(uint32_t r, size_t len) const;

  // The vocabulary-wide cache of fragment entries (mutable through a const index: it is
  // a cache, and the index is shared as const).
  FragmentEntryCache& fragment_cache() const { return *fragment_cache_; }
  static constexpr size_t kFragmentCacheBytes = size_t(256) << 20;

 private:
  size_t vocab_size_ = 0;
  size_t max_token_bytes_ = 0;
  int64_t eos_id_ = -1;
  std::string bytes_;                  // ranks' bytes, concatenated in rank order
  std::vector<uint32_t> rank_offset_;  // num_ranks + 1
  std::vector<uint32_t> rank_token_begin_;
  std::vector<int32_t> rank_token_ids_;
  std::vector<uint32_t> rank_node_;
  std::vector<int32_t> token_rank_;
  std::vector<Node> nodes_;
  std::vector<WalkNode> walk_nodes_;
  std::vector<uint32_t> depth_nodes_;  // node ids by depth, then trie order
  std::vector<uint32_t> depth_begin_;  // max_token_bytes + 2 entries
  uint32_t first_byte_node_[256] = {};
  std::shared_ptr<FragmentEntryCache> fragment_cache_ = std::make_shared<FragmentEntryCache>(kFragmentCacheBytes);
};

}  // namespace deepinfer::structured
