#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/env.h"
#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_hyper_connection.cuh"
#include "kernels/cuda/smxx_launch.h"

namespace deepinfer::kernels {
namespace {

constexpr int kMaxMix = kMaxMixes;  // the short name used below
constexpr int kMixThreads = 128;  // one column (all streams) per thread: 128 columns per split at V4.1

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Column d of token t's hc streams after the expand: new h[k][d] = post[k] y[d] +
// Σ_j comb[j][k] h[j][d], stored and returned in f. Explicit _rn operations keep the
// CPU's unfused multiply-then-add order, so the results agree bit for bit; shared by
// hc_expand_kernel and the expand fused into the mixes' partial sums.
// Stream k of one column after the expand: post_k y + Σ_j comb[j][k] old[j], the sum from 0 in
// j order (comb row-major hc x hc). The one place this order is written: every kernel that
// expands (expand_column, the tiled and the wide site) calls it, so they agree bit for bit.
__device__ __forceinline__ float expand_value(const float* comb, float post_k, const float (&old)[kMaxHc], float y,
                                              int hc, int k) {
  float mixed = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxHc; ++j)
    if (j < hc) mixed = __fadd_rn(mixed, __fmul_rn(comb[j * hc + k], old[j]));
  return __fadd_rn(__fmul_rn(post_k, y), mixed);
}
__device__ __forceinline__ void expand_column(const HcExpandArgs& a, int64_t t, int64_t d, float (&f)[kMaxHc]) {
  const int hc = int(a.hc);
  float* h = a.h + t * a.hc * a.dim + d;
  const float* c = a.comb + t * hc * hc;
  const float y = a.y[t * a.dim + d];
  float old[kMaxHc];
#pragma unroll
  for (int j = 0; j < kMaxHc; ++j) old[j] = j < hc ? h[j * a.dim] : 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxHc; ++k) {
    f[k] = 0.0f;
    if (k >= hc) continue;
    f[k] = expand_value(c, a.post[t * hc + k], old, y, hc, k);
    h[k * a.dim] = f[k];
  }
}

// Split-K over token t's state (hc * dim = 20480 at V4.1 size): block (s, t) takes the
// columns [s * dchunk, (s + 1) * dchunk) of all hc streams (512 values at V4.1) and the
// matching entries of the (2 + hc) * hc rows of fn, and writes its unnormalized partial
// sums Σ h·fn[m] and Σ h² to ws[t][s]. One block per token (an earlier design) read
// fn's 2 MB through a single SM: ~400 us per call at batch 1. The chunking depends only
// on the shape, never on n, so a token's result is the same in any batch (batch
// invariance). Whole columns per block, so kExpand can first apply the preceding
// hc_expand to them (each column's update reads only that column): the expanded state
// is written once and summed from registers, one launch fewer. Both instantiations run
// the same sums in the same order (explicit FMAs), so the fused result is bitwise the
// expand followed by the plain partial sums.
template <bool kExpand>
__global__ void __launch_bounds__(kMixThreads) hc_mixes_partial_kernel(HcMixesArgs a, HcExpandArgs e, float* ws,
                                                                        int64_t dchunk) {
  __shared__ float part[kMixThreads / 32][kMaxMix + 1];
  const int hc = int(a.hc), num_mix = (2 + hc) * hc;
  const int64_t width = a.hc * a.dim, t = blockIdx.y, split = blockIdx.x;
  const int64_t lo = split * dchunk, hi = lo + dchunk < a.dim ? lo + dchunk : a.dim;
  const float* h = a.h + t * width;
  float ss = 0.0f, acc[kMaxMix];
#pragma unroll
  for (int m = 0; m < kMaxMix; ++m) acc[m] = 0.0f;
  for (int64_t d = lo + threadIdx.x; d < hi; d += blockDim.x) {
    float f[kMaxHc];
    if constexpr (kExpand) {
      expand_column(e, t, d, f);
    } else {
#pragma unroll
      for (int k = 0; k < kMaxHc; ++k) f[k] = k < hc ? h[k * a.dim + d] : 0.0f;
    }
    static_assert(kMaxHc == 4, "the stream pick below names four streams");
    // Two streams at a time (48 loads in flight per thread; all four at once spill);
    // the pick keeps f in registers.
#pragma unroll 2
    for (int k = 0; k < hc; ++k) {
      const float fk = k == 0 ? f[0] : k == 1 ? f[1] : k == 2 ? f[2] : f[3];
      const float* fn = a.fn + k * a.dim + d;
      ss = __fmaf_rn(fk, fk, ss);
#pragma unroll
      for (int m = 0; m < kMaxMix; ++m)
        if (m < num_mix) acc[m] = __fmaf_rn(fk, fn[m * width], acc[m]);
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < kMaxMix; ++m) {
    const float v = warp_sum(acc[m]);
    if (lane == 0) part[warp][m] = v;
  }
  {
    const float v = warp_sum(ss);
    if (lane == 0) part[warp][kMaxMix] = v;
  }
  __syncthreads();
  float* out = ws + (t * gridDim.x + split) * (kMaxMix + 1);
  if (threadIdx.x <= kMaxMix) {
    float v = 0.0f;
    for (int w = 0; w < kMixThreads / 32; ++w) v = __fadd_rn(v, part[w][threadIdx.x]);
    out[threadIdx.x] = v;
  }
}

// Tiled version of the partial sums (kMixThreads columns x kG mix groups per block, up to
// kTileTokens tokens per block), for a split of at most kMixThreads columns (V4.1: 128).
// The per-token kernel above re-read fn's 2 MB from L2 for every token (5 ms per call
// at an 8K prefill for ~8 GFLOP); here a thread keeps its column's fn values in
// registers for the whole token tile. Every sum is formed exactly as there: thread i
// of a split owns column lo + i, its chains run over the streams k in order with
// explicit FMAs from 0, the 32 lanes of a warp combine as warp_sum's xor butterfly
// (the reduce-scatter below pairs the same partial sums, in the same tree: a + b ==
// b + a in IEEE arithmetic), and the four column warps add in warp order from 0. So
// the result is bitwise the per-token kernel's, for any tile and group count (batch
// invariance is kept). kG = 4 splits the 24 mixes over four thread groups of the
// block (6 each, the sum of squares with group 0): 4x the threads and 1/4 of the
// registers per thread for the latency-bound batch-1 call.
constexpr int kTileTokens = 16;
template <int kG>
struct MixGroup {
  static constexpr int kPer = kMaxMix / kG;                 // mixes per group
  static constexpr int kVals = kG == 1 ? 32 : 8;            // kPer + 1 rounded up to a power of two
  static_assert(kPer + 1 <= kVals, "the group's values (its mixes and the sum of squares) must fit");
};

// Reduce-scatter of v[0 .. V) over the 32 lanes: at offset o (16, 8, ..) a lane keeps
// one half of its values, sends the other half to lane ^ o and adds what it receives
// (own + other, as warp_sum), until one value is left, which the remaining levels
// butterfly. Lane l then holds value mix_lane_index<V>(l), summed over the warp in
// warp_sum's tree.
template <int V>
__device__ __forceinline__ float warp_reduce_scatter(float (&v)[V], int lane) {
  int cnt = V;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    if (cnt > 1) {
      const bool upper = (lane & o) != 0;
      cnt >>= 1;
#pragma unroll
      for (int j = 0; j < V / 2; ++j) {
        if (j >= cnt) break;
        const float send = upper ? v[j] : v[j + cnt];
        const float keep = upper ? v[j + cnt] : v[j];
        v[j] = keep + __shfl_xor_sync(0xffffffffu, send, o);
      }
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], o);
    }
  }
  return v[0];
}
template <int V>
__device__ __forceinline__ int mix_lane_index(int lane, bool& writer) {
  int cnt = V, idx = 0, rest = 0;
  for (int o = 16; o > 0; o >>= 1) {
    if (cnt > 1) {
      cnt >>= 1;
      if (lane & o) idx += cnt;
    } else {
      rest |= lane & o;
    }
  }
  writer = rest == 0;  // lanes that differ only in the butterfly bits hold the same value
  return idx;
}

