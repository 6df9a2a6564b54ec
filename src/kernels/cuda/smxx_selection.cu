#include <algorithm>

#include "kernels/cuda/smxx_selection.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kScanThreads = 1024;

__global__ void mark_kernel(SelectionListArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t item = a.token_item[t];
  const int64_t* sel = a.item_sel[item];
  if (sel == nullptr) return;
  const int64_t* info = a.item_info + item * kSelItemCols;
  const int64_t cnt = sel[t], nk = info[kSelEntries];
  const int64_t* ids = sel + a.n + t * a.top_k;
  for (int64_t j = threadIdx.x; j < cnt; j += blockDim.x) {
    const int64_t id = ids[j];
    if (id >= 0 && id < nk) a.flags[info[kSelFlagBegin] + id] = 1;
    else *a.bad = 1;
  }
}

// Block-wide exclusive scan of one int per thread (kScanThreads threads).
__device__ int64_t block_exclusive_scan(int64_t v, int64_t* sh, int64_t* total) {
  const int tid = threadIdx.x;
  sh[tid] = v;
  __syncthreads();
  for (int o = 1; o < kScanThreads; o <<= 1) {
    const int64_t add = tid >= o ? sh[tid - o] : 0;
    __syncthreads();
    sh[tid] += add;
    __syncthreads();
  }
  const int64_t incl = sh[tid];
  *total = sh[kScanThreads - 1];
  __syncthreads();
  return incl - v;
}

// One block per item; each thread owns a contiguous run of the item's flags.
__global__ void __launch_bounds__(kScanThreads) rank_kernel(SelectionListArgs a) {
  __shared__ int64_t sh[kScanThreads];
  const int64_t item = blockIdx.x;
  const int64_t* info = a.item_info + item * kSelItemCols;
  const int64_t nk = a.item_sel[item] != nullptr ? info[kSelEntries] : 0;
  const uint8_t* f = a.flags + info[kSelFlagBegin];
  const int64_t per = (nk + kScanThreads - 1) / kScanThreads;
  const int64_t e0 = min(nk, int64_t(threadIdx.x) * per), e1 = min(nk, e0 + per);
  int64_t own = 0;
  for (int64_t e = e0; e < e1; ++e) own += f[e];
  int64_t total = 0;
  int64_t r = block_exclusive_scan(own, sh, &total);
  const int64_t bound = info[kSelBound];
  int32_t* rank = a.rank + info[kSelFlagBegin];
  int64_t* list = a.list + info[kSelListBegin];
  for (int64_t e = e0; e < e1; ++e) {
    rank[e] = int32_t(r);
    if (f[e]) {
      if (r < bound) list[r] = e;
      ++r;
    }
  }
  if (threadIdx.x == 0) {
    if (total > bound) *a.bad = 1;
    a.count[item] = min(total, bound);
  }
}

// Grid (row tiles of 8, items): one warp per pool row.
__global__ void gather_kernel(SelectionListArgs a) {
  const int64_t item = blockIdx.y;
  const int64_t r = int64_t(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (r >= a.count[item]) return;
  const int64_t* info = a.item_info + item * kSelItemCols;
  const int64_t e = a.list[info[kSelListBegin] + r], epb = a.entries_per_block;
  const int64_t src_row = a.tables[info[kSelTableBegin] + e / epb] * epb + e % epb;
  const float4* s = reinterpret_cast<const float4*>(a.entries + src_row * a.dim);
  float4* d = reinterpret_cast<float4*>(a.pool + (info[kSelCompBase] + r) * a.dim);
  for (int64_t i = threadIdx.x & 31; i < a.dim / 4; i += 32) d[i] = s[i];
}

__device__ __forceinline__ int64_t selected_count(const SelectionListArgs& a, int64_t t) {
  const int64_t* sel = a.item_sel[a.token_item[t]];
  return sel != nullptr ? sel[t] : 0;
}

// One block: running prefix of the tokens' selected counts over chunks of 1024.
__global__ void __launch_bounds__(kScanThreads) offsets_kernel(SelectionListArgs a) {
  __shared__ int64_t sh[kScanThreads];
  int64_t carry = 0;
  if (threadIdx.x == 0) a.offsets[0] = a.w_offsets[0];
  for (int64_t c0 = 0; c0 < a.n; c0 += kScanThreads) {
    const int64_t t = c0 + threadIdx.x;
    const int64_t v = t < a.n ? selected_count(a, t) : 0;
    int64_t total = 0;
    const int64_t excl = block_exclusive_scan(v, sh, &total);
    if (t < a.n) a.offsets[t + 1] = a.w_offsets[t + 1] + carry + excl + v;
    carry += total;
  }
}

__global__ void ids_kernel(SelectionListArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t item = a.token_item[t];
  const int64_t w0 = a.w_offsets[t], wl = a.w_offsets[t + 1] - w0, o = a.offsets[t];
  for (int64_t j = threadIdx.x; j < wl; j += blockDim.x) a.ids[o + j] = a.w_ids[w0 + j];
  const int64_t* sel = a.item_sel[item];
  if (sel == nullptr) return;
  const int64_t* info = a.item_info + item * kSelItemCols;
  const int64_t cnt = sel[t], nk = info[kSelEntries];
  const int64_t* sids = sel + a.n + t * a.top_k;
  const int32_t* rank = a.rank + info[kSelFlagBegin];
  for (int64_t j = threadIdx.x; j < cnt; j += blockDim.x) {
    const int64_t id = sids[j];
    a.ids[o + wl + j] = info[kSelCompBase] + (id >= 0 && id < nk ? rank[id] : 0);
  }
}

}  // namespace

cudaError_t build_selection_lists(const SelectionListArgs& a, cudaStream_t stream) {
  if (a.items <= 0 || a.n <= 0 || a.top_k < 0 || a.dim <= 0 || a.dim % 4 != 0 || a.entries_per_block <= 0 ||
      a.max_entries < 0 || a.max_bound < 0 || a.n > INT32_MAX || a.items > 65535)
    return cudaErrorInvalidValue;
  if (!a.item_info || !a.item_sel || !a.token_item || !a.count || !a.w_offsets || !a.w_ids || !a.offsets ||
      !a.ids || !a.bad || (a.max_entries > 0 && (!a.flags || !a.rank || !a.list || !a.entries || !a.tables || !a.pool)))
    return cudaErrorInvalidValue;
  if (a.max_entries > 0) {
    const cudaError_t e = cudaMemsetAsync(a.flags, 0, size_t(a.flag_count), stream);
    if (e != cudaSuccess) return e;
    mark_kernel<<<unsigned(a.n), 128, 0, stream>>>(a);
    rank_kernel<<<unsigned(a.items), kScanThreads, 0, stream>>>(a);
    if (a.max_bound > 0)
      gather_kernel<<<dim3(unsigned((a.max_bound + 7) / 8), unsigned(a.items)), 256, 0, stream>>>(a);
  } else {
    const cudaError_t e = cudaMemsetAsync(a.count, 0, sizeof(int64_t) * size_t(a.items), stream);
    if (e != cudaSuccess) return e;
  }
  offsets_kernel<<<1, kScanThreads, 0, stream>>>(a);
  ids_kernel<<<unsigned(a.n), 128, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
