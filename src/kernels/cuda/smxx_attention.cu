#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <climits>

#include "kernels/cuda/smxx_attention.cuh"
#include "kernels/cuda/smxx_common.cuh"

namespace deepinfer::kernels {
namespace {

namespace cg = cooperative_groups;

// Block: one query, kHeads heads (the M = 16 rows of an m16n8k16 MMA), one of
// kAttnSplits slices of the query's entry list; kWarps warps, warp w owning the
// channels [kWarpCh * w, kWarpCh * (w + 1)) in both products.
constexpr int kHeads = 16;
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kWarpCh = int(kAttnMaxDim) / kWarps;  // 64 channels = 4 k-steps of QK, 8 n-tiles of PV
constexpr int kTile = 32;                          // entries per staged tile (4 n-tiles of QK, 2 k-steps of PV)
// Staged row stride in floats: 520 = 8 (mod 32) banks, so the QK fragment reads
// (8 rows x 4 float2 per request) fall on distinct banks; the PV reads (2 rows per
// lane quad) pay at most a 2-way conflict.
constexpr int kLd = int(kAttnMaxDim) + 8;
constexpr int kSLd = kTile + 8;  // per-warp logit rows [kHeads][kSLd]: float2 stores conflict-free

// Shared memory in floats: two entry tiles [kTile][kLd] (double buffered; reused
// for the block's partial accumulator [kHeads][kLd] at the end), the warps'
// partial logits [kWarps][kHeads][kSLd], the probabilities [kHeads][kSLd], and per
// head the rescale factor, partial max, partial sum, merge weights and denominator.
constexpr size_t kSmemFloats = size_t(2 * kTile * kLd) + size_t(kWarps * kHeads * kSLd) + size_t(kHeads * kSLd) +
                               size_t(3 * kHeads) + size_t(kHeads * kAttnSplits) + size_t(kHeads);

__device__ __forceinline__ void cp_async16(float* dst, const float* src) {
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// fp32 -> three bf16 pieces, x = hi + mid + lo exactly for normal values (each
// residual is exact in fp32 and fits the next piece's 8 bits, down to 2^-24 |x|).
// A product of two split values is the six largest piece products (hi.hi, hi.mid,
// mid.hi, hi.lo, lo.hi, mid.mid: everything down to 2^-16 of it), each exact in the
// MMA's fp32 accumulator: fp32-class accuracy for any input (two pieces and three
// products measured ~8e-5 of the rms against a double oracle in emulation: above
// the op tolerance). The model's entries are FP8 / FP4 fake-quantized with
// power-of-two scales, exact in bf16 (mid = lo = 0): a warp-uniform vote per
// fragment then skips the three terms that would add exact zeros, leaving three
// MMAs (q's or p's three pieces times the entry), so results do not depend on it.
struct Frag3 {
  uint32_t hi[4], mid[4], lo[4];  // A fragment registers a0..a3 per piece
};
__device__ __forceinline__ uint32_t bits(__nv_bfloat162 v) { return *reinterpret_cast<const uint32_t*>(&v); }
// Pieces of the pair (x, y) packed as one fragment register (.x = x = lower k / column).
__device__ __forceinline__ void split3(float x, float y, uint32_t& hi, uint32_t& mid, uint32_t& lo) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  const float rx = __fsub_rn(x, __low2float(h)), ry = __fsub_rn(y, __high2float(h));
  const __nv_bfloat162 m = __floats2bfloat162_rn(rx, ry);
  const __nv_bfloat162 l = __floats2bfloat162_rn(__fsub_rn(rx, __low2float(m)), __fsub_rn(ry, __high2float(m)));
  hi = bits(h), mid = bits(m), lo = bits(l);
}

__device__ __forceinline__ void mma16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // bf16 mma needs sm_80+
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// d += a * b, b given as its B fragment values (b0 = (v00, v01), b1 = (v10, v11)),
// the terms smallest first in one fixed order.
__device__ __forceinline__ void mma_split(float (&d)[4], const Frag3& a, float v00, float v01, float v10, float v11) {
  uint32_t h0, m0, l0, h1, m1, l1;
  split3(v00, v01, h0, m0, l0);
  split3(v10, v11, h1, m1, l1);
  const bool inexact = (m0 | l0 | m1 | l1) != 0u;
  if (__any_sync(0xffffffffu, inexact)) {
    mma16816(d, a.lo, h0, h1);
    mma16816(d, a.hi, l0, l1);
    mma16816(d, a.mid, m0, m1);
    mma16816(d, a.mid, h0, h1);
    mma16816(d, a.hi, m0, m1);
  } else {
    mma16816(d, a.lo, h0, h1);
    mma16816(d, a.mid, h0, h1);
  }
  mma16816(d, a.hi, h0, h1);
}

__device__ __forceinline__ float butterfly_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float butterfly_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Grid: n * groups * kAttnSplits blocks, clusters of kAttnSplits along x; block
// (t, g, s) = query t, heads [16 g, 16 g + 16), entry slice s. Per 32-entry tile:
//   1. QK on the tensor cores: warp w forms the partial logits of the 16 heads x 32
//      entries over its 64 channels (4 n-tiles x 4 k-steps x 3 or 6 MMAs);
//   2. warp w sums the 8 partials of heads 2w, 2w + 1 in warp order (lane = entry)
//      and runs the fp32 online softmax for them;
//   3. PV on the tensor cores: warp w rescales and accumulates O[16 heads][its 64
//      channels] (2 k-steps x 8 n-tiles x 3 or 6 MMAs).
// Nothing depends on n or on other queries: a query's bits are the same in any batch.
__global__ void __cluster_dims__(kAttnSplits, 1, 1) __launch_bounds__(kThreads, 1)
    mqa_attention_kernel(SinkAttentionArgs a, int groups, bool vec) {
  extern __shared__ float4 smem4[];
  float* tiles = reinterpret_cast<float*>(smem4);
  float* sp = tiles + 2 * kTile * kLd;         // [kWarps][kHeads][kSLd]
  float* pr = sp + kWarps * kHeads * kSLd;     // [kHeads][kSLd]
  float* corr = pr + kHeads * kSLd;            // [kHeads]
  float* pm = corr + kHeads;                   // [kHeads]
  float* pl = pm + kHeads;                     // [kHeads]
  float* wts = pl + kHeads;                    // [kHeads][kAttnSplits]
  float* den = wts + kHeads * kAttnSplits;     // [kHeads]

  cg::cluster_group cluster = cg::this_cluster();
  const int s = int(cluster.block_rank());
  const int64_t qg = int64_t(blockIdx.x) / kAttnSplits;
  const int64_t t = qg / groups;
  const int g0 = int(qg % groups) * kHeads;
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int gr = lane >> 2, qd = lane & 3;  // MMA fragment row / column pair
  const int dim = int(a.dim);
  constexpr int slice = int(kAttnMaxDim) / kAttnSplits;  // output channels merged by each block
  const int64_t b = a.offsets[t], e = a.offsets[t + 1];
  const int64_t cnt = e - b;

  if (cnt <= 0) {  // sink only: no value, so the output is zero (as the CPU op)
    for (int i = tid; i < kHeads * slice; i += kThreads) {
      const int lh = i / slice, d = s * slice + i % slice;
      const int64_t h = int64_t(g0) + lh;
      if (h < a.heads && d < dim) a.out[(t * a.heads + h) * a.dim + d] = 0.0f;
    }
    return;  // the whole cluster shares t, so every block of it leaves here
  }

  // This block's slice of the entries: a function of the count alone.
  const int64_t chunk = (cnt + kAttnSplits - 1) / kAttnSplits;
  const int64_t j0 = b + s * chunk < e ? b + s * chunk : e, j1 = j0 + chunk < e ? j0 + chunk : e;
  const int len = int(j1 - j0), ntiles = (len + kTile - 1) / kTile;

  // q of the block's heads as split A fragments for the warp's 4 k-steps: rows
  // gr / gr + 8, channels 2 qd (+1) and 2 qd + 8 (+1) of each 16-channel step.
  Frag3 qa[4];
  {
    const int64_t h0 = int64_t(g0) + gr, h1 = h0 + 8;
    const float* q0 = a.q + (t * a.heads + (h0 < a.heads ? h0 : 0)) * a.dim;
    const float* q1 = a.q + (t * a.heads + (h1 < a.heads ? h1 : 0)) * a.dim;
    auto ld = [&](const float* qh, bool ok, int d) { return ok && d < dim ? qh[d] : 0.0f; };
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      const int d0 = warp * kWarpCh + 16 * ks + 2 * qd, d1 = d0 + 8;
      split3(ld(q0, h0 < a.heads, d0), ld(q0, h0 < a.heads, d0 + 1), qa[ks].hi[0], qa[ks].mid[0], qa[ks].lo[0]);
      split3(ld(q1, h1 < a.heads, d0), ld(q1, h1 < a.heads, d0 + 1), qa[ks].hi[1], qa[ks].mid[1], qa[ks].lo[1]);
      split3(ld(q0, h0 < a.heads, d1), ld(q0, h0 < a.heads, d1 + 1), qa[ks].hi[2], qa[ks].mid[2], qa[ks].lo[2]);
      split3(ld(q1, h1 < a.heads, d1), ld(q1, h1 < a.heads, d1 + 1), qa[ks].hi[3], qa[ks].mid[3], qa[ks].lo[3]);
    }
  }
  float o[8][4];
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};  // heads 2 warp + i

