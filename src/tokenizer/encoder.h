// The encoding pipeline of tokenizers' Tokenizer::encode (without the post-processor):
// added tokens that are not normalized are cut out of the raw text, the rest is
// normalized, normalized added tokens are cut out of that, the pre-tokenizer splits what
// remains and the BPE model turns each pre-token into ids.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "tokenizer/added_matcher.h"
#include "tokenizer/bpe.h"
#include "tokenizer/hf_normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace deepinfer {

class Encoder {
 public:
  Encoder(std::vector<AddedTokenSpec> plain, std::vector<AddedTokenSpec> normalized, HfNormalizer normalizer,
          PreTokenizer pre_tokenizer, std::unique_ptr<BpeModel> bpe);

  // `text` must be valid UTF-8 (the caller checks).
  void encode(std::string_view text, bool allow_special, std::vector<int64_t>* out) const;

 private:
  AddedTokenMatcher plain_, normalized_;
  HfNormalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  std::unique_ptr<BpeModel> bpe_;
  bool defer_byte_level_;
};

}  // namespace deepinfer
