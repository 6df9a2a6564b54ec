#include "tokenizer/engram_vocab.h"

#include <string>
#include <unordered_map>

#include "tokenizer/normalize.h"

namespace deepinfer {

CompressedVocab build_compressed_vocab(const Tokenizer& tokenizer) {
  CompressedVocab vocab;
  vocab.token_map.resize(size_t(tokenizer.hf_len()));
  std::unordered_map<std::string, int64_t> key_ids;
  for (int64_t id = 0; id < tokenizer.hf_len(); ++id) {
    const std::string text = tokenizer.decode({id}, /*skip_special_tokens=*/false);
    std::string key;
    if (text.find("\xEF\xBF\xBD") != std::string::npos) {
      key = tokenizer.id_to_token(id);
    } else {
      key = engram_normalize(text);
      if (key.empty()) key = text;
    }
    const auto [it, inserted] = key_ids.emplace(std::move(key), int64_t(key_ids.size()));
    vocab.token_map[size_t(id)] = it->second;
  }
  vocab.size = int64_t(key_ids.size());
  return vocab;
}

}  // namespace deepinfer