  // Channels dim .. kAttnMaxDim of the tiles stay zero (the loads never write them):
  // q is zero there too, but 0 * stale NaN would not be.
  if (dim < int(kAttnMaxDim)) {
    const int w = int(kAttnMaxDim) - dim;
    for (int i = tid; i < 2 * kTile * w; i += kThreads) tiles[(i / w) * kLd + dim + i % w] = 0.0f;
  }

  // Warp w copies rows w, w + 8, ...: one coalesced read of the tile's ids (lane r
  // holds row r's), then per row a shuffle and 4 16-byte pieces per lane. Rows c..31
  // of a partial tile are zeroed, so the PV products of absent entries are 0 * 0.
  auto load_tile = [&](int buf, int64_t j, int c) {
    float* dst = tiles + buf * kTile * kLd;
    const int64_t my_id = lane < c ? a.ids[j + lane] : 0;
#pragma unroll
    for (int r = warp; r < kTile; r += kWarps) {
      const int64_t id = __shfl_sync(0xffffffffu, my_id, r);
      float* row = dst + r * kLd;
      if (r >= c) {
        for (int col = 4 * lane; col < int(kAttnMaxDim); col += 128)
          *reinterpret_cast<float4*>(row + col) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        continue;
      }
      const float* src = a.kv + id * a.dim;
      if (vec) {
        for (int col = 4 * lane; col < dim; col += 128) cp_async16(row + col, src + col);
      } else {
        for (int col = lane; col < dim; col += 32) row[col] = src[col];
      }
    }
    cp_async_commit();
  };

