// Indexer scores and selection on the GPU (kernels/cuda/smxx_indexer, smxx_topk).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/cuda/smxx_indexer.cuh"
#include "kernels/cuda/smxx_topk.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer::ops::cuda {

void indexer_score(const IndexerScoreParams& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.n >= 0 && p.heads > 0 && p.head_dim > 0 && p.num_keys >= 0, "indexer_score: bad shape");
  kernels::IndexerScoreArgs a;
  a.q = p.q;
  a.w = p.w;
  a.keys = p.keys;
  a.n = p.n;
  a.heads = p.heads;
  a.head_dim = p.head_dim;
  a.num_keys = p.num_keys;
  a.softmax_scale = p.softmax_scale;
  a.scores = p.scores;
  CUDA_CHECK(kernels::indexer_score(a, stream));
}

void indexer_select(const IndexerSelectParams& p, int64_t* ids, int64_t* counts, cudaStream_t stream) {
  CUDA_OP_CHECK(p.n >= 0 && p.num_keys >= 0 && p.ratio > 0 && p.top_k >= 0, "indexer_select: bad shape");
  if (p.n == 0) return;
  CUDA_OP_CHECK(counts != nullptr && (p.top_k == 0 || ids != nullptr), "indexer_select: null output");
  const bool level1 = p.candidates_out != nullptr;
  CUDA_CHECK(kernels::indexer_mask({p.scores, p.n, p.num_keys, p.positions, p.ratio,
                                    level1 ? nullptr : p.candidates_in},
                                   stream));
  if (level1) {
    CUDA_OP_CHECK(p.candidate_block_size > 0 && p.candidate_topk_blocks >= 0, "indexer_select: bad candidate level");
    const int64_t bs = p.candidate_block_size, nb = (p.num_keys + bs - 1) / bs, kb = p.candidate_topk_blocks;
    float* blocks = nullptr;
    int64_t* block_ids = nullptr;
    CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&blocks), sizeof(float) * size_t(std::max<int64_t>(1, p.n * nb)), stream));
    CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&block_ids), sizeof(int64_t) * size_t(std::max<int64_t>(1, p.n * kb)), stream));
    CUDA_CHECK(kernels::block_max({p.scores, p.n, p.num_keys, bs, p.positions, p.ratio, blocks}, stream));
    CUDA_CHECK(kernels::topk_rows({blocks, p.n, nb, nb, kb, block_ids, nullptr}, stream));
    CUDA_CHECK(kernels::candidate_mask({kb > 0 ? block_ids : nullptr, p.n, kb, p.num_keys, bs, p.candidates_out}, stream));
    CUDA_CHECK(cudaFreeAsync(blocks, stream));
    CUDA_CHECK(cudaFreeAsync(block_ids, stream));
  }
  if (p.top_k == 0 || p.num_keys == 0) {
    CUDA_CHECK(cudaMemsetAsync(counts, 0, sizeof(int64_t) * size_t(p.n), stream));
    if (p.top_k > 0) CUDA_CHECK(cudaMemsetAsync(ids, 0xff, sizeof(int64_t) * size_t(p.n * p.top_k), stream));
    return;
  }
  CUDA_CHECK(kernels::topk_rows({p.scores, p.n, p.num_keys, p.num_keys, p.top_k, ids, counts}, stream));
}