// One column's contribution to a group's mixes: Σ_k f[k] w[m][k] for the group's kPer mixes and,
// in group 0, Σ_k f[k]² (slot kPer), each from 0 in k order, then summed over the warp's 32
// columns (warp_reduce_scatter): lane l gets value mix_lane_index(l). Shared by the tiled and the
// wide site, whose partial sums must be the same bits.
template <class G>
__device__ __forceinline__ float mix_partials(const float (&f)[kMaxHc], const float (&w)[G::kPer][kMaxHc], int hc,
                                              bool sum_squares, int lane) {
  float v[G::kVals];
#pragma unroll
  for (int j = 0; j < G::kVals; ++j) v[j] = 0.0f;
#pragma unroll
  for (int k = 0; k < kMaxHc; ++k) {
    if (k >= hc) break;
    if (sum_squares) v[G::kPer] = __fmaf_rn(f[k], f[k], v[G::kPer]);
#pragma unroll
    for (int m = 0; m < G::kPer; ++m) v[m] = __fmaf_rn(f[k], w[m][k], v[m]);
  }
  return warp_reduce_scatter<G::kVals>(v, lane);
}

// The one-launch hc site (HcMixesArgs::counters): the collapse + norm's arguments that
// the tiled kernel's kTail instantiation takes along (HcCollapseNormArgs without h, n,
// hc and dim, which are the mixes' own).
struct OneLaunchTail {
  const float* pre = nullptr;
  const float* weight = nullptr;
  float* x = nullptr;
  float eps = 0.0f;
  unsigned* counters = nullptr;
};
__device__ void one_launch_tail(const HcMixesArgs& a, const OneLaunchTail& tl, const float* ws, int splits, int64_t t,
                                float* stage);

// The body of hc_mixes_tiled_kernel. kTail (one token per block, kG * kMixThreads >= 288
// threads; hc_site_one_launch_kernel): the block also writes
// the unnormalized collapse of its columns into tl.x, and the last of the token's split
// blocks runs one_launch_tail (the norm of the row, the mixes' finish).
template <bool kExpand, int kG, bool kTail>
__device__ __forceinline__ void mixes_tiled(const HcMixesArgs& a, const HcExpandArgs& e, float* ws, int64_t dchunk,
                                            int splits, int tile, const OneLaunchTail& tl) {
  using G = MixGroup<kG>;
  __shared__ float hs[kTileTokens][kMaxHc][kMixThreads];  // the (expanded) state of the tile's columns
  __shared__ float ys[kTileTokens][kMixThreads];           // expand: y of the columns
  __shared__ float cs[kTileTokens][kMaxHc * kMaxHc + kMaxHc];  // expand: comb, then post
  __shared__ float part[kTileTokens][kMixThreads / 32][kMaxMix + 1];
  const int hc = int(a.hc), num_mix = (2 + hc) * hc;
  const int64_t width = a.hc * a.dim, split = blockIdx.x, t0 = int64_t(blockIdx.y) * tile;
  const int ntok = int(a.n - t0 < tile ? a.n - t0 : tile);
  const int64_t lo = split * dchunk, hi = lo + dchunk < a.dim ? lo + dchunk : a.dim;
  const int i = threadIdx.x % kMixThreads, g = threadIdx.x / kMixThreads;
  const int64_t d = lo + i;
  const bool live = d < hi;
  const int m0 = g * G::kPer;

  // This thread's fn values (zero where the original never multiplies: no column, or
  // a mix past num_mix), issued first so that their latency overlaps the staging.
  float w[G::kPer][kMaxHc];
#pragma unroll
  for (int m = 0; m < G::kPer; ++m)
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      w[m][k] = live && k < hc && m0 + m < num_mix ? a.fn[(m0 + m) * width + k * a.dim + d] : 0.0f;

  // Staging: every load of the tile is independent (shared-memory stores in between),
  // so they are all in flight at once; the expand then runs from shared memory.
  for (int tt = g; tt < ntok; tt += kG) {
    const float* h = a.h + (t0 + tt) * width + d;
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) hs[tt][k][i] = live && k < hc ? h[k * a.dim] : 0.0f;
    if constexpr (kExpand) ys[tt][i] = live ? e.y[(t0 + tt) * a.dim + d] : 0.0f;
  }
  if constexpr (kExpand) {
    const int per = hc * hc + hc;
    for (int idx = threadIdx.x; idx < ntok * per; idx += blockDim.x) {
      const int tt = idx / per, j = idx % per;
      cs[tt][j] = j < hc * hc ? e.comb[(t0 + tt) * hc * hc + j] : e.post[(t0 + tt) * hc + j - hc * hc];
    }
    __syncthreads();
    // expand_column's arithmetic on the staged values, in its order.
    for (int tt = g; tt < ntok; tt += kG) {
      if (!live) continue;
      float old[kMaxHc];
#pragma unroll
      for (int j = 0; j < kMaxHc; ++j) old[j] = hs[tt][j][i];
      const float* c = cs[tt];
      const float y = ys[tt][i];
      float* h = e.h + (t0 + tt) * width + d;
#pragma unroll
      for (int k = 0; k < kMaxHc; ++k) {
        if (k >= hc) continue;
        const float f = expand_value(c, c[hc * hc + k], old, y, hc, k);
        hs[tt][k][i] = f;
        h[k * a.dim] = f;
      }
    }
  }
  __syncthreads();
  if constexpr (kTail) {
    // collapse_norm_token's element: Σ_k pre[k] h[k][d] from 0 in stream order, on the
    // values it would read back from h (tile 1: token t0).
    if (g == 0 && live) {
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < kMaxHc; ++k)
        if (k < hc) acc = __fadd_rn(acc, __fmul_rn(tl.pre[t0 * hc + k], hs[0][k][i]));
      tl.x[t0 * a.dim + d] = acc;
    }
  }

  const int lane = threadIdx.x & 31, cw = i >> 5;
  bool writer;
  const int vi = mix_lane_index<G::kVals>(lane, writer);
  // The value a lane ends up with: mix m0 + vi, or the sum of squares (group 0's slot kPer).
  const int mout = vi < G::kPer ? m0 + vi : (vi == G::kPer && g == 0 ? kMaxMix : -1);
  for (int tt = 0; tt < ntok; ++tt) {
    float f[kMaxHc];
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) f[k] = hs[tt][k][i];
    const float s = mix_partials<G>(f, w, hc, g == 0, lane);
    if (writer && mout >= 0) part[tt][cw][mout] = s;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < ntok * (kMaxMix + 1); idx += blockDim.x) {
    const int tt = idx / (kMaxMix + 1), m = idx % (kMaxMix + 1);
    float v = 0.0f;
    for (int cwi = 0; cwi < kMixThreads / 32; ++cwi) v = __fadd_rn(v, part[tt][cwi][m]);
    ws[((t0 + tt) * splits + split) * (kMaxMix + 1) + m] = v;
  }
  if constexpr (kTail) {
    static_assert(kMixThreads * kG >= 288, "the tail takes 8 warps for the norm and warp 8 for the finish");
    static_assert(sizeof(hs) >= sizeof(float) * 64 * (kMaxMix + 1), "the tail stages ws in hs");
    one_launch_tail(a, tl, ws, splits, t0, &hs[0][0][0]);
  }
}
template <bool kExpand, int kG>
__global__ void __launch_bounds__(kMixThreads * kG) hc_mixes_tiled_kernel(HcMixesArgs a, HcExpandArgs e, float* ws,
                                                                          int64_t dchunk, int splits, int tile) {
  mixes_tiled<kExpand, kG, false>(a, e, ws, dchunk, splits, tile, OneLaunchTail{});
}
// The one-launch hc site (HcMixesArgs::counters): kG 4, one token per block.
template <bool kExpand>
__global__ void __launch_bounds__(kMixThreads * 4) hc_site_one_launch_kernel(HcMixesArgs a, HcExpandArgs e, float* ws,
                                                                             int64_t dchunk, int splits,
                                                                             OneLaunchTail tl) {
  pdl_trigger();  // as the finish kernel it replaces: the gemv after it may start
  mixes_tiled<kExpand, 4, true>(a, e, ws, dchunk, splits, 1, tl);
}