  if (ntiles > 0) load_tile(0, j0, len < kTile ? len : kTile);
  for (int it = 0; it < ntiles; ++it) {
    const int c = len - it * kTile < kTile ? len - it * kTile : kTile;
    if (it + 1 < ntiles) {
      const int rest = len - (it + 1) * kTile;
      load_tile((it + 1) & 1, j0 + int64_t(it + 1) * kTile, rest < kTile ? rest : kTile);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float* tile = tiles + (it & 1) * kTile * kLd;

    // 1. Partial logits over the warp's channels: B[k = channel][n = entry].
    {
      float* spw = sp + warp * kHeads * kSLd;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        if (8 * nt >= c) break;  // absent entries (a partial tile): their logits are never read
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        const float* row = tile + (8 * nt + gr) * kLd + warp * kWarpCh + 2 * qd;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
          const float2 x0 = *reinterpret_cast<const float2*>(row + 16 * ks);
          const float2 x1 = *reinterpret_cast<const float2*>(row + 16 * ks + 8);
          mma_split(acc, qa[ks], x0.x, x0.y, x1.x, x1.y);
        }
        *reinterpret_cast<float2*>(spw + gr * kSLd + 8 * nt + 2 * qd) = make_float2(acc[0], acc[1]);
        *reinterpret_cast<float2*>(spw + (gr + 8) * kSLd + 8 * nt + 2 * qd) = make_float2(acc[2], acc[3]);
      }
    }
    __syncthreads();

