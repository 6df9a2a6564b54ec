// The V4.1 Engram's compressed vocabulary (MODEL_V41.md §5.1): token ids whose decoded
// text normalizes to the same key share one compressed id.
#pragma once

#include <cstdint>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace deepinfer {

struct CompressedVocab {
  // [tokenizer.hf_len()]: token id -> compressed id. The reference iterates
  // range(len(tokenizer)), so with non-contiguous ids the highest ids have no entry.
  std::vector<int64_t> token_map;
  int64_t size = 0;                // number of distinct keys
};

// For each id in order: text = decode([id]) with special tokens kept; the key is the
// raw token string when text contains U+FFFD, else engram_normalize(text), or text
// itself when that is empty. Compressed ids number the keys by first appearance.
CompressedVocab build_compressed_vocab(const Tokenizer& tokenizer);

}  // namespace deepinfer
