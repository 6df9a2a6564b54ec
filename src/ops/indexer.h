// The CSA2 lightning indexer (MODEL_V41.md §4.4-4.7).
//   indexer_score: I[t, s] = sum_h w[t, h] * relu(q[t, h] . k[s]) * softmax_scale
//     (fp32 inputs that were already RoPE-rotated and FP4 fake-quantized).
//   indexer_select: masks entries not yet visible to query t (s >= (pos_t + 1) / ratio),
//     optionally publishes the level-1 candidate block mask (candidate source) or
//     applies one (later index sources), then keeps the top_k finite scores.
//     Exact ties break toward the lower index, at both levels.
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::ops {

struct IndexerScoreParams {
  const float* q = nullptr;     // [n, heads, head_dim]
  const float* w = nullptr;     // [n, heads] head weights (already times heads^-0.5)
  const float* keys = nullptr;  // [num_keys, head_dim]
  int64_t n = 0, heads = 0, head_dim = 0, num_keys = 0;
  float softmax_scale = 1.0f;
  float* scores = nullptr;  // [n, num_keys]
};

struct IndexerSelectParams {
  float* scores = nullptr;  // [n, num_keys], masked in place
  int64_t n = 0, num_keys = 0;
  const int64_t* positions = nullptr;  // [n] absolute token positions
  int64_t ratio = 1;
  // Level 1 (candidate source): writes candidates_out [n, num_keys] (0/1).
  uint8_t* candidates_out = nullptr;
  int64_t candidate_topk_blocks = 0, candidate_block_size = 1;
  // Level 2 (later index sources): entries with candidates_in == 0 are excluded.
  const uint8_t* candidates_in = nullptr;
  int64_t top_k = 0;
};

// Selected entry ids of each query, CSR: ids[offsets[t] : offsets[t + 1]], ascending.
struct Selection {
  std::vector<int64_t> offsets;
  std::vector<int64_t> ids;
};

namespace cpu {
void indexer_score(const IndexerScoreParams& p);
Selection indexer_select(const IndexerSelectParams& p);
}  // namespace cpu

}  // namespace deepinfer::ops
