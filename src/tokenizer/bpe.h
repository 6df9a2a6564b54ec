// The BPE model of tokenizers (models::bpe): a pre-token's characters become vocabulary
// ids, then adjacent pairs merge by rank, lowest first, leftmost among equals, until no
// pair has a merge. Unknown characters follow the model's byte_fallback, unk_token and
// fuse_unk settings; without them they are dropped, as in tokenizers. dropout is not
// applied (it makes tokenizers' output random); ignore_merges is.
//
// Results are cached per thread (words up to 256 bytes, bounded entries), so concurrent
// encodes never contend.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace deepinfer {

struct BpeOptions {
  std::string continuing_subword_prefix, end_of_word_suffix;
  std::optional<std::string> unk_token;
  bool fuse_unk = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
};

class BpeModel {
 public:
  // `vocab` must outlive the model. `merges` are in rank order and already validated
  // (both parts and their concatenation are vocabulary tokens).
  BpeModel(const std::unordered_map<std::string, int64_t>* vocab,
           const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options);
  ~BpeModel();

  // Whether every byte's ByteLevel character is a vocabulary token and nothing is added
  // around characters, so tokenize_bytes() may skip building the mapped string.
  bool can_tokenize_bytes() const { return byte_ids_ok_; }

  // Appends the ids of one pre-token given as text.
  void tokenize(std::string_view word, std::vector<int64_t>* out) const;
  // Appends the ids of one pre-token given as raw bytes whose ByteLevel mapping is
  // pending: the same ids tokenize(byte_level::encode(bytes)) would give.
  void tokenize_bytes(std::string_view bytes, std::vector<int64_t>* out) const;

 private:
  struct MergeTable;
  void initial_symbols(std::string_view word, std::vector<int32_t>* ids) const;
  void merge(std::vector<int32_t>* ids) const;
  void merge_long(std::vector<int32_t>* ids) const;
  template <typename Init>
  void cached(std::string_view key, bool bytes, std::vector<int64_t>* out, Init init) const;

  const std::unordered_map<std::string, int64_t>* vocab_;
  BpeOptions options_;
  std::unique_ptr<MergeTable> merges_;
  int32_t byte_ids_[256];
  bool byte_ids_ok_ = false;
  uint64_t instance_id_;  // keys the per-thread caches
};

}  // namespace deepinfer
