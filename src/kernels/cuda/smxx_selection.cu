#include <algorithm>
#include <atomic>

#include "common/env.h"
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


// The one-launch decode path (NOTES 50). 16 warps a block, one selection per warp at a time.
constexpr int kFuseThreads = 512;
constexpr int kFuseWarps = kFuseThreads / 32;
constexpr int64_t kFuseMaxSmem = 48 * 1024;  // bitmap + word prefix, 8 bytes per 32 entries

__device__ __forceinline__ int warp_inclusive_scan(int v) {
  const int lane = threadIdx.x & 31;
  for (int o = 1; o < 32; o <<= 1) {
    const int u = __shfl_up_sync(0xffffffffu, v, o);
    if (lane >= o) v += u;
  }
  return v;
}

// Block-wide exclusive scan of one int per thread (kFuseThreads threads); sh: kFuseWarps ints.
__device__ int block_exclusive_scan_int(int v, int* sh, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int incl = warp_inclusive_scan(v);
  if (lane == 31) sh[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const int w = warp_inclusive_scan(lane < kFuseWarps ? sh[lane] : 0);
    __syncwarp();
    if (lane < kFuseWarps) sh[lane] = w;
  }
  __syncthreads();
  *total = sh[kFuseWarps - 1];
  return (warp > 0 ? sh[warp - 1] : 0) + incl - v;
}

// Grid (selection chunks of kFuseWarps, tokens); token t is item token_item[t], alone in it.
// Rank of entry e = flagged entries below e = the popcount prefix of the bitmap's words
// before e's word + the bits below e in it: the exclusive scan rank_kernel computes.
__global__ void __launch_bounds__(kFuseThreads) decode_lists_kernel(SelectionListArgs a, int64_t words_cap) {
  extern __shared__ uint32_t fuse_smem[];
  uint32_t* bits = fuse_smem;                                  // [words_cap]
  int* pre = reinterpret_cast<int*>(fuse_smem + words_cap);    // [words_cap]
  __shared__ int64_t part[kFuseWarps];
  __shared__ int scan_sh[kFuseWarps];
  const int64_t t = blockIdx.y, g = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t item = a.token_item[t];
  const int64_t* sel = a.item_sel[item];
  const int64_t cnt = sel != nullptr ? sel[t] : 0;
  if (g > 0 && g * kFuseWarps >= cnt) return;  // no selection of this chunk (uniform per block)
  const int64_t* info = a.item_info + item * kSelItemCols;
  const int64_t nk = sel != nullptr ? info[kSelEntries] : 0;
  const int64_t words = (nk + 31) / 32;
  if (words > words_cap) {  // outside the host's max_entries: the caller's bug, reported as bad
    if (threadIdx.x == 0) *a.bad = 1;
    return;
  }
  // Selected ids of the tokens before t: this token's offset past the window ids.
  int64_t before = 0;
  for (int64_t u = threadIdx.x; u < t; u += kFuseThreads) before += selected_count(a, u);
  for (int o = 16; o > 0; o >>= 1) before += __shfl_xor_sync(0xffffffffu, before, o);
  if (lane == 0) part[warp] = before;
  for (int64_t w = threadIdx.x; w < words; w += kFuseThreads) bits[w] = 0;
  __syncthreads();
  const int64_t* sids = sel + a.n + t * a.top_k;  // read only when cnt > 0 (sel non-null)
  for (int64_t j = threadIdx.x; j < cnt; j += kFuseThreads) {
    const int64_t id = sids[j];
    if (id >= 0 && id < nk) atomicOr(&bits[id >> 5], 1u << (id & 31));
    else if (g == 0) *a.bad = 1;
  }
  __syncthreads();
  // Word prefix: each thread a contiguous run of words.
  const int64_t per = (words + kFuseThreads - 1) / kFuseThreads;
  const int64_t w0 = min(words, int64_t(threadIdx.x) * per), w1 = min(words, w0 + per);
  int own = 0;
  for (int64_t w = w0; w < w1; ++w) own += __popc(bits[w]);
  int total = 0;
  int run = block_exclusive_scan_int(own, scan_sh, &total);
  for (int64_t w = w0; w < w1; ++w) {
    pre[w] = run;
    run += __popc(bits[w]);
  }
  int64_t sel_before = 0;
  for (int k = 0; k < kFuseWarps; ++k) sel_before += part[k];
  __syncthreads();
  const int64_t wb = a.w_offsets[t], wl = a.w_offsets[t + 1] - wb, o = wb + sel_before;
  const int64_t comp_base = info[kSelCompBase], bound = info[kSelBound];
  if (g == 0) {
    for (int64_t j = threadIdx.x; j < wl; j += kFuseThreads) a.ids[o + j] = a.w_ids[wb + j];
    if (threadIdx.x == 0) {
      a.offsets[t + 1] = a.w_offsets[t + 1] + sel_before + cnt;
      if (t == 0) a.offsets[0] = a.w_offsets[0];
      if (total > bound) *a.bad = 1;
      a.count[item] = min(int64_t(total), bound);
    }
  }
  // This chunk's selections: the id, and (rank < bound, as the list holds) its pool row.
  // A repeated id writes its row again with the same bytes.
  const int64_t epb = a.entries_per_block;
  for (int64_t j = g * kFuseWarps + warp; j < cnt; j += int64_t(gridDim.x) * kFuseWarps) {
    const int64_t id = sids[j];
    const bool ok = id >= 0 && id < nk;
    // An id outside the entries gets rank 0, as ids_kernel's rank[0] (it set *bad).
    const int64_t r = ok ? int64_t(pre[id >> 5]) + __popc(bits[id >> 5] & ((1u << (id & 31)) - 1u)) : 0;
    if (lane == 0) a.ids[o + wl + j] = comp_base + r;
    if (ok && r < bound) {
      const int64_t src_row = a.tables[info[kSelTableBegin] + id / epb] * epb + id % epb;
      const float4* s = reinterpret_cast<const float4*>(a.entries + src_row * a.dim);
      float4* d = reinterpret_cast<float4*>(a.pool + (comp_base + r) * a.dim);
#pragma unroll 4
      for (int64_t i = lane; i < a.dim / 4; i += 32) d[i] = s[i];
    }
  }
}