// The wide one-launch site (HcMixesArgs::wide, defer_finish; NOTES 55). The 512-thread site
// block above streams its split's 49 KB of fn through one SM, 40 SMs in all at V4.1; here each
// of its four column warps is a block of its own (blockIdx.x = split * kWideCw + cw), whose
// four warps are its four mix groups: 160 blocks of 128 threads, ~12 KB of fn each. Every
// value is formed as there: warp g of block (split, cw) holds what warp (g, cw) of the big
// block held (column lo + 32 cw + lane, mixes 6g .. 6g + 5, the sum of squares in g = 0), the
// same FMA chains over the streams and the same reduce-scatter, so its results are that
// block's part[cw][m]; they go to ws[t][split][cw][m], and hc_mixes_finish (wide) adds the four
// from 0 in cw order, which is the big block's sum. The expand / collapse of a column is warp
// 0's, in expand_column's and the collapse's order. The norm of the row is the big tail's: the
// last block's 128 threads each run two of its 256 threads' chains (i and i + 128), the same
// warp sums and the same 8-value block sum, so x is bitwise the same. Under `pdl` (a
// programmatic dependent launch) only fn, a weight, is read before pdl_wait; every read of
// what the kernels before write (h, y, post, comb, pre) and every write comes after it.
constexpr int kWideThreads = 32 * 4;
// 16 bytes global -> shared through L2 only (cp.async.cg), completed by cp.async.wait_all.
__device__ __forceinline__ void cp_async_l2(float* dst, const float* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(unsigned(__cvta_generic_to_shared(dst))), "l"(src)
               : "memory");
}
static_assert(kWideCw * 32 == kMixThreads, "a wide block is one column warp of the tiled kernel's split");
template <bool kExpand>
__global__ void __launch_bounds__(kWideThreads) hc_site_wide_kernel(HcMixesArgs a, HcExpandArgs e, float* ws,
                                                                    int64_t dchunk, int splits, OneLaunchTail tl) {
  using G = MixGroup<4>;
  __shared__ float hs[kMaxHc][32];                    // the (expanded) state of the block's 32 columns
  __shared__ float cs[kMaxHc * kMaxHc + kMaxHc];      // expand: comb, then post
  __shared__ float scratch[8];
  __shared__ unsigned am_last;
  __shared__ __align__(16) float rowx[kOneLaunchMaxDim];  // the tail: the row to normalize
  __shared__ __align__(16) float roww[kOneLaunchMaxDim];  // and the norm's weight
  pdl_trigger();  // as the 512-thread site
  const int hc = int(a.hc), num_mix = (2 + hc) * hc;
  const int64_t width = a.hc * a.dim, t = blockIdx.y;
  const int split = int(blockIdx.x) / kWideCw, cw = int(blockIdx.x) % kWideCw;
  const int64_t lo = int64_t(split) * dchunk, hi = lo + dchunk < a.dim ? lo + dchunk : a.dim;
  const int lane = int(threadIdx.x & 31), g = int(threadIdx.x >> 5);
  const int64_t d = lo + cw * 32 + lane;
  const bool live = cw * 32 + lane < dchunk && d < hi;
  const int m0 = g * G::kPer;

  // fn (a weight: before pdl_wait, so under PDL its HBM round trip overlaps the kernel before).
  float w[G::kPer][kMaxHc];
#pragma unroll
  for (int m = 0; m < G::kPer; ++m)
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      w[m][k] = live && k < hc && m0 + m < num_mix ? a.fn[(m0 + m) * width + k * a.dim + d] : 0.0f;
  // The state's lines of the block's columns into L2 meanwhile (a prefetch returns nothing, so it
  // may run before the wait: the lines are read after it; the previous site wrote them ~0.1 ms
  // ago and they may have left L2).
  if (g == 1 && lane < hc && cw * 32 < dchunk && lo + cw * 32 < a.dim)
    asm volatile("prefetch.global.L2 [%0];" ::"l"(a.h + t * width + lane * a.dim + lo + cw * 32));
  pdl_wait();

  if (g == 0) {
    float old[kMaxHc];
    const float* h = a.h + t * width + d;
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) old[k] = live && k < hc ? h[k * a.dim] : 0.0f;
    float y = 0.0f;
    if constexpr (kExpand) y = live ? e.y[t * a.dim + d] : 0.0f;
    if constexpr (kExpand) {
      const int per = hc * hc + hc;
      if (lane < per) cs[lane] = lane < hc * hc ? e.comb[t * hc * hc + lane] : e.post[t * hc + lane - hc * hc];
      __syncwarp();
    }
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) hs[k][lane] = old[k];
    if (kExpand && live) {
      // expand_column's arithmetic (the tiled kernel's staged copy of it), in its order.
      float* hw = e.h + t * width + d;
#pragma unroll
      for (int k = 0; k < kMaxHc; ++k) {
        if (k >= hc) continue;
        const float f = expand_value(cs, cs[hc * hc + k], old, y, hc, k);
        hs[k][lane] = f;
        hw[k * a.dim] = f;
      }
    }
    if (live) {
      // collapse_norm_token's element, as the tiled kernel's kTail collapse.
      float acc = 0.0f;
#pragma unroll
      for (int k = 0; k < kMaxHc; ++k)
        if (k < hc) acc = __fadd_rn(acc, __fmul_rn(tl.pre[t * hc + k], hs[k][lane]));
      tl.x[t * a.dim + d] = acc;
    }
  }
  __syncthreads();

  bool writer;
  const int vi = mix_lane_index<G::kVals>(lane, writer);
  const int mout = vi < G::kPer ? m0 + vi : (vi == G::kPer && g == 0 ? kMaxMix : -1);
  {
    float f[kMaxHc];
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) f[k] = hs[k][lane];
    const float sum = mix_partials<G>(f, w, hc, g == 0, lane);
    if (writer && mout >= 0) ws[((t * splits + split) * kWideCw + cw) * (kMaxMix + 1) + mout] = sum;
  }

  // Completion counter per token over its splits * kWideCw blocks, as one_launch_tail.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    am_last = atomicAdd(tl.counters + t, 1u) == gridDim.x - 1u ? 1u : 0u;
    if (am_last) __threadfence();
  }
  __syncthreads();
  if (am_last == 0u) return;
  if (threadIdx.x == 0) tl.counters[t] = 0u;
  // one_launch_tail's norm: its thread i (of 256) is thread i % 128's chain i / 128 here. The row
  // and the norm's weight come into shared memory by cp.async (L2 only, as __ldcg: other blocks
  // wrote the row in this launch), all in flight at once without holding registers (the 80 loads
  // per thread in registers took the kernel to 138 registers).
  const int64_t dim = a.dim;
  float* x = tl.x + t * dim;
  const bool vec = dim % 4 == 0 && reinterpret_cast<uintptr_t>(x) % 16 == 0 &&
                   (!tl.weight || reinterpret_cast<uintptr_t>(tl.weight) % 16 == 0);
  if (vec) {
    for (int64_t q = threadIdx.x; q < dim / 4; q += kWideThreads) {
      cp_async_l2(&rowx[4 * q], x + 4 * q);
      if (tl.weight) cp_async_l2(&roww[4 * q], tl.weight + 4 * q);
    }
    asm volatile("cp.async.wait_all;\n" ::: "memory");
  } else {
    for (int64_t dd = threadIdx.x; dd < dim; dd += kWideThreads) {
      rowx[dd] = __ldcg(x + dd);
      if (tl.weight) roww[dd] = tl.weight[dd];
    }
  }
  __syncthreads();
  constexpr int kPer = int(kOneLaunchMaxDim / 256);
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    float ss = 0.0f;
#pragma unroll
    for (int u = 0; u < kPer; ++u) {
      const int64_t dd = threadIdx.x + c * 128 + int64_t(u) * 256;
      if (dd < dim) ss = __fmaf_rn(rowx[dd], rowx[dd], ss);
    }
    ss = warp_sum(ss);
    if (lane == 0) scratch[g + 4 * c] = ss;
  }
  __syncthreads();
  const float ss = warp_sum(lane < 8 ? scratch[lane] : 0.0f);
  const float r = 1.0f / sqrtf(ss / float(dim) + tl.eps);
  for (int64_t dd = threadIdx.x; dd < dim; dd += kWideThreads) {
    const float nv = __fmul_rn(rowx[dd], r);
    x[dd] = tl.weight ? __fmul_rn(roww[dd], nv) : nv;
  }
}