Selection indexer_select(const IndexerSelectParams& p, cudaStream_t stream) {
  Selection sel;
  sel.offsets.assign(1, 0);
  if (p.n == 0) return sel;
  int64_t *ids = nullptr, *counts = nullptr;
  const size_t id_count = size_t(std::max<int64_t>(1, p.n * p.top_k));
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&ids), sizeof(int64_t) * id_count, stream));
  CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&counts), sizeof(int64_t) * size_t(p.n), stream));
  indexer_select(p, ids, counts, stream);
  std::vector<int64_t> h_ids(id_count), h_counts(p.n);
  CUDA_CHECK(cudaMemcpyAsync(h_ids.data(), ids, sizeof(int64_t) * id_count, cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaMemcpyAsync(h_counts.data(), counts, sizeof(int64_t) * size_t(p.n), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaFreeAsync(ids, stream));
  CUDA_CHECK(cudaFreeAsync(counts, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  for (int64_t t = 0; t < p.n; ++t) {
    sel.ids.insert(sel.ids.end(), h_ids.begin() + t * p.top_k, h_ids.begin() + t * p.top_k + h_counts[t]);
    sel.offsets.push_back(int64_t(sel.ids.size()));
  }
  return sel;
}

void indexer_score_paged(const IndexerScorePagedParams& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.rows >= 0 && p.heads > 0 && p.head_dim > 0 && p.max_keys >= 0 && p.entries_per_block > 0,
                "indexer_score_paged: bad shape");
  CUDA_OP_CHECK(p.head_dim % 4 == 0, "indexer_score_paged: head_dim must be a multiple of 4");
  CUDA_OP_CHECK(reinterpret_cast<uintptr_t>(p.q) % 16 == 0 && reinterpret_cast<uintptr_t>(p.keys) % 16 == 0,
                "indexer_score_paged: q and keys must be 16-byte aligned");
  kernels::PagedIndexerScoreArgs a;
  a.q = p.q;
  a.w = p.w;
  a.keys = p.keys;
  a.tables = p.tables;
  a.row_info = p.row_info;
  a.rows = p.rows;
  a.heads = p.heads;
  a.head_dim = p.head_dim;
  a.entries_per_block = p.entries_per_block;
  a.max_keys = p.max_keys;
  a.softmax_scale = p.softmax_scale;
  a.scores = p.scores;
  a.positions = p.positions;
  a.ratio = p.ratio;
  CUDA_CHECK(kernels::indexer_score_paged(a, stream));
}

void indexer_select_batch(const IndexerSelectBatchParams& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.rows >= 0 && p.max_keys >= 0 && p.ratio > 0 && p.top_k >= 0, "indexer_select_batch: bad shape");
  if (p.rows == 0) return;
  CUDA_OP_CHECK(p.counts != nullptr && (p.top_k == 0 || p.ids != nullptr) && p.row_info != nullptr &&
                    p.positions != nullptr && (p.max_keys == 0 || p.scores != nullptr),
                "indexer_select_batch: null pointer");
  if (p.max_keys == 0) {  // no row has keys: nothing to mask or rank
    CUDA_CHECK(cudaMemsetAsync(p.counts, 0, sizeof(int64_t) * size_t(p.rows), stream));
    if (p.top_k > 0) CUDA_CHECK(cudaMemsetAsync(p.ids, 0xff, sizeof(int64_t) * size_t(p.rows * p.top_k), stream));
    return;
  }
  const bool level1 = p.candidates_out != nullptr;
  CUDA_CHECK(kernels::indexer_mask_ragged(
      {p.scores, p.row_info, p.rows, p.max_keys, p.positions, p.ratio, level1 ? nullptr : p.candidates_in}, stream));
  if (level1) {
    CUDA_OP_CHECK(p.candidate_block_size > 0 && p.candidate_topk_blocks >= 0,
                  "indexer_select_batch: bad candidate level");
    const int64_t bs = p.candidate_block_size, ld = std::max<int64_t>(1, (p.max_keys + bs - 1) / bs),
                  kb = p.candidate_topk_blocks;
    float* blocks = nullptr;
    int64_t *nbs = nullptr, *block_ids = nullptr;
    CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&blocks), sizeof(float) * size_t(p.rows * ld), stream));
    CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&nbs), sizeof(int64_t) * size_t(p.rows), stream));
    CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&block_ids),
                               sizeof(int64_t) * size_t(std::max<int64_t>(1, p.rows * kb)), stream));
    CUDA_CHECK(kernels::block_max_ragged({p.scores, p.row_info, p.rows, p.max_keys, bs, p.positions, p.ratio, blocks, nbs},
                                         stream));
    kernels::TopkArgs t;
    t.v = blocks;
    t.rows = p.rows;
    t.size = ld;
    t.ld = ld;
    t.k = kb;
    t.ids = block_ids;
    t.row_size = nbs;
    CUDA_CHECK(kernels::topk_rows(t, stream));
    CUDA_CHECK(kernels::candidate_mask_ragged(
        {kb > 0 ? block_ids : nullptr, p.row_info, p.rows, kb, p.max_keys, bs, p.candidates_out}, stream));
    CUDA_CHECK(cudaFreeAsync(blocks, stream));
    CUDA_CHECK(cudaFreeAsync(nbs, stream));
    CUDA_CHECK(cudaFreeAsync(block_ids, stream));
  }
  if (p.top_k == 0) {
    CUDA_CHECK(cudaMemsetAsync(p.counts, 0, sizeof(int64_t) * size_t(p.rows), stream));
    return;
  }
  // Every row ranks its own keys with the same k: a row with fewer finite scores than
  // k keeps them all, which is the oracle's min(top_k, num_keys) rule.
  kernels::TopkArgs t;
  t.v = p.scores;
  t.rows = p.rows;
  t.size = p.max_keys;
  t.ld = p.max_keys;
  t.k = p.top_k;
  t.ids = p.ids;
  t.counts = p.counts;
  t.row_begin = p.row_info + kernels::kRowScore;
  t.row_size = p.row_info + kernels::kRowKeys;
  t.row_stride = kernels::kRowInfoCols;
  CUDA_CHECK(kernels::topk_rows(t, stream));
}

}  // namespace deepinfer::ops::cuda
