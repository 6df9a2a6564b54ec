#include <cooperative_groups.h>

#include <atomic>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_device.h"
#include "kernels/cuda/smxx_launch.h"
#include "kernels/cuda/smxx_topk.cuh"

namespace deepinfer::kernels {
namespace {

namespace cg = cooperative_groups;

// Larger float -> larger key. -0 is folded onto +0 because the oracle compares with
// ==, under which they tie (and then the lower index wins). Every NaN maps to the
// largest key. Real keys are >= order_key(-inf) = kKeyNegInf > 0, so 0 is free to
// mark a slot past the row's end.
constexpr uint32_t kKeyNegInf = 0x007fffffu;

__device__ __forceinline__ uint32_t order_key(float f) {
  uint32_t u = __float_as_uint(f);
  if (f != f) return 0xffffffffu;
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// ---- kOneBlock: the previous kernel ------------------------------------------------

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

// Exclusive prefix of `flag` over the block in thread order, plus the block total.
// scratch: kWarps ints. Ends with a barrier, so scratch may be reused right away.
__device__ __forceinline__ int block_exclusive_count(bool flag, int* scratch, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  int before = __popc(ballot & ((1u << lane) - 1u));
  if (lane == 0) scratch[warp] = __popc(ballot);
  __syncthreads();
  int sum = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    const int c = scratch[w];
    if (w < warp) sum += c;
    all += c;
  }
  __syncthreads();
  *total = all;
  return before + sum;
}

__global__ void __launch_bounds__(kThreads) topk_kernel(TopkArgs a) {
  __shared__ int hist[256];
  __shared__ int scan[kWarps];
  __shared__ uint32_t sh_prefix;
  __shared__ int sh_remaining;
  const int64_t row = blockIdx.x;
  const float* v = a.v + (a.row_begin != nullptr ? a.row_begin[row * a.row_stride] : row * a.ld);
  const int64_t size = a.row_size != nullptr ? a.row_size[row * a.row_stride] : a.size;
  int64_t* out = a.ids + row * a.k;

  // Live (not -inf) entries; if they all fit, keep them all.
  int live = 0;
  for (int64_t i = threadIdx.x; i < size; i += kThreads) live += v[i] != -INFINITY;
  for (int o = 16; o > 0; o >>= 1) live += __shfl_xor_sync(0xffffffffu, live, o);
  if ((threadIdx.x & 31) == 0) scan[threadIdx.x >> 5] = live;
  __syncthreads();
  live = 0;
  for (int w = 0; w < kWarps; ++w) live += scan[w];
  __syncthreads();
  const bool take_all = live <= a.k;

  uint32_t prefix = 0;
  int remaining = int(a.k);
  if (!take_all) {
    // Radix select: digit by digit from the top, keep the bin where the k-th
    // largest key lies; `remaining` counts how many still have to come from it.
    for (int shift = 24; shift >= 0; shift -= 8) {
      const uint32_t mask_hi = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
      for (int b = threadIdx.x; b < 256; b += kThreads) hist[b] = 0;
      __syncthreads();
      for (int64_t i = threadIdx.x; i < size; i += kThreads) {
        const uint32_t key = order_key(v[i]);
        if ((key & mask_hi) == prefix) atomicAdd(&hist[(key >> shift) & 0xff], 1);
      }
      __syncthreads();
      if (threadIdx.x < 32) {
        // Lane l owns bins 255 - 8l down to 248 - 8l (descending); a suffix count
        // across lanes finds the bin that holds the remaining-th largest key.
        const int lane = threadIdx.x;
        int own = 0;
        for (int j = 0; j < 8; ++j) own += hist[255 - 8 * lane - j];
        int incl = own;
        for (int o = 1; o < 32; o <<= 1) {
          const int up = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= o) incl += up;
        }
        const int excl = incl - own;
        if (excl < remaining && remaining <= incl) {
          int acc = excl;
          for (int j = 0; j < 8; ++j) {
            const int bin = 255 - 8 * lane - j, c = hist[bin];
            if (acc + c >= remaining) {
              sh_prefix = prefix | (uint32_t(bin) << shift);
              sh_remaining = remaining - acc;
              break;
            }
            acc += c;
          }
        }
      }
      __syncthreads();
      prefix = sh_prefix;
      remaining = sh_remaining;
      __syncthreads();
    }
  }