// Prefill-sized partial sums (a.variant 3; picked from kRowsMinTokens tokens at hc = 4 with
// splits of exactly 128 columns, V4.1's shape). The tiled kernel above spends most of its
// time outside its 100 FMAs per (token, 32 columns): the 31-shuffle reduce-scatter, and a
// stage / sync / compute pattern on 4 warps per block (0.68 ms per call at 8K tokens, 1.02
// with the expand, against ~0.16 / ~0.35 ms of HBM). Here a thread owns 2 tokens x 5
// outputs (24 mixes + the sum of squares over 5 warps) and walks a warp-group's 32
// columns itself: the leaves are the tiled kernel's per-column chains (FMAs over the 4
// streams from 0), and they are combined in the order j = 0..31 of column bitrev5(j) by
// a binary-counter pairwise sum, which is exactly warp_sum's xor butterfly tree (first
// lanes l, l ^ 16; then those pairs with l ^ 8; ...; a + b == b + a), so no shuffle is
// needed. The four 32-column groups are then added from 0 in group order, as the tiled
// kernel adds its four warps. Same operands, same operations, same tree: bitwise the
// tiled kernel's partial sums (A/B case former_hc_*_rows).
// Shared memory per 32-column stage: the tile's state hs[token][column][stream] and fn's
// fs[mix][column][stream] (float4 per column). One 16-byte pad per 8 columns makes the
// staging's 16-byte stores conflict-free (8 lanes: 8 columns of one token), and the token
// row stride of 4 mod 32 words the compute's per-lane token rows.
constexpr int kRowsTokens = 64;                    // 2 per lane
constexpr int kRowsWarps = 5;                      // 5 outputs each: kMaxMix + 1 = 25
constexpr int kRowsThreads = 32 * kRowsWarps;
constexpr int kRowsCols = 32;                      // one stage: a warp-group of the tiled kernel
constexpr int kRowsFnRow = kRowsCols * 4 + 16;     // floats per mix row of fs (with pads)
constexpr int kRowsHRow = kRowsFnRow + 4;          // floats per token row of hs
constexpr int kRowsMinTokens = 256;
constexpr size_t kRowsSmem =
    sizeof(float) * (size_t(kRowsTokens) * kRowsHRow + size_t(kMaxMix) * kRowsFnRow + kRowsTokens * 20);
static_assert(kMaxMix + 1 == kRowsWarps * 5 && kMaxHc == 4, "the rows kernel is laid out for hc = 4");

__host__ __device__ constexpr int rows_col_off(int d) { return d * 4 + (d >> 3) * 4; }
__host__ __device__ constexpr int brev5(int j) {
  return ((j & 1) << 4) | ((j & 2) << 2) | (j & 4) | ((j & 8) >> 2) | ((j & 16) >> 4);
}

// One warp's 32 leaves for its 2 tokens x 5 outputs (kSS: output 4 is the sum of squares).
template <bool kSS>
__device__ __forceinline__ void rows_stage(const float* hs, const float* fs, int lane, int m0, float (&fin)[2][5]) {
  float lv[5][2][5];
  const float* h0 = hs + lane * kRowsHRow;
  const float* h1 = hs + (lane + 32) * kRowsHRow;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    const int off = rows_col_off(brev5(j));
    const float4 hv[2] = {*reinterpret_cast<const float4*>(h0 + off), *reinterpret_cast<const float4*>(h1 + off)};
    float cur[2][5];
#pragma unroll
    for (int o = 0; o < 5; ++o) {
      if (kSS && o == 4) {
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          float v = __fmaf_rn(hv[u].x, hv[u].x, 0.0f);
          v = __fmaf_rn(hv[u].y, hv[u].y, v);
          v = __fmaf_rn(hv[u].z, hv[u].z, v);
          cur[u][o] = __fmaf_rn(hv[u].w, hv[u].w, v);
        }
      } else {
        const float4 w = *reinterpret_cast<const float4*>(fs + (m0 + o) * kRowsFnRow + off);
#pragma unroll
        for (int u = 0; u < 2; ++u) {
          float v = __fmaf_rn(hv[u].x, w.x, 0.0f);
          v = __fmaf_rn(hv[u].y, w.y, v);
          v = __fmaf_rn(hv[u].z, w.z, v);
          cur[u][o] = __fmaf_rn(hv[u].w, w.w, v);
        }
      }
    }
    // Binary counter: leaf j closes the subtrees of its trailing one bits.
#pragma unroll
    for (int b = 0; b < 5; ++b) {
      if ((j >> b) & 1) {
#pragma unroll
        for (int u = 0; u < 2; ++u)
#pragma unroll
          for (int o = 0; o < 5; ++o) cur[u][o] = __fadd_rn(lv[b][u][o], cur[u][o]);
      } else {
#pragma unroll
        for (int u = 0; u < 2; ++u)
#pragma unroll
          for (int o = 0; o < 5; ++o) lv[b][u][o] = cur[u][o];
        break;
      }
    }
    if (j == 31) {
#pragma unroll
      for (int u = 0; u < 2; ++u)
#pragma unroll
        for (int o = 0; o < 5; ++o) fin[u][o] = __fadd_rn(fin[u][o], cur[u][o]);
    }
  }
}

template <bool kExpand>
__global__ void __launch_bounds__(kRowsThreads, 3)
    hc_mixes_rows_kernel(HcMixesArgs a, HcExpandArgs e, float* ws, int splits) {
  extern __shared__ __align__(16) float rows_smem[];
  float* hs = rows_smem;                                     // [kRowsTokens][kRowsHRow]
  float* fs = hs + kRowsTokens * kRowsHRow;                  // [kMaxMix][kRowsFnRow]
  float* cs = fs + kMaxMix * kRowsFnRow;                     // expand: [kRowsTokens][16 comb + 4 post]
  const int64_t dim = a.dim, width = 4 * dim, split = blockIdx.x, t0 = int64_t(blockIdx.y) * kRowsTokens;
  const int ntok = int(a.n - t0 < kRowsTokens ? a.n - t0 : kRowsTokens);
  const int64_t lo = split * (4 * kRowsCols);
  const int tid = threadIdx.x, lane = tid & 31, g = tid >> 5, m0 = 5 * g;
  if constexpr (kExpand) {
    for (int idx = tid; idx < ntok * 20; idx += kRowsThreads) {
      const int tt = idx / 20, j = idx % 20;
      cs[idx] = j < 16 ? e.comb[(t0 + tt) * 16 + j] : e.post[(t0 + tt) * 4 + j - 16];
    }
  }
  float fin[2][5];
#pragma unroll
  for (int u = 0; u < 2; ++u)
#pragma unroll
    for (int o = 0; o < 5; ++o) fin[u][o] = 0.0f;

  for (int cw = 0; cw < 4; ++cw) {
    const int64_t d0 = lo + cw * kRowsCols;
    if (cw > 0) __syncthreads();  // the previous stage's reads are done
    // fn: item (m, q) = 4 streams x 4 columns, stored as 4 columns of 4 streams.
    for (int idx = tid; idx < kMaxMix * 8; idx += kRowsThreads) {
      const int m = idx >> 3, q = idx & 7;
      const float* src = a.fn + m * width + d0 + 4 * q;
      float4 v[4];
#pragma unroll
      for (int k = 0; k < 4; ++k) v[k] = *reinterpret_cast<const float4*>(src + k * dim);
      float* dst = fs + m * kRowsFnRow;
      *reinterpret_cast<float4*>(dst + rows_col_off(4 * q + 0)) = make_float4(v[0].x, v[1].x, v[2].x, v[3].x);
      *reinterpret_cast<float4*>(dst + rows_col_off(4 * q + 1)) = make_float4(v[0].y, v[1].y, v[2].y, v[3].y);
      *reinterpret_cast<float4*>(dst + rows_col_off(4 * q + 2)) = make_float4(v[0].z, v[1].z, v[2].z, v[3].z);
      *reinterpret_cast<float4*>(dst + rows_col_off(4 * q + 3)) = make_float4(v[0].w, v[1].w, v[2].w, v[3].w);
    }
    if (kExpand && cw == 0) __syncthreads();  // cs
    // The state: item (token, q), the expand (expand_column's arithmetic, in its order)
    // applied on the way and written back.
    for (int idx = tid; idx < kRowsTokens * 8; idx += kRowsThreads) {
      const int tt = idx >> 3, q = idx & 7;
      float4 v[4];
      if (tt < ntok) {
        const int64_t at = (t0 + tt) * width + d0 + 4 * q;
        const float* src = a.h + at;
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = *reinterpret_cast<const float4*>(src + k * dim);
        if constexpr (kExpand) {
          const float4 y4 = *reinterpret_cast<const float4*>(e.y + (t0 + tt) * dim + d0 + 4 * q);
          const float* c = cs + tt * 20;
          float old[4][4], nw[4][4];  // [column i][stream]
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            old[0][k] = v[k].x, old[1][k] = v[k].y, old[2][k] = v[k].z, old[3][k] = v[k].w;
          }
          const float ys[4] = {y4.x, y4.y, y4.z, y4.w};
#pragma unroll
          for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              float mixed = 0.0f;
#pragma unroll
              for (int j = 0; j < 4; ++j) mixed = __fadd_rn(mixed, __fmul_rn(c[j * 4 + k], old[i][j]));
              nw[i][k] = __fadd_rn(__fmul_rn(c[16 + k], ys[i]), mixed);
            }
#pragma unroll
          for (int k = 0; k < 4; ++k) {
            v[k] = make_float4(nw[0][k], nw[1][k], nw[2][k], nw[3][k]);
            *reinterpret_cast<float4*>(e.h + at + k * dim) = v[k];  // e.h == a.h
          }
        }
      } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
      float* dst = hs + tt * kRowsHRow;
      *reinterpret_cast<float4*>(dst + rows_col_off(4 * q + 0)) = make_float4(v[0].x, v[1].x, v[2].x, v[3].x);
      *reinterpret_cast<float4*>(dst + rows_col_off(4 * q + 1)) = make_float4(v[0].y, v[1].y, v[2].y, v[3].y);
      *reinterpret_cast<float4*>(dst + rows_col_off(4 * q + 2)) = make_float4(v[0].z, v[1].z, v[2].z, v[3].z);
      *reinterpret_cast<float4*>(dst + rows_col_off(4 * q + 3)) = make_float4(v[0].w, v[1].w, v[2].w, v[3].w);
    }
    __syncthreads();
    if (g == kRowsWarps - 1)
      rows_stage<true>(hs, fs, lane, m0, fin);
    else
      rows_stage<false>(hs, fs, lane, m0, fin);
  }
