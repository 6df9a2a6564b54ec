// The CSA2 lightning indexer (MODEL_V41.md §4.4-4.7) on the GPU:
//   indexer_score   I[t, s] = sum_h w[t, h] * relu(q[t, h] . k[s]) * softmax_scale
//   indexer_mask    scores of entries not yet visible to query t (s >= (pos_t + 1) / ratio)
//                   or outside a level-1 candidate mask become -inf, in place
//   block_max       level-1 block scores: max over each candidate block, the block of
//                   the newest visible entry pinned to +inf
//   candidate_mask  0/1 mask [n, num_keys] from the kept block ids (topk_rows output)
// Selection itself is topk_rows (smxx_topk.cuh). fp32 inputs: the queries and keys
// arrive RoPE-rotated and FP4 fake-quantized; the paged score runs on the tensor cores
// at V4.1's shape (see PagedIndexerScoreArgs).
//
// Batched (paged) variants, one launch for all query rows of all sequences of a step:
// every row carries its own key count and offsets in row_info [rows, kRowInfoCols]:
//   kRowKeys   number of keys the row scores (0: row skipped)
//   kRowScore  offset of the row's scores in the ragged score buffer (also of its
//              level-1 candidate mask, which has the scores' layout)
//   kRowTable  offset of the row's block table in `tables`
//   kRowCand   offset of the row's level-2 candidate mask in candidates_in, -1: none
// Key e of a row lives in the paged pool at row
//   tables[table + e / entries_per_block] * entries_per_block + e % entries_per_block,
// so keys are read in place (no per-sequence copy). Each row's arithmetic is that of
// the per-sequence kernels, whatever the other rows: results are batch-invariant.
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

constexpr int kRowKeys = 0, kRowScore = 1, kRowTable = 2, kRowCand = 3, kRowInfoCols = 4;

// kAuto: the tensor-core kernel at heads 32 / head_dim 128 (V4.1's indexer), else SIMT;
// from 1024 rows its grouped-rows form (kMmaRows: several rows of a block share the key
// loads; bitwise the per-row kMma kernel's scores).
// kWgmma: warpgroup MMA over 16 rows per block (sm_90a; bitwise kMmaRows on bf16-exact
// operands, its per-warp code otherwise); kAuto takes it from 1024 rows on compute
// capability 9.0 unless DEEPINFER_INDEXER_WGMMA=0 (NOTES 43).
enum class IndexerScorePath { kAuto, kSimt, kMma, kMmaRows, kWgmma };

struct PagedIndexerScoreArgs {
  const float* q = nullptr;        // [rows, heads, head_dim]
  const float* w = nullptr;        // [rows, heads]
  const float* keys = nullptr;     // paged pool [blocks * entries_per_block, head_dim]
  const int64_t* tables = nullptr; // concatenated block tables
  const int64_t* row_info = nullptr;  // [rows, kRowInfoCols]
  int64_t rows = 0, heads = 0, head_dim = 0, entries_per_block = 1;
  int64_t max_keys = 0;  // >= every row's key count (sizes the grid)
  float softmax_scale = 1.0f;
  float* scores = nullptr;  // ragged, row t at row_info[t][kRowScore]
  // Optional: with positions [rows], a kernel may leave the scores of keys at or past a row's
  // visible count (positions[t] + 1) / ratio unwritten (indexer_mask_ragged sets them to -inf;
  // the wgmma kernel skips them, the others ignore this).
  const int64_t* positions = nullptr;
  int64_t ratio = 1;
  IndexerScorePath path = IndexerScorePath::kAuto;  // tests and the bench force one
};
// head_dim must be a multiple of 4 (rows are read as float4). The tensor-core path
// (bf16 MMAs on an exact hi / mid / lo split of the fp32 operands; one MMA per tile
// when q and the keys are bf16-exact, as the model's FP4 values are) needs heads 32
// and head_dim 128.
cudaError_t indexer_score_paged(const PagedIndexerScoreArgs& a, cudaStream_t stream);
// kAuto's choice of the wgmma kernel at prefill sizes: -1 (default) DEEPINFER_INDEXER_WGMMA,
// 0 off, 1 on (the bench's in-process A/B).
void indexer_score_set_wgmma(int mode);

struct RaggedMaskArgs {
  float* scores = nullptr;  // ragged, in place
  const int64_t* row_info = nullptr;
  int64_t rows = 0, max_keys = 0;
  const int64_t* positions = nullptr;   // [rows]
  int64_t ratio = 1;
  const uint8_t* candidates = nullptr;  // level-2 masks (kRowCand), or null
};
cudaError_t indexer_mask_ragged(const RaggedMaskArgs& a, cudaStream_t stream);

struct RaggedBlockMaxArgs {
  const float* scores = nullptr;  // ragged (already masked)
  const int64_t* row_info = nullptr;
  int64_t rows = 0, max_keys = 0, block_size = 1;
  const int64_t* positions = nullptr;  // [rows]
  int64_t ratio = 1;
  float* out = nullptr;         // [rows, ld] with ld = ceil(max_keys / block_size)
  int64_t* num_blocks = nullptr;  // [rows] ceil(keys / block_size) of each row
};
cudaError_t block_max_ragged(const RaggedBlockMaxArgs& a, cudaStream_t stream);

struct RaggedCandidateMaskArgs {
  const int64_t* block_ids = nullptr;  // [rows, k], -1 = none
  const int64_t* row_info = nullptr;
  int64_t rows = 0, k = 0, max_keys = 0, block_size = 1;
  uint8_t* mask = nullptr;  // ragged, the scores' layout
};
cudaError_t candidate_mask_ragged(const RaggedCandidateMaskArgs& a, cudaStream_t stream);

}  // namespace deepinfer::kernels
