#include "structured/vocab.h"

#include <algorithm>
#include <numeric>

#include "common/check.h"

namespace deepinfer::structured {

VocabIndex::VocabIndex(const TokenVocab& vocab) : vocab_size_(vocab.token_bytes.size()), eos_id_(vocab.eos_id) {
  DI_CHECK_INPUT(vocab.token_bytes.size() < (size_t(1) << 31), "vocabulary too large");
  DI_CHECK_INPUT(eos_id_ >= -1 && eos_id_ < int64_t(vocab_size_), "eos id ", eos_id_, " outside the vocabulary of ",
                 vocab_size_);
  std::vector<int32_t> ids;
  for (size_t i = 0; i < vocab.token_bytes.size(); ++i) {
    if (vocab.token_bytes[i].empty() || int64_t(i) == eos_id_) continue;
    DI_CHECK_INPUT(vocab.token_bytes[i].size() <= 0xFFFF, "token ", i, " is longer than 65535 bytes");
    ids.push_back(int32_t(i));
    max_token_bytes_ = std::max(max_token_bytes_, vocab.token_bytes[i].size());
  }
  std::stable_sort(ids.begin(), ids.end(),
                   [&](int32_t a, int32_t b) { return vocab.token_bytes[a] < vocab.token_bytes[b]; });
  rank_offset_.push_back(0);
  rank_token_begin_.push_back(0);
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& w = vocab.token_bytes[ids[i]];
    if (i == 0 || w != vocab.token_bytes[ids[i - 1]]) {
      if (i > 0) rank_token_begin_.push_back(uint32_t(rank_token_ids_.size()));
      bytes_ += w;
      rank_offset_.push_back(uint32_t(bytes_.size()));
    }
    rank_token_ids_.push_back(ids[i]);
  }
  token_rank_.assign(vocab_size_, -1);
  if (!ids.empty()) rank_token_begin_.push_back(uint32_t(rank_token_ids_.size()));
  for (uint32_t r = 0; r + 1 < rank_token_begin_.size(); ++r)
    for (uint32_t k = rank_token_begin_[r]; k < rank_token_begin_[r + 1]; ++k) token_rank_[rank_token_ids_[k]] = int32_t(r);

  // The trie, built in one pass over the sorted ranks with the current path on a stack.
  nodes_.push_back({0, 0, 0, 0, -1, 0, 0});
  std::vector<uint32_t> path{0};
  rank_node_.resize(num_ranks());
  auto close_to = [&](size_t depth, uint32_t next_rank) {
    while (path.size() > depth + 1) {
      Node& n = nodes_[path.back()];
      n.end = uint32_t(nodes_.size());
      n.rank_end = next_rank;
      path.pop_back();
    }
  };
  std::string_view prev;
  for (uint32_t r = 0; r < num_ranks(); ++r) {
    const std::string_view w = rank_bytes(r);
    size_t lcp = 0;
    while (lcp < prev.size() && lcp < w.size() && prev[lcp] == w[lcp]) ++lcp;
    close_to(lcp, r);
    for (size_t d = lcp; d < w.size(); ++d) {
      nodes_.push_back({0, path.back(), r, 0, -1, uint16_t(d + 1), uint8_t(w[d])});
      path.push_back(uint32_t(nodes_.size() - 1));
    }
    nodes_[path.back()].rank = int32_t(r);
    rank_node_[r] = path.back();
    prev = w;
  }
  close_to(0, num_ranks());
  nodes_[0].end = uint32_t(nodes_.size());
  nodes_[0].rank_end = num_ranks();
  walk_nodes_.reserve(nodes_.size());
  for (const Node& n : nodes_) walk_nodes_.push_back({n.end, n.rank, n.depth, n.byte});
  for (uint32_t i = 1; i < nodes_.size(); i = nodes_[i].end) first_byte_node_[nodes_[i].byte] = i;
  // Nodes bucketed by depth (a counting sort keeps trie order within a depth).
  depth_begin_.assign(max_token_bytes_ + 2, 0);
  for (size_t i = 1; i < nodes_.size(); ++i) ++depth_begin_[nodes_[i].depth];
  uint32_t sum = 0;
  for (uint32_t& b : depth_begin_) {
    const uint32_t c = b;
    b = sum;
    sum += c;
  }
  std::vector<uint32_t> fill(depth_begin_.begin(), depth_begin_.end());
  depth_nodes_.resize(nodes_.size() - 1);
  for (size_t i = 1; i < nodes_.size(); ++i) depth_nodes_[fill[nodes_[i].depth]++] = uint32_t(i);
}

uint32_t VocabIndex::prefix_rank_end(uint32_t r, size_t len) const {
  uint32_t n = rank_node_[r];
  while (nodes_[n].depth > len) n = nodes_[n].parent;
  return nodes_[n].rank_end;
}

}  // namespace deepinfer::structured