#pragma unroll
  for (int u = 0; u < 2; ++u) {
    const int tt = lane + 32 * u;
    if (tt >= ntok) continue;
    float* out = ws + ((t0 + tt) * splits + split) * (kMaxMix + 1) + m0;
#pragma unroll
    for (int o = 0; o < 5; ++o) out[o] = fin[u][o];
  }
}

// Token t's mixes from the split sums mix[0 .. kMaxMix] (one thread): normalizes (r Σ
// h·fn is the projection of the RMS-normalized state), then the gates and the tiny
// Sinkhorn problem. prm holds base[0 .. num_mix) and, from prm[kMaxMix], scale[0 .. 2],
// staged in shared memory by the caller: read from global memory here, every load of
// base / scale after a store of pre / post (which may alias them, for all the compiler
// knows) was another HBM round trip on this one thread. Not inlined, so every caller
// runs the very same instructions.
__device__ __noinline__ void mixes_finish_token(const HcMixesArgs a, float* mix, const float* prm, int64_t t) {
  const int hc = int(a.hc), num_mix = (2 + hc) * hc;
  const int64_t width = a.hc * a.dim;
  const float r = 1.0f / sqrtf(mix[kMaxMix] / float(width) + a.norm_eps);
  for (int m = 0; m < num_mix; ++m) mix[m] *= r;

  float* pre = a.pre + t * hc;
  float* post = a.post + t * hc;
  float c[kMaxHc][kMaxHc];
  for (int k = 0; k < hc; ++k) {
    pre[k] = sigmoid(mix[k] * prm[kMaxMix] + prm[k]) + a.hc_eps;
    post[k] = 2.0f * sigmoid(mix[hc + k] * prm[kMaxMix + 1] + prm[hc + k]);
  }
#pragma unroll
  for (int j = 0; j < kMaxHc; ++j) {
    if (j >= hc) break;
    float mx = -INFINITY, sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      if (k < hc) {
        c[j][k] = mix[2 * hc + j * hc + k] * prm[kMaxMix + 2] + prm[2 * hc + j * hc + k];
        mx = fmaxf(mx, c[j][k]);
      }
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      if (k < hc) {
        c[j][k] = expf(c[j][k] - mx);
        sum += c[j][k];
      }
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      if (k < hc) c[j][k] = c[j][k] / sum + a.hc_eps;
  }
  // Sinkhorn: a column step, then (iters - 1) row + column steps, as the reference.
  for (int64_t it = 0; it < a.sinkhorn_iters; ++it) {
    if (it > 0) {
#pragma unroll
      for (int j = 0; j < kMaxHc; ++j) {
        float s = 0.0f;
#pragma unroll
        for (int k = 0; k < kMaxHc; ++k) s += k < hc && j < hc ? c[j][k] : 0.0f;
#pragma unroll
        for (int k = 0; k < kMaxHc; ++k)
          if (k < hc && j < hc) c[j][k] /= (s + a.hc_eps);
      }
    }
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) {
      float s = 0.0f;
#pragma unroll
      for (int j = 0; j < kMaxHc; ++j) s += k < hc && j < hc ? c[j][k] : 0.0f;
#pragma unroll
      for (int j = 0; j < kMaxHc; ++j)
        if (k < hc && j < hc) c[j][k] /= (s + a.hc_eps);
    }
  }
  float* out = a.comb + t * hc * hc;
#pragma unroll
  for (int j = 0; j < kMaxHc; ++j)
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      if (j < hc && k < hc) out[j * hc + k] = c[j][k];
}

// mixes_finish_token on one warp: lane L < 16 owns comb[j][k], j = L / 4, k = L % 4 (lanes
// 16..31 mirror them and store nothing). Every value is computed by the same expression
// as in the one-thread code, and each row / column sum gathers its four terms by
// shuffles and adds them in the serial loop's order (0.0f for a term past hc, as there),
// so the results are bitwise the one-thread version's; the divisions of a step now run
// on 16 lanes side by side instead of one after another (at batch 1 the one-thread
// Sinkhorn was the whole ~33 us of the finish + collapse + norm launch).
__device__ __noinline__ void mixes_finish_token_warp(const HcMixesArgs a, const float* mix, const float* prm, int64_t t) {
  const int lane = int(threadIdx.x & 31), L = lane & 15, j = L >> 2, k = L & 3;
  const int hc = int(a.hc);
  const int64_t width = a.hc * a.dim;
  const float r = 1.0f / sqrtf(mix[kMaxMix] / float(width) + a.norm_eps);
  const bool active = j < hc && k < hc;
  if (lane < hc) {
    // The one-thread code scales mix in place (mix[m] *= r), then uses the products.
    const float m0 = mix[lane] * r, m1 = mix[hc + lane] * r;
    a.pre[t * hc + lane] = sigmoid(m0 * prm[kMaxMix] + prm[lane]) + a.hc_eps;
    a.post[t * hc + lane] = 2.0f * sigmoid(m1 * prm[kMaxMix + 1] + prm[hc + lane]);
  }
  float c = 0.0f;
  if (active) {
    const float mc = mix[2 * hc + j * hc + k] * r;
    c = mc * prm[kMaxMix + 2] + prm[2 * hc + j * hc + k];
  }
  // Row softmax: the max (order-free), then exp and the sum in k order.
  float g[kMaxHc];
#pragma unroll
  for (int kk = 0; kk < kMaxHc; ++kk) g[kk] = __shfl_sync(0xffffffffu, c, (j << 2) | kk);
  float mx = -INFINITY;
#pragma unroll
  for (int kk = 0; kk < kMaxHc; ++kk)
    if (kk < hc) mx = fmaxf(mx, g[kk]);
  c = expf(c - mx);
#pragma unroll
  for (int kk = 0; kk < kMaxHc; ++kk) g[kk] = __shfl_sync(0xffffffffu, c, (j << 2) | kk);
  float sum = 0.0f;
#pragma unroll
  for (int kk = 0; kk < kMaxHc; ++kk)
    if (kk < hc) sum += g[kk];
  c = c / sum + a.hc_eps;
  // Sinkhorn: a column step, then (iters - 1) row + column steps, as the reference.
  for (int64_t it = 0; it < a.sinkhorn_iters; ++it) {
    if (it > 0) {
#pragma unroll
      for (int kk = 0; kk < kMaxHc; ++kk) g[kk] = __shfl_sync(0xffffffffu, c, (j << 2) | kk);
      float s = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kMaxHc; ++kk) s += kk < hc && j < hc ? g[kk] : 0.0f;
      if (active) c /= (s + a.hc_eps);
    }
#pragma unroll
    for (int jj = 0; jj < kMaxHc; ++jj) g[jj] = __shfl_sync(0xffffffffu, c, (jj << 2) | k);
    float s = 0.0f;
#pragma unroll
    for (int jj = 0; jj < kMaxHc; ++jj) s += k < hc && jj < hc ? g[jj] : 0.0f;
    if (active) c /= (s + a.hc_eps);
  }
  if (lane < 16 && active) a.comb[t * hc * hc + j * hc + k] = c;
}

