// Row-wise top-k with exact ties broken toward the lower index, the selection rule
// of the CPU oracle (indexer_select, moe_router). Entries equal to -inf are never
// kept, so a row with fewer than k other values keeps them all. NaN (either sign)
// ranks above +inf, as in torch.topk (the oracle's comparator leaves NaN undefined);
// -0 ties with +0. The kept indices are written in ascending index order, which is
// also the order attention reads them in. The result is a function of the row alone
// (no float arithmetic, integer counts only): the same for any batch, any path.
//
// Two paths, the same selection:
//  - kRadix (default): radix select over order-preserving uint32 keys in three digits
//    (12 + 10 + 10 bits). A row is split over a thread-block cluster of 1..8 blocks
//    (8 for a few long rows, so one query does not run on one SM; 1 at 256 rows); each block
//    histograms its slice of the row, the cluster sums the histograms through
//    distributed shared memory and every block finds the same bin. The first pass
//    reads the row from global memory and keeps up to 72 KB of each block's keys in
//    shared memory for the later passes. An ordered emission then writes every index
//    with key > T and the first still-fitting ones with key == T, at offsets given by
//    the cluster's per-block counts.
//  - kOneBlock (the previous kernel, kept to measure against): one block per row,
//    4 passes of 8 bits over the row plus an ordered emission.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

enum class TopkAlgo { kAuto, kRadix, kOneBlock };

struct TopkArgs {
  const float* v = nullptr;  // [rows, ld]; entries [0, size) of each row are ranked
  int64_t rows = 0, size = 0, ld = 0;
  int64_t k = 0;
  int64_t* ids = nullptr;     // [rows, k]: kept indices ascending, then -1 padding
  int64_t* counts = nullptr;  // [rows] number kept (may be null)
  // Ragged rows (both may be null): row r starts at v + row_begin[r * row_stride]
  // instead of r * ld and ranks row_size[r * row_stride] entries instead of size
  // (size stays the bound every row_size must respect).
  const int64_t* row_begin = nullptr;
  const int64_t* row_size = nullptr;
  int64_t row_stride = 1;
  TopkAlgo algo = TopkAlgo::kAuto;  // tests and the bench force a path
  int cluster = 0;  // kRadix blocks per row: 1, 2, 4 or 8; 0 = topk_cluster_size (tests / bench)
};
cudaError_t topk_rows(const TopkArgs& a, cudaStream_t stream);

// Blocks per row the radix path uses for `rows` rows of up to `size` entries (1..8).
int topk_cluster_size(int64_t rows, int64_t size);

}  // namespace deepinfer::kernels