  // Ordered emission: key > T always; key == T while the ties still fit.
  int eq_base = 0, out_base = 0;
  for (int64_t c0 = 0; c0 < size; c0 += kThreads) {
    const int64_t i = c0 + threadIdx.x;
    const bool in = i < size;
    const float f = in ? v[i] : -INFINITY;
    const uint32_t key = order_key(f);
    bool sel;
    if (take_all) {
      sel = in && f != -INFINITY;
    } else {
      const bool eq = in && key == prefix;
      int eq_total;
      const int eq_rank = eq_base + block_exclusive_count(eq, scan, &eq_total);
      eq_base += eq_total;
      sel = in && (key > prefix || (eq && eq_rank < remaining));
    }
    int sel_total;
    const int pos = out_base + block_exclusive_count(sel, scan, &sel_total);
    if (sel) out[pos] = i;
    out_base += sel_total;
  }
  for (int64_t j = out_base + threadIdx.x; j < a.k; j += kThreads) out[j] = -1;
  if (a.counts != nullptr && threadIdx.x == 0) a.counts[row] = out_base;
}

// ---- kRadix: cluster radix select ---------------------------------------------------

constexpr int kRThreads = 512;
constexpr int kRWarps = kRThreads / 32;
constexpr int kBinsTop = 4096;  // digit 1: key bits 31..20 (sign, exponent, 3 mantissa bits)
constexpr int kBinsLow = 1024;  // digits 2 and 3: bits 19..10, 9..0
constexpr int kMaxCluster = 8;  // the portable cluster size
// Keys a block keeps in shared memory after the first pass: 72 KB (18432 keys), so
// with the 32 KB of histograms two blocks fit on an SM. A slice longer than that
// reads its tail from global memory (L2) in the later passes.
constexpr int kCacheVecs = 4608;
constexpr int kMinSlice = 4096;  // split a row only while each block keeps >= this many keys

// Inclusive scan of x over the block in thread order; *total = the block's sum.
// scratch: kRWarps ints. Begins and ends with a barrier-protected use of scratch.
__device__ __forceinline__ int block_inclusive_scan(int x, int* scratch, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int up = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += up;
  }
  if (lane == 31) scratch[warp] = x;
  __syncthreads();
  int before = 0, all = 0;
#pragma unroll
  for (int w = 0; w < kRWarps; ++w) {
    const int c = scratch[w];
    before += w < warp ? c : 0;
    all += c;
  }
  __syncthreads();
  *total = all;
  return x + before;
}

// One row's slice as 16-byte vectors. The row is indexed from `base`, the 16-byte
// aligned address at or below its start (m = floats between them), so vector j holds
// entries 4j - m .. 4j - m + 3; entries outside [0, size) read as key 0.
struct Slice {
  const float* base;
  int64_t size, v0;  // row length; first vector of this block
  int m, nv, capv;   // misalignment; vectors in this block's slice; of them cached
};

__device__ __forceinline__ uint4 load_keys(const Slice& s, int lv) {
  const int64_t vi = s.v0 + lv, i0 = vi * 4 - s.m;
  if (i0 >= 0 && i0 + 4 <= s.size) {
    const float4 f = __ldg(reinterpret_cast<const float4*>(s.base) + vi);
    return make_uint4(order_key(f.x), order_key(f.y), order_key(f.z), order_key(f.w));
  }
  uint32_t k[4];
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    const int64_t i = i0 + j;
    k[j] = (i >= 0 && i < s.size) ? order_key(__ldg(s.base + vi * 4 + j)) : 0u;
  }
  return make_uint4(k[0], k[1], k[2], k[3]);
}