// The tail of the one-launch hc site, run by every block of hc_mixes_tiled_kernel<., 4,
// true> after its writes (h, its ws partial sums, its columns of the raw collapse in
// tl.x). Completion counter per token (the threadFenceReduction pattern): the block that
// brings it to `splits` saw every other block's fenced writes, resets it (the next
// site's launch reuses it), then
//   - threads 0..255 normalize token t's row as collapse_norm_token does: thread i adds
//     elements i, i + 256, .. with an FMA, the block_sum tree over those 8 warps (a named
//     barrier, so warp 8 is not held), r, then w[d] (row[d] r);
//   - warps 8..15 stage the token's split sums (splits x 25 floats) in `stage` (the
//     tiled kernel's hs, free by now) with one load each per thread, all in flight; then
//     warp 8 finishes the mixes as mixes_finish_tokens' warp does: each of lanes 0..24
//     adds its value over the splits in split order, then the same
//     mixes_finish_token_warp / mixes_finish_token.
// The row and ws are read with ld.global.cg (L2: other SMs wrote them in this launch).
__device__ void one_launch_tail(const HcMixesArgs& a, const OneLaunchTail& tl, const float* ws, int splits, int64_t t,
                                float* stage) {
  __shared__ unsigned am_last;
  __shared__ float scratch[8];
  __shared__ float mix[kMaxMix + 1];
  __shared__ float prm[kMaxMix + 3];
  const int warp = int(threadIdx.x >> 5), lane = int(threadIdx.x & 31);
  const int num_mix = int((2 + a.hc) * a.hc);
  // base / scale (27 floats) for the finish: every block's warp 8 issues these loads before the
  // counter, so the last block does not pay their round trip after the staging below (the
  // finish warp is the site's longest tail, NOTES 29; session 13).
  float p = 0.0f;
  if (warp == 8 && !a.defer_finish) {
    if (lane < num_mix) p = a.base[lane];
    else if (lane >= kMaxMix && lane < kMaxMix + 3) p = a.scale[lane - kMaxMix];
  }
  // The counter as cooperative groups' grid barrier does it: the block's writes (ws, tl.x)
  // ordered before thread 0's fence by the barrier, one fence and the atomic by thread 0, and
  // in the last block the acquiring fence by thread 0 before the barrier the others wait on
  // (was a fence by every thread on both sides).
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    am_last = atomicAdd(tl.counters + t, 1u) == unsigned(splits - 1) ? 1u : 0u;
    if (am_last) __threadfence();
  }
  __syncthreads();
  if (am_last == 0u) return;
  if (a.defer_finish) {
    // The finish runs in hc_mixes_finish after the site: only the counter's reset here (every
    // block of the token has counted, so no one reads it again in this launch).
    if (threadIdx.x == 0) tl.counters[t] = 0u;
    if (threadIdx.x >= 256) return;
  } else if (warp >= 8) {
    const int total = splits * (kMaxMix + 1);  // <= 64 x 25 = 1600: up to 7 per thread
    const float* src = ws + t * total;
    for (int idx = int(threadIdx.x) - 256; idx < total; idx += int(blockDim.x) - 256) stage[idx] = __ldcg(src + idx);
    // Barrier 2 over warps 8.. (blockDim.x - 256 threads, a multiple of 32).
    asm volatile("bar.sync 2, %0;" ::"r"(int(blockDim.x) - 256) : "memory");
    if (warp > 8) return;
    if (lane == 0) tl.counters[t] = 0u;
    if (lane < num_mix || (lane >= kMaxMix && lane < kMaxMix + 3)) prm[lane] = p;
    if (lane <= kMaxMix) {
      float v = 0.0f;
      for (int s = 0; s < splits; ++s) v += stage[s * (kMaxMix + 1) + lane];
      mix[lane] = v;
    }
    __syncwarp();
    if (a.finish_variant == 1) {
      if (lane == 0) mixes_finish_token(a, mix, prm, t);
    } else {
      mixes_finish_token_warp(a, mix, prm, t);
    }
    return;
  }
  if (threadIdx.x >= 256) return;
  constexpr int kPer = int(kOneLaunchMaxDim / 256);
  const int64_t dim = a.dim;
  float* x = tl.x + t * dim;
  float v[kPer], wv[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int64_t d = threadIdx.x + int64_t(u) * 256;
    v[u] = d < dim ? __ldcg(x + d) : 0.0f;
    wv[u] = tl.weight && d < dim ? tl.weight[d] : 1.0f;
  }
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < kPer; ++u)
    if (threadIdx.x + int64_t(u) * 256 < dim) ss = __fmaf_rn(v[u], v[u], ss);
  // block_sum over 256 threads, on barrier 1 for those 8 warps only.
  ss = warp_sum(ss);
  if (lane == 0) scratch[warp] = ss;
  asm volatile("bar.sync 1, 256;" ::: "memory");
  ss = warp_sum(lane < 8 ? scratch[lane] : 0.0f);
  const float r = 1.0f / sqrtf(ss / float(dim) + tl.eps);
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const int64_t d = threadIdx.x + int64_t(u) * 256;
    if (d >= dim) break;
    const float nv = __fmul_rn(v[u], r);
    x[d] = tl.weight ? __fmul_rn(wv[u], nv) : nv;
  }
}

// Finish of up to kFinishTokens tokens from t0, one warp per token: lanes 0..kMaxMix
// sum the token's splits in split order (loads unrolled, so they are in flight
// together: the former loop over 40 splits on a 32-thread block was a chain of 40 L2
// round trips), then the warp runs mixes_finish_token_warp (a.finish_variant 1: lane 0
// runs mixes_finish_token). One block (and one warp) per
// token before; now eight tokens' serial finishes run side by side.
constexpr int kFinishThreads = 256, kFinishTokens = kFinishThreads / 32;
// mix: [kFinishTokens][kMaxMix + 1] split sums; prm: [kFinishTokens][kMaxMix + 3], each
// warp's copy of base and scale (mixes_finish_token's prm).
__device__ __forceinline__ void mixes_finish_tokens(const HcMixesArgs& a, const float* ws, int splits, int64_t t0,
                                                    float (*mix)[kMaxMix + 1], float (*prm)[kMaxMix + 3]) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t t = t0 + warp;
  if (t >= a.n) return;  // warp-uniform; no block barrier follows
  const int num_mix = int((2 + a.hc) * a.hc);
  if (lane < num_mix) prm[warp][lane] = a.base[lane];
  else if (lane >= kMaxMix && lane < kMaxMix + 3) prm[warp][lane] = a.scale[lane - kMaxMix];
  if (lane <= kMaxMix && a.wide) {
    // The wide site's layout (HcMixesArgs::wide): a split's kWideCw column-warp sums, added from 0
    // in column-warp order as the 512-thread block adds its part[cw] before storing its split.
    const float* p = ws + t * splits * kWideCw * (kMaxMix + 1) + lane;
    float v = 0.0f;
#pragma unroll 2
    for (int s = 0; s < splits; ++s) {
      float vs = 0.0f;
#pragma unroll
      for (int c = 0; c < kWideCw; ++c) vs = __fadd_rn(vs, p[(s * kWideCw + c) * (kMaxMix + 1)]);
      v += vs;
    }
    mix[warp][lane] = v;
  } else if (lane <= kMaxMix) {
    const float* p = ws + t * splits * (kMaxMix + 1) + lane;
    float v = 0.0f;
#pragma unroll 8
    for (int s = 0; s < splits; ++s) v += p[s * (kMaxMix + 1)];
    mix[warp][lane] = v;
  }
  __syncwarp();
  if (a.finish_variant == 1) {
    if (lane == 0) mixes_finish_token(a, mix[warp], prm[warp], t);
  } else {
    mixes_finish_token_warp(a, mix[warp], prm[warp], t);
  }
}

__global__ void __launch_bounds__(kFinishThreads) hc_mixes_finish_kernel(HcMixesArgs a, const float* ws, int splits) {
  __shared__ float mix[kFinishTokens][kMaxMix + 1];
  __shared__ float prm[kFinishTokens][kMaxMix + 3];
  mixes_finish_tokens(a, ws, splits, int64_t(blockIdx.x) * kFinishTokens, mix, prm);
}

// Thread per (token, channel). Explicit _rn operations keep the CPU's unfused
// multiply-then-add order, so the results agree bit for bit.
__global__ void hc_collapse_kernel(HcCollapseArgs a) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.n * a.dim) return;
  const int64_t t = idx / a.dim, d = idx % a.dim;
  float acc = 0.0f;
  for (int64_t k = 0; k < a.hc; ++k) acc = __fadd_rn(acc, __fmul_rn(a.pre[t * a.hc + k], a.h[(t * a.hc + k) * a.dim + d]));
  a.x[idx] = acc;
}

