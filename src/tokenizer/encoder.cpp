#include "tokenizer/encoder.h"

#include <deque>
#include <string>

namespace deepinfer {

Encoder::Encoder(std::vector<AddedTokenSpec> plain, std::vector<AddedTokenSpec> normalized,
                 HfNormalizer normalizer, PreTokenizer pre_tokenizer, std::unique_ptr<BpeModel> bpe)
    : plain_(plain),
      normalized_(normalized),
      normalizer_(std::move(normalizer)),
      pre_tokenizer_(std::move(pre_tokenizer)),
      bpe_(std::move(bpe)),
      defer_byte_level_(pre_tokenizer_.ends_with_plain_byte_level() && bpe_->can_tokenize_bytes()) {}

void Encoder::encode(std::string_view text, bool allow_special, std::vector<int64_t>* out) const {
  std::deque<std::string> arena;
  std::vector<AddedTokenMatcher::Split> raw_splits, normalized_splits;
  std::vector<std::string_view> pre_tokens;
  plain_.split(text, allow_special, &raw_splits);
  for (const auto& raw : raw_splits) {
    if (raw.id >= 0) {
      out->push_back(raw.id);
      continue;
    }
    std::string_view piece = text.substr(raw.begin, raw.end - raw.begin);
    if (piece.empty()) continue;
    if (!normalizer_.is_identity()) {
      arena.push_back(normalizer_.normalize(std::string(piece)));
      piece = arena.back();
      if (piece.empty()) continue;
    }
    normalized_splits.clear();
    normalized_.split(piece, allow_special, &normalized_splits);
    for (const auto& split : normalized_splits) {
      if (split.id >= 0) {
        out->push_back(split.id);
        continue;
      }
      pre_tokens.clear();
      pre_tokenizer_.split(piece.substr(split.begin, split.end - split.begin), defer_byte_level_, &arena,
                           &pre_tokens);
      for (std::string_view word : pre_tokens) {
        if (defer_byte_level_) {
          bpe_->tokenize_bytes(word, out);
        } else {
          bpe_->tokenize(word, out);
        }
      }
    }
  }
}

}  // namespace deepinfer