// Keys of local vector lv: from the shared cache when it holds them (later passes).
__device__ __forceinline__ uint4 fetch_keys(const Slice& s, const uint4* cache, int lv) {
  return lv < s.capv ? cache[lv] : load_keys(s, lv);
}

// Histogram of one digit over the block's slice. Pass 0 counts every live key (not
// -inf, not past the end) by bits 31..20 and fills the cache; later passes count the
// keys whose higher digits equal `prefix`.
template <int kPass>
__device__ __forceinline__ void histogram_pass(const Slice& s, uint4* cache, int* hist, uint32_t prefix) {
  constexpr int kShift = kPass == 0 ? 20 : kPass == 1 ? 10 : 0;
  constexpr int kHiShift = kPass == 0 ? 32 : kShift + 10;
  constexpr uint32_t kMask = kPass == 0 ? kBinsTop - 1 : kBinsLow - 1;
  constexpr int kUnroll = kPass == 0 ? 4 : 2;  // vectors in flight per thread
  auto count = [&](uint32_t key) {
    bool hit;
    if constexpr (kPass == 0) {
      hit = key > kKeyNegInf;
    } else {
      hit = (key >> kHiShift) == (prefix >> kHiShift);
    }
    if (hit) atomicAdd(&hist[(key >> kShift) & kMask], 1);
  };
  for (int lv0 = 0; lv0 < s.nv; lv0 += kRThreads * kUnroll) {
    uint4 k[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int lv = lv0 + u * kRThreads + int(threadIdx.x);
      k[u] = make_uint4(0, 0, 0, 0);
      if (lv < s.nv) {
        if constexpr (kPass == 0) {
          k[u] = load_keys(s, lv);
          if (lv < s.capv) cache[lv] = k[u];
        } else {
          k[u] = fetch_keys(s, cache, lv);
        }
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      count(k[u].x);
      count(k[u].y);
      count(k[u].z);
      count(k[u].w);
    }
  }
}

// Grid: rows * C blocks in clusters of C (a row's blocks); block `rank` of a cluster
// takes the rank-th of C equal runs of the row's vectors. Dynamic shared memory: the
// key cache, capv_max vectors.
__global__ void __launch_bounds__(kRThreads, 2) topk_radix_kernel(TopkArgs a, int capv_max) {
  __shared__ int hist[kBinsTop];  // this block's counts of the current digit
  __shared__ int tot[kBinsTop];   // the cluster's (C > 1)
  __shared__ int scratch[2][kRWarps];
  __shared__ int sh_bin, sh_rem, sh_live;
  __shared__ int sh_counts[2];  // this block's keys > T and == T, read by later ranks
  extern __shared__ uint4 cache[];

  cg::cluster_group cluster = cg::this_cluster();
  const int C = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int tid = int(threadIdx.x);
  const int64_t row = blockIdx.x / C;
  const float* v = a.v + (a.row_begin != nullptr ? a.row_begin[row * a.row_stride] : row * a.ld);
  Slice s;
  s.size = a.row_size != nullptr ? a.row_size[row * a.row_stride] : a.size;
  s.m = int((reinterpret_cast<uintptr_t>(v) >> 2) & 3);
  s.base = v - s.m;
  const int64_t nvec = (s.size + s.m + 3) / 4, per = (nvec + C - 1) / C;
  s.v0 = min(nvec, int64_t(rank) * per);
  s.nv = int(min(nvec, s.v0 + per) - s.v0);
  s.capv = min(s.nv, capv_max);
  int64_t* out = a.ids + row * a.k;

  uint32_t prefix = 0;
  int remaining = int(a.k), gt_local = 0, eq_local = 0;
  bool take_all = false;
#pragma unroll 1
  for (int pass = 0; pass < 3; ++pass) {
    const int nb = pass == 0 ? kBinsTop : kBinsLow;
    for (int b = tid; b < nb; b += kRThreads) hist[b] = 0;
    __syncthreads();
    if (pass == 0) histogram_pass<0>(s, cache, hist, prefix);
    else if (pass == 1) histogram_pass<1>(s, cache, hist, prefix);
    else histogram_pass<2>(s, cache, hist, prefix);
    const int* total = hist;
    if (C > 1) {
      // Sum the cluster's histograms: block `rank` sums its share of the bins over
      // all ranks and writes the sums into every rank's `tot`.
      cluster.sync();
      const int share = nb / C;
      for (int b = rank * share + tid; b < (rank + 1) * share; b += kRThreads) {
        int sum = 0;
        for (int q = 0; q < C; ++q) sum += cluster.map_shared_rank(hist, q)[b];
        for (int q = 0; q < C; ++q) cluster.map_shared_rank(tot, q)[b] = sum;
      }
      cluster.sync();  // also: no rank still reads a histogram the next pass clears
      total = tot;
    } else {
      __syncthreads();
    }
    // Thread t owns nb / kRThreads consecutive bins from the top down; a scan of the
    // owned sums finds the bin holding the remaining-th largest key.
    const int own_n = nb / kRThreads, top = nb - 1 - tid * own_n;
    int own = 0;
    for (int j = 0; j < own_n; ++j) own += total[top - j];
    int all;
    const int incl = block_inclusive_scan(own, scratch[0], &all);
    const int excl = incl - own;
    if (pass == 0 && tid == 0) sh_live = all;
    if (excl < remaining && remaining <= incl) {
      int acc = excl;
      for (int j = 0; j < own_n; ++j) {
        const int c = total[top - j];
        if (acc + c >= remaining) {
          sh_bin = top - j;
          sh_rem = remaining - acc;
          break;
        }
        acc += c;
      }
    }
    __syncthreads();
    if (pass == 0) take_all = sh_live <= a.k;  // the same in every block of the cluster
    const int bin = take_all ? -1 : sh_bin;
    // This block's keys above the bin (its share of the keys > T).
    int above = 0;
    for (int b = bin + 1 + tid; b < nb; b += kRThreads) above += hist[b];
    int above_all;
    block_inclusive_scan(above, scratch[1], &above_all);
    gt_local += above_all;
    if (take_all) break;  // keep every live key: T = -inf, no ties taken
    if (pass == 2) eq_local = hist[bin];
    prefix |= uint32_t(bin) << (pass == 0 ? 20 : pass == 1 ? 10 : 0);
    remaining = sh_rem;
    __syncthreads();  // everyone has read sh_bin / sh_rem / hist before the next pass
  }
  const uint32_t T = take_all ? kKeyNegInf : prefix;
  if (take_all) remaining = 0;

  // Offsets: keys > T and == T in the blocks before this one (lower indices).
  if (tid == 0) sh_counts[0] = gt_local, sh_counts[1] = eq_local;
  int gt_run = 0, eq_run = 0;
  if (C > 1) {
    cluster.sync();
    for (int q = 0; q < rank; ++q) {
      const int* c = cluster.map_shared_rank(sh_counts, q);
      gt_run += c[0];
      eq_run += c[1];
    }
  }
  // Ordered emission, 4 keys per thread per step: one block scan of the packed
  // (keys > T) << 16 | (keys == T) counts gives each thread its place; an index
  // goes to (keys > T before it) + min(keys == T before it, remaining).
  int parity = 0;
  const int lane = tid & 31, warp = tid >> 5;
  for (int lv0 = 0; lv0 < s.nv; lv0 += kRThreads) {
    const int lv = lv0 + tid;
    const uint4 k4 = lv < s.nv ? fetch_keys(s, cache, lv) : make_uint4(0, 0, 0, 0);
    const uint32_t k[4] = {k4.x, k4.y, k4.z, k4.w};
    int packed = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) packed += k[j] > T ? (1 << 16) : k[j] == T ? 1 : 0;
    int x = packed;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int up = __shfl_up_sync(0xffffffffu, x, o);
      if (lane >= o) x += up;
    }
    if (lane == 31) scratch[parity][warp] = x;
    __syncthreads();  // one barrier per step: the two scratch rows alternate
    int before = 0, all = 0;
#pragma unroll
    for (int w = 0; w < kRWarps; ++w) {
      const int c = scratch[parity][w];
      before += w < warp ? c : 0;
      all += c;
    }
    parity ^= 1;
    const int excl = x - packed + before;
    int gb = gt_run + (excl >> 16), eb = eq_run + (excl & 0xffff);
    if (packed != 0) {
      const int64_t i0 = (s.v0 + lv) * 4 - s.m;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (k[j] > T) {
          out[gb + min(eb, remaining)] = i0 + j;
          ++gb;
        } else if (k[j] == T) {
          if (eb < remaining) out[gb + eb] = i0 + j;
          ++eb;
        }
      }
    }
    gt_run += all >> 16;
    eq_run += all & 0xffff;
  }
  if (rank == 0) {
    const int kept = take_all ? sh_live : int(a.k);
    for (int64_t j = kept + tid; j < a.k; j += kRThreads) out[j] = -1;
    if (a.counts != nullptr && tid == 0) a.counts[row] = kept;
  }
  if (C > 1) cluster.sync();  // later ranks may still read sh_counts
}


}  // namespace