// One block of kCollapseNormThreads per token. Element d: the collapse's sum over the
// streams (hc_collapse_kernel's order); the sum of squares: thread i adds elements i,
// i + 256, .. with an FMA, then block_sum (rms_norm_kernel's order and arithmetic).
// For hc <= kMaxHc the loads of kCnBatch elements (all streams) are issued before any
// of them is used, and the weights of the second pass likewise: one HBM round trip
// per batch instead of per element (the one block of a batch-1 call was a chain of
// ~40 of them). Same operations in the same order as the plain loops.
constexpr int kCollapseNormThreads = 256;
constexpr int kCnBatch = 8;
__device__ __forceinline__ void collapse_norm_token(const HcCollapseNormArgs& a, int64_t t, float* row,
                                                    float* scratch) {
  const float* h = a.h + t * a.hc * a.dim;
  const float* pre = a.pre + t * a.hc;
  float ss = 0.0f;
  if (a.hc <= kMaxHc) {
    const int hc = int(a.hc);
    float p[kMaxHc];
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k) p[k] = k < hc ? pre[k] : 0.0f;
    for (int64_t d0 = threadIdx.x; d0 < a.dim; d0 += int64_t(kCnBatch) * blockDim.x) {
      float hv[kCnBatch][kMaxHc];
#pragma unroll
      for (int u = 0; u < kCnBatch; ++u) {
        const int64_t d = d0 + int64_t(u) * blockDim.x;
#pragma unroll
        for (int k = 0; k < kMaxHc; ++k) hv[u][k] = d < a.dim && k < hc ? h[k * a.dim + d] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kCnBatch; ++u) {
        const int64_t d = d0 + int64_t(u) * blockDim.x;
        if (d >= a.dim) break;
        float acc = 0.0f;
#pragma unroll
        for (int k = 0; k < kMaxHc; ++k)
          if (k < hc) acc = __fadd_rn(acc, __fmul_rn(p[k], hv[u][k]));
        row[d] = acc;
        ss = __fmaf_rn(acc, acc, ss);
      }
    }
  } else {
    for (int64_t d = threadIdx.x; d < a.dim; d += blockDim.x) {
      float acc = 0.0f;
      for (int64_t k = 0; k < a.hc; ++k) acc = __fadd_rn(acc, __fmul_rn(pre[k], h[k * a.dim + d]));
      row[d] = acc;
      ss = __fmaf_rn(acc, acc, ss);
    }
  }
  ss = block_sum(ss, scratch);
  const float r = 1.0f / sqrtf(ss / float(a.dim) + a.eps);
  float* x = a.x + t * a.dim;
  for (int64_t d0 = threadIdx.x; d0 < a.dim; d0 += int64_t(kCnBatch) * blockDim.x) {
    float wv[kCnBatch];
#pragma unroll
    for (int u = 0; u < kCnBatch; ++u) {
      const int64_t d = d0 + int64_t(u) * blockDim.x;
      wv[u] = a.weight && d < a.dim ? a.weight[d] : 1.0f;
    }
#pragma unroll
    for (int u = 0; u < kCnBatch; ++u) {
      const int64_t d = d0 + int64_t(u) * blockDim.x;
      if (d >= a.dim) break;
      const float v = __fmul_rn(row[d], r);
      x[d] = a.weight ? __fmul_rn(wv[u], v) : v;
    }
  }
}

__global__ void __launch_bounds__(kCollapseNormThreads) hc_collapse_norm_kernel(HcCollapseNormArgs a) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  extern __shared__ float row[];
  __shared__ float scratch[32];
  collapse_norm_token(a, blockIdx.x, row, scratch);
}

// The mixes' finish fused into the collapse + norm that follows it in a decode layer
// (one node fewer per hyper-connection site): blocks [0, fin) finish m for
// kFinishTokens tokens each, blocks fin + t collapse and normalize token t with cn.pre
// (the previous site's weights, never m.pre). Both halves are the separate kernels'
// code. Separate blocks rather than one block doing both in turn (as before): at
// batch 1 the serial finish (Sinkhorn on one thread) and the collapse now overlap.
__global__ void __launch_bounds__(kCollapseNormThreads)
    hc_mixes_finish_collapse_norm_kernel(HcMixesArgs m, const float* ws, int splits, HcCollapseNormArgs cn, int fin) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  static_assert(kCollapseNormThreads == kFinishThreads, "one block size for both roles");
  extern __shared__ float row[];
  __shared__ float scratch[32];
  __shared__ float mix[kFinishTokens][kMaxMix + 1];
  __shared__ float prm[kFinishTokens][kMaxMix + 3];
  if (int(blockIdx.x) < fin) {
    mixes_finish_tokens(m, ws, splits, int64_t(blockIdx.x) * kFinishTokens, mix, prm);
    return;
  }
  collapse_norm_token(cn, int64_t(blockIdx.x) - fin, row, scratch);
}

__global__ void hc_expand_kernel(HcExpandArgs a) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.n * a.dim) return;
  float f[kMaxHc];
  expand_column(a, idx / a.dim, idx % a.dim, f);
}

}  // namespace

namespace {
// The partial sums: the tiled kernel where a split is at most kMixThreads columns (V4.1),
// else (or when a.variant asks) the per-token kernel; both give the same bits.
// The rows kernel's shape: hc = 4, splits of exactly 4 x 32 columns, 16-byte rows.
bool rows_fit(const HcMixesArgs& a, const HcExpandArgs& e, bool expand, int64_t splits) {
  const auto al = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return a.hc == 4 && splits * 4 * kRowsCols == a.dim && al(a.h) && al(a.fn) && (!expand || al(e.y));
}
template <bool kExpand>
cudaError_t mixes_rows(const HcMixesArgs& a, const HcExpandArgs& e, int64_t splits, cudaStream_t stream) {
  static const cudaError_t attr = cudaFuncSetAttribute(
      hc_mixes_rows_kernel<kExpand>, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kRowsSmem));
  if (attr != cudaSuccess) return attr;
  const int64_t tiles = (a.n + kRowsTokens - 1) / kRowsTokens;
  hc_mixes_rows_kernel<kExpand>
      <<<dim3(unsigned(splits), unsigned(tiles)), kRowsThreads, kRowsSmem, stream>>>(a, e, a.workspace, int(splits));
  return cudaGetLastError();
}

template <bool kExpand>
cudaError_t mixes_partial(const HcMixesArgs& a, const HcExpandArgs& e, cudaStream_t stream) {
  const int64_t splits = hc_mixes_splits(a.hc, a.dim), dchunk = (a.dim + splits - 1) / splits;
  const bool rows = rows_fit(a, e, kExpand, splits);
  if (a.variant == 3 && !rows) return cudaErrorInvalidValue;
  if (a.variant == 3 || (a.variant == 0 && rows && a.n >= kRowsMinTokens)) return mixes_rows<kExpand>(a, e, splits, stream);
  const bool tiled = a.variant == 2 || (a.variant == 0 && dchunk <= kMixThreads);
  if (a.variant == 2 && dchunk > kMixThreads) return cudaErrorInvalidValue;
  if (!tiled) {
    hc_mixes_partial_kernel<kExpand>
        <<<dim3(unsigned(splits), unsigned(a.n)), kMixThreads, 0, stream>>>(a, e, a.workspace, dchunk);
    return cudaGetLastError();
  }
  // Up to 8 tokens: one token per block and the mixes split over 4 thread groups (160
  // blocks of 512 threads at batch 1, V4.1). Beyond: whole mixes per thread, tiles of
  // up to kTileTokens tokens, at least ~4 blocks per SM where the batch allows.
  if (a.n <= 8) {
    hc_mixes_tiled_kernel<kExpand, 4>
        <<<dim3(unsigned(splits), unsigned(a.n)), kMixThreads * 4, 0, stream>>>(a, e, a.workspace, dchunk, int(splits), 1);
  } else {
    const int64_t tile = std::min<int64_t>(kTileTokens, std::max<int64_t>(1, a.n / 16));
    const int64_t tiles = (a.n + tile - 1) / tile;
    hc_mixes_tiled_kernel<kExpand, 1><<<dim3(unsigned(splits), unsigned(tiles)), kMixThreads, 0, stream>>>(
        a, e, a.workspace, dchunk, int(splits), int(tile));
  }
  return cudaGetLastError();
}
unsigned finish_blocks(int64_t n) { return unsigned((n + kFinishTokens - 1) / kFinishTokens); }
}  // namespace

int b1_fuse_max_n() {
  static const int n = [] {
    const EnvDigit e = env_digit("DEEPINFER_B1_FUSE", 0, 8);  // invalid: the model refuses it at load
    if (e.set && !e.valid) std::fprintf(stderr, "DEEPINFER_B1_FUSE=%s ignored (expected 0..8)\n", e.text.c_str());
    return e.valid ? e.value : kB1FuseDefault;
  }();
  return n;
}

