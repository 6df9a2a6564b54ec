// Prints DeepInfer's Engram compressed-vocabulary map for a tokenizer.json: the number of
// compressed ids, then one compressed id per token id. bench/tokenizer/engram_map_vs_reference.py
// compares it with transformers' build_compressed_token_map.
//   engram_map_dump TOKENIZER_JSON > map.txt
#include <cstdio>

#include "tokenizer/engram_vocab.h"
#include "tokenizer/tokenizer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: engram_map_dump TOKENIZER_JSON\n");
    return 2;
  }
  const auto tok = deepinfer::Tokenizer::load(argv[1]);
  const deepinfer::CompressedVocab vocab = deepinfer::build_compressed_vocab(*tok);
  std::printf("%lld\n", static_cast<long long>(vocab.size));
  for (const int64_t id : vocab.token_map) std::printf("%lld\n", static_cast<long long>(id));
  return 0;
}
