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
#include <span>
#include <string>
#include <string_view>
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
  size_t max_token_bytes() const { return max_token_bytes_; }
  // One past the last rank whose bytes start with the first `len` bytes of rank r.
  uint32_t prefix_rank_end(uint32_t r, size_t len) const;

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
};

}  // namespace deepinfer::structured