    // 2. Logits (the 8 partials summed in warp order) and the online softmax of
    //    heads 2 warp, 2 warp + 1 over the tile's entries (lane = entry).
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int lh = 2 * warp + i;
      float x = -INFINITY;
      if (lane < c) {  // logits of absent entries were not formed
        float dot = sp[lh * kSLd + lane];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) dot = __fadd_rn(dot, sp[(w * kHeads + lh) * kSLd + lane]);
        x = __fmul_rn(dot, a.scale);
      }
      const float m_new = fmaxf(m_run[i], butterfly_max(x));
      const float cf = expf(__fsub_rn(m_run[i], m_new));
      const float p = lane < c ? expf(__fsub_rn(x, m_new)) : 0.0f;
      l_run[i] = __fmaf_rn(l_run[i], cf, butterfly_sum(p));
      m_run[i] = m_new;
      pr[lh * kSLd + lane] = p;
      if (lane == 0) corr[lh] = cf;
    }
    __syncthreads();

    // 3. O = O * corr + P V over the warp's channels: A = P[head][entry],
    //    B[k = entry][n = channel].
    {
      const float c0 = corr[gr], c1 = corr[gr + 8];
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
        o[nt][0] = __fmul_rn(o[nt][0], c0);
        o[nt][1] = __fmul_rn(o[nt][1], c0);
        o[nt][2] = __fmul_rn(o[nt][2], c1);
        o[nt][3] = __fmul_rn(o[nt][3], c1);
      }
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        if (16 * ks >= c) break;  // entries with p = 0 and zero rows: nothing to add
        const int k0 = 16 * ks + 2 * qd;
        const float2 p00 = *reinterpret_cast<const float2*>(pr + gr * kSLd + k0);
        const float2 p10 = *reinterpret_cast<const float2*>(pr + (gr + 8) * kSLd + k0);
        const float2 p01 = *reinterpret_cast<const float2*>(pr + gr * kSLd + k0 + 8);
        const float2 p11 = *reinterpret_cast<const float2*>(pr + (gr + 8) * kSLd + k0 + 8);
        Frag3 pa;
        split3(p00.x, p00.y, pa.hi[0], pa.mid[0], pa.lo[0]);
        split3(p10.x, p10.y, pa.hi[1], pa.mid[1], pa.lo[1]);
        split3(p01.x, p01.y, pa.hi[2], pa.mid[2], pa.lo[2]);
        split3(p11.x, p11.y, pa.hi[3], pa.mid[3], pa.lo[3]);
        const float* v0 = tile + k0 * kLd + warp * kWarpCh + gr;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          const float* v = v0 + 8 * nt;
          mma_split(o[nt], pa, v[0], v[kLd], v[8 * kLd], v[9 * kLd]);
        }
      }
    }
    __syncthreads();  // this buffer is the target of the load issued next iteration
  }

  // Publish the partial (max, sum, acc) to the cluster: acc over the tile buffers.
  __syncthreads();
  float* xacc = tiles;  // [kHeads][kLd]
