// Sink-attention entry lists built on the device from the indexer's device-resident
// selections (the compressed branch of MODEL_V41.md §4), so that no selection travels
// through the host. For each item (sequence) of a step the attention pool holds
//   [its window ring | its new tokens | its distinct selected compressed entries],
// the last part starting at pool row comp_base, in ascending entry order; each query's
// list is its window ids (built by the host, which knows them) followed by the pool
// rows of its selected entries in selection order. This is exactly the list the host
// built before (sorted, deduplicated union per item), so attention sees the same rows.
//
// One call, five launches:
//   mark     flags[flag_begin + id] = 1 for every id an item's queries selected
//   rank     per item, one block: rank[flag_begin + e] = number of flagged entries
//            below e; list[list_begin + rank] = e; count[item] = flagged entries
//   gather   pool[comp_base + r] = entry list[list_begin + r] of the item's paged
//            history (entries_per_block rows per block, through the block table)
//   offsets  one block: offsets[t + 1] = w_offsets[t + 1] + selected count of tokens <= t
//   ids      per token: window ids, then comp_base + rank[flag_begin + id]
// Ids outside [0, num_entries) are skipped and set *bad (the caller checks it once
// per step); they cannot occur when the selection ranks the same source's entries.
//
// Decode steps (one_token_per_item: token t is item t, as in a graph step's bucket) can
// take one launch instead (NOTES 50; selection_set_fuse / DEEPINFER_SEL_FUSE): a grid of
// (selection chunks, tokens); every block builds its item's flags as a bitmap in shared
// memory (cleared there, so no memset node), ranks its own chunk of selections by the
// bitmap's popcount prefix, writes those ids and gathers their pool rows; the chunk-0
// block also writes the token's window ids, its offset (from the selected counts of the
// tokens before it) and count. The same ids, offsets, pool rows, count and *bad as the
// five launches; flags / rank / list are not written (only those launches use them).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

// item_info columns
constexpr int kSelFlagBegin = 0, kSelEntries = 1, kSelCompBase = 2, kSelTableBegin = 3, kSelListBegin = 4,
              kSelBound = 5, kSelItemCols = 6;

struct SelectionListArgs {
  const int64_t* item_info = nullptr;   // [items, kSelItemCols]; kSelBound >= the item's distinct selected entries
  const int64_t* const* item_sel = nullptr;  // [items] selection buffer (counts [n], then ids [n, top_k]), null: none
  const int64_t* token_item = nullptr;  // [n] item of each token
  int64_t items = 0, n = 0, top_k = 0;
  int64_t max_entries = 0, max_bound = 0;  // over items (grid sizes)
  int64_t flag_count = 0;     // sum of num_entries over items
  uint8_t* flags = nullptr;   // [flag_count] scratch (cleared here)
  int32_t* rank = nullptr;    // [flag_count] scratch
  int64_t* list = nullptr;    // [sum of bounds] scratch
  int64_t* count = nullptr;   // [items] scratch
  const float* entries = nullptr;  // paged history [blocks * entries_per_block, dim]
  const int64_t* tables = nullptr;
  int64_t entries_per_block = 1, dim = 0;
  float* pool = nullptr;           // [*, dim]
  const int64_t* w_offsets = nullptr;  // [n + 1] the window part (host-built CSR)
  const int64_t* w_ids = nullptr;
  int64_t* offsets = nullptr;  // [n + 1]
  int64_t* ids = nullptr;      // [w_offsets[n] + selected ids]
  int* bad = nullptr;          // set to 1 on an out-of-range id
  bool one_token_per_item = false;  // token t is item t (items == n): the one-launch path may run
};
cudaError_t build_selection_lists(const SelectionListArgs& a, cudaStream_t stream);
// The one-launch decode path: -1 (default) DEEPINFER_SEL_FUSE, 0 off, 1 on at every row count.
// With neither the setter nor the variable: on for steps of <= kSelFuseDefaultMaxRows rows
// (measured faster at one row, run 46: the 7 layers 1.620 -> 1.529 ms; at eight rows, run 47:
// 4.436 -> 4.368 ms, 321.5 -> 329.3 tokens/s over 40 layers; batch 256 was not measured, so
// larger steps keep the five launches until it is). It runs only where the args allow it
// (one_token_per_item, entries > 0, the bitmap within 48 KiB of shared memory: <= 196,608
// entries); elsewhere build_selection_lists takes the five launches.
constexpr int64_t kSelFuseDefaultMaxRows = 8;
void selection_set_fuse(int mode);
bool selection_fuse_for(int64_t n);  // whether a step of n rows takes it

}  // namespace deepinfer::kernels
