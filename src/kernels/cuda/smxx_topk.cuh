// Row-wise top-k with exact ties broken toward the lower index, the selection rule
// of the CPU oracle (indexer_select, moe_router). Entries equal to -inf are never
// kept, so a row with fewer than k finite values keeps them all. The kept indices
// are written in ascending index order, which is also the order attention reads
// them in.
//
// One block per row: a 4-pass, 8-bit radix select over order-preserving uint32
// keys finds the k-th largest key T and how many entries equal to T still fit;
// an ordered block scan then emits every index with key > T and the first such
// entries with key == T. The row is read 6 times, from L2 after the first.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

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
};
cudaError_t topk_rows(const TopkArgs& a, cudaStream_t stream);

}  // namespace deepinfer::kernels