#pragma unroll
  for (int nt = 0; nt < 8; ++nt) {
    const int d = warp * kWarpCh + 8 * nt + 2 * qd;
    *reinterpret_cast<float2*>(xacc + gr * kLd + d) = make_float2(o[nt][0], o[nt][1]);
    *reinterpret_cast<float2*>(xacc + (gr + 8) * kLd + d) = make_float2(o[nt][2], o[nt][3]);
  }
  if (lane == 0) {
#pragma unroll
    for (int i = 0; i < 2; ++i) pm[2 * warp + i] = m_run[i], pl[2 * warp + i] = l_run[i];
  }
  cluster.sync();

  // Merge in slice order 0..kAttnSplits-1, the sink joining the max and the sum;
  // block s writes channels [s * slice, (s + 1) * slice) of the group's heads.
  if (tid < kHeads) {
    const int64_t h = int64_t(g0) + tid;
    if (h < a.heads) {
      const float sink = a.sink[h];
      float ms[kAttnSplits], M = sink;
#pragma unroll
      for (int r = 0; r < kAttnSplits; ++r) {
        ms[r] = *cluster.map_shared_rank(pm + tid, r);
        M = fmaxf(M, ms[r]);
      }
      float d = expf(__fsub_rn(sink, M));
#pragma unroll
      for (int r = 0; r < kAttnSplits; ++r) {
        const float w = expf(__fsub_rn(ms[r], M));  // 0 for an empty slice (max -inf)
        wts[tid * kAttnSplits + r] = w;
        d = __fmaf_rn(*cluster.map_shared_rank(pl + tid, r), w, d);
      }
      den[tid] = d;
    }
  }
  __syncthreads();
  {
    // 16 heads x 64 channels: thread = (head, 4 channels), one float4 per peer.
    static_assert(kHeads * slice == 4 * kThreads, "merge: one float4 of channels per thread");
    const int lh = tid / (slice / 4), d = s * slice + 4 * (tid % (slice / 4));
    const int64_t h = int64_t(g0) + lh;
    if (h < a.heads && d < dim) {
      float num[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int r = 0; r < kAttnSplits; ++r) {
        const float4 x = *reinterpret_cast<const float4*>(cluster.map_shared_rank(xacc + lh * kLd + d, r));
        const float w = wts[lh * kAttnSplits + r];
        num[0] = __fmaf_rn(x.x, w, num[0]);
        num[1] = __fmaf_rn(x.y, w, num[1]);
        num[2] = __fmaf_rn(x.z, w, num[2]);
        num[3] = __fmaf_rn(x.w, w, num[3]);
      }
      float* out = a.out + (t * a.heads + h) * a.dim;
#pragma unroll
      for (int x = 0; x < 4; ++x)
        if (d + x < dim) out[d + x] = __fdiv_rn(num[x], den[lh]);
    }
  }
  cluster.sync();  // peers may still be reading this block's partial
}

}  // namespace

cudaError_t sink_attention(const SinkAttentionArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.heads <= 0 || a.dim <= 0 || a.dim > kAttnMaxDim || a.heads > INT_MAX) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.q || !a.kv || !a.offsets || !a.ids || !a.sink || !a.out) return cudaErrorInvalidValue;
  // One block shape for every batch size (so batch invariance needs no argument):
  // at n = 1 and 64 heads that is 4 clusters of 8 = 32 SMs, each staging a slice
  // of the entries once for 16 heads (4x less L2 traffic than 4-head groups), the
  // products on the tensor cores; large n fills the GPU with many such clusters.
  auto* kernel = mqa_attention_kernel;
  const size_t smem = kSmemFloats * sizeof(float);
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (attr != cudaSuccess) return attr;
  const bool vec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.kv) % 16 == 0;
  const int64_t groups = (a.heads + kHeads - 1) / kHeads;
  const int64_t per_launch = std::max<int64_t>(1, INT_MAX / (groups * kAttnSplits));
  for (int64_t t0 = 0; t0 < a.n; t0 += per_launch) {
    SinkAttentionArgs c = a;
    c.n = std::min(per_launch, a.n - t0);
    c.q += t0 * a.heads * a.dim;
    c.out += t0 * a.heads * a.dim;
    c.offsets += t0;  // absolute positions into ids: a sub-range needs no rebasing
    const dim3 grid(unsigned(c.n * groups * kAttnSplits));
    kernel<<<grid, kThreads, smem, stream>>>(c, int(groups), vec);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace deepinfer::kernels