int topk_cluster_size(int64_t rows, int64_t size) {
  // Split a row while each block keeps >= kMinSlice keys and the doubled grid still
  // fits one wave (one block per SM), or two when a block's slice overflows its key
  // cache. Measured on the H200 at every forced size (bench/results/2026-11-30-topk.md):
  // past one wave the cluster's syncs and DSMEM sums cost more than the split gains
  // (256 rows x 128K keys: 0.246 ms on 1 block per row, 0.290 on 8), while few rows
  // want all 8 (1 row x 128K: 0.147 ms on 1, 0.026 on 8).
  const int64_t sms = device_sm_count();
  int64_t c = 1;
  while (c < kMaxCluster && size / (2 * c) >= kMinSlice &&
         (rows * 2 * c <= sms || (size / c > int64_t(kCacheVecs) * 4 && rows * 2 * c <= 2 * sms)))
    c *= 2;
  return int(c);
}

cudaError_t topk_rows(const TopkArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.size < 0 || a.k < 0 || a.ld < a.size || a.rows > INT32_MAX || a.k > INT32_MAX ||
      a.size > INT32_MAX - 64)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.k == 0) return cudaSuccess;
  if (a.v == nullptr || a.ids == nullptr || a.row_stride < 1) return cudaErrorInvalidValue;
  if (a.algo == TopkAlgo::kOneBlock) {
    topk_kernel<<<unsigned(a.rows), kThreads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  if (a.cluster != 0 && a.cluster != 1 && a.cluster != 2 && a.cluster != 4 && a.cluster != kMaxCluster)
    return cudaErrorInvalidValue;
  const int c = a.cluster != 0 ? a.cluster : topk_cluster_size(a.rows, a.size);
  if (a.rows * c > INT32_MAX) return cudaErrorInvalidValue;
  const int64_t per = ((a.size + 3) / 4 + 1 + c - 1) / c;  // + 1: a misaligned row spans one more vector
  const int capv = int(std::min<int64_t>(kCacheVecs, per));
  const size_t smem = size_t(capv) * sizeof(uint4);
  static std::atomic<bool> attr_set{false};
  if (!attr_set.load(std::memory_order_acquire)) {
    const cudaError_t e = cudaFuncSetAttribute(topk_radix_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               int(kCacheVecs * sizeof(uint4)));
    if (e != cudaSuccess) return e;
    attr_set.store(true, std::memory_order_release);
  }
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(a.rows * c));
  cfg.blockDim = dim3(kRThreads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  LaunchAttrs attrs;
  attrs.cluster(unsigned(c)).apply(cfg);
  TopkArgs args = a;
  return cudaLaunchKernelEx(&cfg, topk_radix_kernel, args, capv);
}

}  // namespace deepinfer::kernels