namespace {
// What the finish reads, checked by hc_mixes and hc_mixes_finish before they launch anything.
bool finish_args_ok(const HcMixesArgs& a) {
  if (a.n < 0 || a.hc < 1 || a.hc > kMaxHc || a.dim <= 0 || a.sinkhorn_iters < 1 || a.n > INT32_MAX) return false;
  if (a.finish_variant < 0 || a.finish_variant > 1) return false;
  return a.n == 0 || (a.base && a.scale && a.pre && a.post && a.comb && a.workspace);
}
// pre / post / comb of every token from the split sums in a.workspace. The one-launch site's own
// finish sums the staged split values in split order from 0 and runs the same
// mixes_finish_token_warp / mixes_finish_token on the same base / scale: the same bits.
cudaError_t launch_finish(const HcMixesArgs& a, cudaStream_t stream) {
  hc_mixes_finish_kernel<<<finish_blocks(a.n), kFinishThreads, 0, stream>>>(
      a, a.workspace, int(hc_mixes_splits(a.hc, a.dim)));
  return cudaGetLastError();
}
}  // namespace

cudaError_t hc_mixes(const HcMixesArgs& args, cudaStream_t stream) {
  HcMixesArgs a = args;
  a.wide = false;  // its partial sums are per split
  if (!finish_args_ok(a) || a.variant < 0 || a.variant > 3) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.h || !a.fn) return cudaErrorInvalidValue;
  if (cudaError_t e = mixes_partial<false>(a, HcExpandArgs{}, stream); e != cudaSuccess) return e;
  return launch_finish(a, stream);
}

cudaError_t hc_mixes_finish(const HcMixesArgs& a, cudaStream_t stream) {
  if (!finish_args_ok(a)) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  return launch_finish(a, stream);
}

namespace {
std::atomic<int> g_site_mode{-1};
}
void hc_set_site_mode(int mode) { g_site_mode = mode < 0 ? -1 : std::min(mode, 3); }
int hc_site_mode() {
  return resolve_env_switch(g_site_mode, "DEEPINFER_HC_SITE", 0, 3,
                            [](const EnvDigit& e) { return e.valid ? e.value : kHcSiteDefault; });
}

bool hc_site_one_launch_applies(const HcMixesArgs& m, const HcCollapseNormArgs& cn) {
  if (m.counters == nullptr || m.n < 1 || m.n > 8 || !(m.variant == 0 || m.variant == 2) || m.hc < 1 || m.dim <= 0)
    return false;
  const int64_t splits = hc_mixes_splits(m.hc, m.dim), dchunk = (m.dim + splits - 1) / splits;
  return dchunk <= kMixThreads && cn.h == m.h && cn.hc == m.hc && cn.dim == m.dim && m.dim <= kOneLaunchMaxDim;
}

namespace {
// hc_mixes_collapse_norm with an optional expand (e != null) fused into the partial sums.
cudaError_t mixes_collapse_norm(const HcExpandArgs* e, const HcMixesArgs& args, const HcCollapseNormArgs& cn,
                                cudaStream_t stream) {
  HcMixesArgs m = args;
  // The wide layout only where the wide site runs (with its deferred finish); the other paths'
  // finishes read per-split sums.
  if (!(m.defer_finish && hc_site_one_launch_applies(m, cn))) m.wide = false;
  if (m.n < 0 || m.hc < 1 || m.hc > kMaxHc || m.dim <= 0 || m.sinkhorn_iters < 1 || m.n > INT32_MAX)
    return cudaErrorInvalidValue;
  if (m.variant < 0 || m.variant > 3 || m.finish_variant < 0 || m.finish_variant > 1) return cudaErrorInvalidValue;
  if (cn.n != m.n || cn.hc < 1 || cn.dim <= 0 || cn.dim > kMaxCollapseNormDim) return cudaErrorInvalidValue;
  if (e && (e->h != m.h || e->n != m.n || e->hc != m.hc || e->dim != m.dim)) return cudaErrorInvalidValue;
  if (m.n == 0) return cudaSuccess;
  if (!m.h || !m.fn || !m.base || !m.scale || !m.pre || !m.post || !m.comb || !m.workspace) return cudaErrorInvalidValue;
  if (!cn.h || !cn.pre || !cn.x) return cudaErrorInvalidValue;
  if (e && (!e->y || !e->post || !e->comb)) return cudaErrorInvalidValue;
  // The collapse reads cn.pre while the finish writes m's outputs: the sequence this
  // replaces would collapse with the new weights, so they must be other buffers.
  if (cn.pre == m.pre || cn.pre == m.post || cn.pre == m.comb) return cudaErrorInvalidValue;
  const int64_t splits = hc_mixes_splits(m.hc, m.dim);
  // One launch (m.counters): the tiled kernel at one token per block, as mixes_partial
  // picks it for n <= 8, with the collapse, the norm and the finish in its tail.
  const int64_t dchunk = (m.dim + splits - 1) / splits;
  if (hc_site_one_launch_applies(m, cn) && m.wide && m.defer_finish) {
    const OneLaunchTail tl{cn.pre, cn.weight, cn.x, cn.eps, m.counters};
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(unsigned(splits * kWideCw), unsigned(m.n));
    cfg.blockDim = dim3(kWideThreads);
    cfg.stream = stream;
    LaunchAttrs attrs;
    attrs.pdl(m.pdl).apply(cfg);
    return e ? cudaLaunchKernelEx(&cfg, hc_site_wide_kernel<true>, m, *e, m.workspace, dchunk, int(splits), tl)
             : cudaLaunchKernelEx(&cfg, hc_site_wide_kernel<false>, m, HcExpandArgs{}, m.workspace, dchunk,
                                  int(splits), tl);
  }
  if (hc_site_one_launch_applies(m, cn)) {
    const OneLaunchTail tl{cn.pre, cn.weight, cn.x, cn.eps, m.counters};
    const dim3 grid(unsigned(splits), unsigned(m.n));
    if (e)
      hc_site_one_launch_kernel<true><<<grid, kMixThreads * 4, 0, stream>>>(m, *e, m.workspace, dchunk, int(splits), tl);
    else
      hc_site_one_launch_kernel<false>
          <<<grid, kMixThreads * 4, 0, stream>>>(m, HcExpandArgs{}, m.workspace, dchunk, int(splits), tl);
    return cudaGetLastError();
  }
  const cudaError_t err = e ? mixes_partial<true>(m, *e, stream) : mixes_partial<false>(m, HcExpandArgs{}, stream);
  if (err != cudaSuccess) return err;
  const unsigned fin = finish_blocks(m.n);
  if (int64_t(fin) + m.n > INT32_MAX) return cudaErrorInvalidValue;
  hc_mixes_finish_collapse_norm_kernel<<<fin + unsigned(m.n), kCollapseNormThreads, size_t(cn.dim) * sizeof(float),
                                         stream>>>(m, m.workspace, int(splits), cn, int(fin));
  return cudaGetLastError();
}
}  // namespace

cudaError_t hc_mixes_collapse_norm(const HcMixesArgs& m, const HcCollapseNormArgs& cn, cudaStream_t stream) {
  return mixes_collapse_norm(nullptr, m, cn, stream);
}

cudaError_t hc_expand_mixes_collapse_norm(const HcExpandArgs& e, const HcMixesArgs& m, const HcCollapseNormArgs& cn,
                                          cudaStream_t stream) {
  return mixes_collapse_norm(&e, m, cn, stream);
}

cudaError_t hc_collapse(const HcCollapseArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.hc < 1 || a.dim <= 0) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.h || !a.pre || !a.x) return cudaErrorInvalidValue;
  hc_collapse_kernel<<<grid_1d(a.n * a.dim, 256), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t hc_collapse_norm(const HcCollapseNormArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.hc < 1 || a.dim <= 0 || a.dim > kMaxCollapseNormDim || a.n > INT32_MAX)
    return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.h || !a.pre || !a.x) return cudaErrorInvalidValue;
  hc_collapse_norm_kernel<<<unsigned(a.n), kCollapseNormThreads, size_t(a.dim) * sizeof(float), stream>>>(a);
  return cudaGetLastError();
}

cudaError_t hc_expand(const HcExpandArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.hc < 1 || a.hc > kMaxHc || a.dim <= 0) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.h || !a.y || !a.post || !a.comb) return cudaErrorInvalidValue;
  hc_expand_kernel<<<grid_1d(a.n * a.dim, 256), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