std::atomic<int> g_sel_fuse{-1};

}  // namespace

void selection_set_fuse(int mode) { g_sel_fuse.store(mode < 0 ? -1 : mode != 0 ? 1 : 0); }

namespace {
// -1 unset, 0, 1: DEEPINFER_SEL_FUSE as read once.
int sel_fuse_env() {
  static const int env = [] {
    const EnvDigit e = env_digit("DEEPINFER_SEL_FUSE", 0, 1);  // invalid: the model refuses it at load
    return e.valid ? e.value : -1;
  }();
  return env;
}
}  // namespace

bool selection_fuse_for(int64_t n) {
  const int forced = g_sel_fuse.load(std::memory_order_relaxed);
  if (forced >= 0) return forced == 1;
  const int env = sel_fuse_env();
  return env >= 0 ? env == 1 : n <= kSelFuseDefaultMaxRows;
}

cudaError_t build_selection_lists(const SelectionListArgs& a, cudaStream_t stream) {
  if (a.items <= 0 || a.n <= 0 || a.top_k < 0 || a.dim <= 0 || a.dim % 4 != 0 || a.entries_per_block <= 0 ||
      a.max_entries < 0 || a.max_bound < 0 || a.n > INT32_MAX || a.items > 65535)
    return cudaErrorInvalidValue;
  if (!a.item_info || !a.item_sel || !a.token_item || !a.count || !a.w_offsets || !a.w_ids || !a.offsets ||
      !a.ids || !a.bad || (a.max_entries > 0 && (!a.flags || !a.rank || !a.list || !a.entries || !a.tables || !a.pool)))
    return cudaErrorInvalidValue;
  const int64_t words_cap = (a.max_entries + 31) / 32;
  const int64_t smem = 8 * words_cap;
  if (a.one_token_per_item && a.items == a.n && a.max_entries > 0 && smem <= kFuseMaxSmem && a.n <= 65535 &&
      selection_fuse_for(a.n)) {
    const int64_t chunks = std::max<int64_t>(1, (a.top_k + kFuseWarps - 1) / kFuseWarps);
    decode_lists_kernel<<<dim3(unsigned(chunks), unsigned(a.n)), kFuseThreads, size_t(smem), stream>>>(a, words_cap);
    return cudaGetLastError();
  }
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
