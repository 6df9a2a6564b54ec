// Engram hash layout (MODEL_V41.md §5.2-5.3): per engram layer, the prime modulus and
// table offset of every (n-gram size, head) column, and the per-shift odd multipliers
// drawn with numpy's default_rng exactly as the reference draws them.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"

namespace deepinfer::v41 {

struct EngramLayout {
  std::vector<int64_t> layer_ids;
  int64_t max_ngram_size = 0;
  int64_t n_heads = 0;
  int64_t head_dim = 0;
  // [layer][column], column c = (n - 2) * n_heads + h for n-gram size n and head h.
  std::vector<std::vector<int64_t>> primes;
  // [layer][column]: prefix sums of that layer's primes (offsets[l][0] = 0).
  std::vector<std::vector<int64_t>> offsets;
  // [layer][shift 0..max_ngram_size-1], all odd.
  std::vector<std::vector<int64_t>> multipliers;
  // [layer]: sum of that layer's primes (= table rows).
  std::vector<int64_t> num_embeddings;
};

// Throws InputError when the config's engram fields are out of range or
// engram_num_embeddings disagrees with the prime sums.
EngramLayout build_engram_layout(const ModelConfig& cfg, int64_t compressed_vocab_size);

// numpy.random.default_rng(seed).integers(0, high, size=count, dtype=np.int64), bit for
// bit (SeedSequence -> PCG64 -> numpy's bounded Lemire sampling). high >= 1.
std::vector<int64_t> numpy_rng_integers(uint64_t seed, int64_t high, int64_t count);

}  // namespace deepinfer::v41
