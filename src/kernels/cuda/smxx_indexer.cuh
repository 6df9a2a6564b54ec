// The CSA2 lightning indexer (MODEL_V41.md §4.4-4.7) on the GPU:
//   indexer_score   I[t, s] = sum_h w[t, h] * relu(q[t, h] . k[s]) * softmax_scale
//   indexer_mask    scores of entries not yet visible to query t (s >= (pos_t + 1) / ratio)
//                   or outside a level-1 candidate mask become -inf, in place
//   block_max       level-1 block scores: max over each candidate block, the block of
//                   the newest visible entry pinned to +inf
//   candidate_mask  0/1 mask [n, num_keys] from the kept block ids (topk_rows output)
// Selection itself is topk_rows (smxx_topk.cuh). fp32 inputs: the queries and keys
// arrive RoPE-rotated and FP4 fake-quantized; an FP4/FP8 tensor-core score kernel
// is the later fast path.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

struct IndexerScoreArgs {
  const float* q = nullptr;     // [n, heads, head_dim]
  const float* w = nullptr;     // [n, heads]
  const float* keys = nullptr;  // [num_keys, head_dim]
  int64_t n = 0, heads = 0, head_dim = 0, num_keys = 0;
  float softmax_scale = 1.0f;
  float* scores = nullptr;  // [n, num_keys]
};
cudaError_t indexer_score(const IndexerScoreArgs& a, cudaStream_t stream);

struct IndexerMaskArgs {
  float* scores = nullptr;  // [n, num_keys], in place
  int64_t n = 0, num_keys = 0;
  const int64_t* positions = nullptr;     // [n]
  int64_t ratio = 1;
  const uint8_t* candidates = nullptr;    // [n, num_keys] 0/1, or null
};
cudaError_t indexer_mask(const IndexerMaskArgs& a, cudaStream_t stream);

struct BlockMaxArgs {
  const float* scores = nullptr;  // [n, num_keys] (already masked)
  int64_t n = 0, num_keys = 0, block_size = 1;
  const int64_t* positions = nullptr;  // [n]
  int64_t ratio = 1;
  float* out = nullptr;  // [n, ceil(num_keys / block_size)]
};
cudaError_t block_max(const BlockMaxArgs& a, cudaStream_t stream);

struct CandidateMaskArgs {
  const int64_t* block_ids = nullptr;  // [n, k], -1 = none
  int64_t n = 0, k = 0, num_keys = 0, block_size = 1;
  uint8_t* mask = nullptr;  // [n, num_keys]
};
cudaError_t candidate_mask(const CandidateMaskArgs& a, cudaStream_t stream);

}  // namespace deepinfer::kernels
