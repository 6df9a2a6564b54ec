// Small batches outside the batch-invariant mode (SinkAttentionArgs::path): both
// precisions, one kernel, built for latency. The design below is the former kernel's (NOTES
// section 13; kept with the tests, tests/ops_cuda/former_kernels.cu, as the reference of
// the bitwise A/B cases); the current kernel runs the same arithmetic with its rows staged
// ahead (small_attention_kernel below). At n = 1 the batch-invariant kernels
// (smxx_attention_simt.cu, smxx_attention_tc.cu) leave the GPU idle: the SIMT kernel runs
// 2 warps on each of 128 SMs (~33 us for 1.3 MB of entries), the tensor-core one walks all
// 20 tiles of a query on one SM (~120 us).
// Block (t, g, s): query t, heads 4g .. 4g + 3 (the staged kernel: 5g .. 5g + 4), entry slice s of kAttnSplits (a cluster,
// as the SIMT kernel: the same slices of the count, the same DSMEM merge in slice order).
// Inside a block the slice is cut again into 8 warp slices; warp w walks its entries 4 at
// a time straight from global memory (the 4 rows in registers, each read feeding the 4
// heads), keeping its own online softmax per head; the warps' partials are merged in warp
// order, then the cluster's in slice order. No staging, no block barrier per tile: the
// only serial chain is ~3 groups of 4 rows per warp at V4.1 (80 entries per slice).
// Every step depends on the query's own count only, so a query gets the same bits in any
// batch from this kernel too; but not the same bits as the batch-invariant ones (other sums), so
// the batch-invariant mode never mixes them (the choice depends on n).
// kBf16: the bf16 mode's arithmetic (ops/attention.h): q and the entries rounded to bf16
// (exact products), base-2 logits, integer running maxima (the merge weights are powers of
// two), probabilities rounded to bf16 for PV, the denominator from the unrounded ones.
#include <cooperative_groups.h>

#include <algorithm>
#include <climits>

#include "kernels/cuda/smxx_attention_common.cuh"
#include "kernels/cuda/smxx_launch.h"
#include "kernels/cuda/smxx_rope.cuh"

namespace deepinfer::kernels::attn::small {
namespace {

namespace cg = cooperative_groups;

// The current kernel: the former kernel's arithmetic, bit for bit (the same slices, warp
// slices, 4-row steps, lane channels, reduction trees and merge orders), scheduled for
// latency (NOTES section 23):
// - each warp stages its rows in its own shared-memory ring of kRing rows (3 steps) with
//   cp.async, so a V4.1 warp slice (<= 10 rows at 640 entries) is in flight from the
//   block's start instead of one 4-row step per global round trip; a lane copies exactly
//   the 4 x float4 of a row that it reads later, so its own cp.async.wait_group is the
//   only synchronization the ring needs;
// - the ids of the warp's next 32 rows are loaded one window ahead;
// - RoPE's cos / sin once per pair for the block (q's rotation and the output's inverse
//   share them: the inverse is the same values with sin negated, exactly rope_cs(.., true));
// - the merges' weights once per (warp, head) and (slice, head) instead of per channel;
// - a step skips acc *= corr where every head's corr is exactly 1 (x * 1 = x) and in the
//   first step (acc = +0, corr = 0).
// Heads per block: 5, so that a query is 13 clusters (12 x 5 + 4 heads at V4.1's 64) and
// n = 1 runs in one wave where the H200 holds 15 clusters of 8 one-SM blocks (4 heads: 16
// clusters, two waves; NOTES 23 / 25). Heads 0-3 of a block sit in the 16 dot slots of
// reduce_scatter16 as before, head 4 in 4 more slots summed by the same lane-bit tree
// (reduce_fifth), so a head's bits do not depend on its group (the A/B cases compare
// against the former kernel's groups of 4). q lives in shared memory: 5 heads of q and
// accumulators would not fit in 255 registers.
constexpr int kHeadsR = 5;
static_assert(kHeadsR == 4 || kHeadsR == 5, "the dot slots: 16 in reduce_scatter16, plus 4 for a fifth head");
constexpr int kRing = 12;                 // rows staged per warp: kAhead steps of kRows
constexpr int kAhead = kRing / kRows;     // steps in flight
constexpr int kRingFloats = kWarps * kRing * int(kAttnMaxDim);
constexpr int kMaxPairs = int(kAttnMaxDim) / 2;  // RoPE pairs of a head at most
// Shared memory (floats): the rings, which the merges reuse once every warp is done
// (wacc [kWarps][kHeadsR][512], then bacc [kHeadsR][512], the cluster's view); q [kHeadsR][512]
// (rotated and rounded); then wm, wl, wts [kWarps][kHeadsR]; pm, pl [kHeadsR];
// cwt [kAttnSplits][kHeadsR], cden [kHeadsR]; RoPE cos, sin [kMaxPairs].
constexpr int kOffQ = kRingFloats;  // 16-byte aligned: float4 reads
constexpr int kOffWm = kOffQ + kHeadsR * int(kAttnMaxDim), kOffWl = kOffWm + kWarps * kHeadsR, kOffWts = kOffWl + kWarps * kHeadsR;
constexpr int kOffPm = kOffWts + kWarps * kHeadsR, kOffPl = kOffPm + kHeadsR, kOffCwt = kOffPl + kHeadsR;
constexpr int kOffCden = kOffCwt + kAttnSplits * kHeadsR, kOffCos = kOffCden + kHeadsR, kOffSin = kOffCos + kMaxPairs;
constexpr size_t kSmemFloatsRing = size_t(kOffSin + kMaxPairs);
static_assert((kWarps + 1) * kHeadsR * int(kAttnMaxDim) <= kRingFloats, "the merge buffers must fit in the rings");
static_assert(kRing % kRows == 0 && 32 % kRows == 0, "ring and id windows hold whole steps");
static_assert(kMaxPairs <= kThreads, "one thread per RoPE pair");

// The fifth head's 4 dot slots (row r in v[r]) summed across the warp by the tree of
// reduce_scatter16 (lane bits 3, 2, 1, 0, then 4; a + b = b + a, so which lane keeps which
// half does not matter): scatter over bits 3 and 2 (row 2 b3 + b2 stays at the lane), then
// butterflies over 1, 0 and 4. Lane l returns row (l >> 2) & 3.
__device__ __forceinline__ float reduce_fifth(float (&v)[4], int lane) {
  {
    const bool up = (lane & 8) != 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float send = up ? v[i] : v[i + 2];
      const float keep = up ? v[i + 2] : v[i];
      v[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, 8));
    }
  }
  const bool up = (lane & 4) != 0;
  const float send = up ? v[0] : v[1];
  const float keep = up ? v[1] : v[0];
  float x = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, 4));
  x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 2));
  x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 16));
}

// cp.async of 16 bytes; the "memory" clobbers keep the compiler from moving shared-memory
// reads of a slot past the copy that refills it (the copies into a slot are issued after
// the step that read it, in program order).
__device__ __forceinline__ void ring_copy16(float* dst, const float* src) {
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void ring_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void ring_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

template <bool kBf16>
__global__ void __cluster_dims__(kAttnSplits, 1, 1) __launch_bounds__(kThreads, 1)
    small_attention_kernel(SinkAttentionArgs a, int groups, bool vec, bool qvec) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  float* wacc = sm;                                   // after the walk: [kWarps][kHeadsR][512]
  float* bacc = sm + kWarps * kHeadsR * int(kAttnMaxDim);  // [kHeadsR][512]
  float* wm = sm + kOffWm;
  float* wl = sm + kOffWl;
  float* wts = sm + kOffWts;
  float* pm = sm + kOffPm;
  float* pl = sm + kOffPl;
  float* cwt = sm + kOffCwt;
  float* cden = sm + kOffCden;
  float* rcos = sm + kOffCos;
  float* rsin = sm + kOffSin;
  float* qs = sm + kOffQ;

  cg::cluster_group cluster = cg::this_cluster();
  const int s = int(cluster.block_rank());
  const int64_t qg = int64_t(blockIdx.x) / kAttnSplits;
  const int64_t t = qg / groups;
  const int g = int(qg % groups);
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int dim = int(a.dim);
  const int64_t b = a.offsets[t], e = a.offsets[t + 1];
  const int64_t cnt = e - b;

  if (cnt <= 0) {  // sink only: no value, so the output is zero (as the CPU op)
    for (int i = tid; i < kHeadsR * kSlice; i += kThreads) {
      const int lh = i / kSlice, d = s * kSlice + i % kSlice;
      const int64_t h = int64_t(g) * kHeadsR + lh;
      if (h < a.heads && d < dim) a.out[(t * a.heads + h) * a.dim + d] = 0.0f;
    }
    return;  // the whole cluster shares t
  }

  // The block's slice and the warp's part of it (as the former kernel).
  const int64_t chunk = (cnt + kAttnSplits - 1) / kAttnSplits;
  const int64_t j0 = b + s * chunk < e ? b + s * chunk : e, j1 = j0 + chunk < e ? j0 + chunk : e;
  const int64_t len = j1 - j0, sub = (len + kWarps - 1) / kWarps;
  const int64_t w0 = j0 + (warp * sub < len ? warp * sub : len);
  const int64_t w1 = j0 + ((warp + 1) * sub < len ? (warp + 1) * sub : len);
  const int64_t wlen = w1 - w0;  // rows of this warp, local index u = 0 .. wlen - 1

  // Rows u of the warp go to ring slot u % kRing; step k's rows are cp.async group k (one
  // group per step, empty past the list, so that group k is always the k-th committed).
  float* ring = sm + warp * kRing * int(kAttnMaxDim);
  int64_t id_base = 0;  // my_id: ids of rows id_base + lane; next_id: the window after
  int64_t my_id = lane < wlen ? a.ids[w0 + lane] : 0;
  int64_t next_id = 32 + lane < wlen ? a.ids[w0 + 32 + lane] : 0;
  auto issue_step = [&](int64_t k) {  // warp-uniform
    const int64_t u0 = k * kRows;
    if (u0 < wlen) {
      if (u0 - id_base >= 32) {
        id_base += 32;
        my_id = next_id;
        next_id = id_base + 32 + lane < wlen ? a.ids[w0 + id_base + 32 + lane] : 0;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (u0 + r >= wlen) break;
        const int64_t id = __shfl_sync(0xffffffffu, my_id, int(u0 + r - id_base));
        const float* src = a.kv + id * a.dim;
        float* dst = ring + int((u0 + r) % kRing) * int(kAttnMaxDim);
#pragma unroll
        for (int kk = 0; kk < kChunks; ++kk) {
          const int d = 128 * kk + 4 * lane;
          if (vec) {
            if (d < dim) ring_copy16(dst + d, src + d);
          } else {  // rows not 16-byte aligned: plain loads, zero past dim
#pragma unroll
            for (int cc = 0; cc < 4; ++cc) dst[d + cc] = d + cc < dim ? src[d + cc] : 0.0f;
          }
        }
      }
    }
    ring_commit();
  };
#pragma unroll
  for (int k = 0; k < kAhead; ++k) issue_step(k);

  // q of the block's heads into shared memory (zero past dim and for heads past a.heads),
  // while the rows come in; then RoPE (SinkAttentionArgs::rope_dim: cos / sin of pair p at
  // thread p, for q here and the output's inverse at the end) and the bf16 rounding, a
  // thread per channel pair: the values the former kernel kept in registers.
  if (qvec) {
    for (int idx = tid; idx < kHeadsR * int(kAttnMaxDim) / 4; idx += kThreads) {
      const int i = idx / (int(kAttnMaxDim) / 4), d = 4 * (idx % (int(kAttnMaxDim) / 4));
      const int64_t h = int64_t(g) * kHeadsR + i;
      *reinterpret_cast<float4*>(qs + i * int(kAttnMaxDim) + d) =
          h < a.heads && d < dim ? __ldg(reinterpret_cast<const float4*>(a.q + (t * a.heads + h) * a.dim + d))
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  } else {
    for (int idx = tid; idx < kHeadsR * int(kAttnMaxDim); idx += kThreads) {
      const int i = idx / int(kAttnMaxDim), d = idx % int(kAttnMaxDim);
      const int64_t h = int64_t(g) * kHeadsR + i;
      qs[idx] = h < a.heads && d < dim ? a.q[(t * a.heads + h) * a.dim + d] : 0.0f;
    }
  }
  const int rope0 = dim - int(a.rope_dim);
  if (a.rope_dim > 0 && tid < int(a.rope_dim) / 2)
    rope_cs(a.positions[t], a.inv_freq, tid, a.rope_factor, false, rcos[tid], rsin[tid]);
  float acc[kHeadsR][kChunks][4], m_run[kHeadsR], l_run[kHeadsR];
#pragma unroll
  for (int i = 0; i < kHeadsR; ++i) {
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][k][c] = 0.0f;
    m_run[i] = -INFINITY;
    l_run[i] = 0.0f;
  }
  if (a.rope_dim > 0 || kBf16) {
    __syncthreads();
    // A pair (d, d + 1), d even (dim and rope_dim even): rotated where d >= rope0, then rounded.
    for (int idx = tid; idx < kHeadsR * kMaxPairs; idx += kThreads) {
      const int i = idx / kMaxPairs, d = 2 * (idx % kMaxPairs);
      float* qp = qs + i * int(kAttnMaxDim) + d;
      float pr[2] = {qp[0], qp[1]};
      if (a.rope_dim > 0 && d >= rope0 && d < dim) rope_pair(pr, rcos[(d - rope0) / 2], rsin[(d - rope0) / 2]);
      if (kBf16) pr[0] = bf16r(pr[0]), pr[1] = bf16r(pr[1]);
      qp[0] = pr[0], qp[1] = pr[1];
    }
  }
  __syncthreads();
  const float lscale = kBf16 ? a.log2_scale : a.scale;

  const int64_t nsteps = (wlen + kRows - 1) / kRows;
  for (int64_t k = 0; k < nsteps; ++k) {
    ring_wait<kAhead - 1>();  // this lane's copies of step k have landed
    const int c = int(wlen - k * kRows < kRows ? wlen - k * kRows : kRows);
    float v[kRows][kChunks][4];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float* row = ring + int((k * kRows + r) % kRing) * int(kAttnMaxDim);
#pragma unroll
      for (int kk = 0; kk < kChunks; ++kk) {
        const int d = 128 * kk + 4 * lane;
        if (r < c && d < dim) {
          const float4 x = *reinterpret_cast<const float4*>(row + d);
          v[r][kk][0] = x.x, v[r][kk][1] = x.y, v[r][kk][2] = x.z, v[r][kk][3] = x.w;
        } else {
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) v[r][kk][cc] = 0.0f;
        }
      }
    }
    if (kBf16) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int kk = 0; kk < kChunks; ++kk)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) v[r][kk][cc] = bf16r(v[r][kk][cc]);
    }

    // Dots: slot 4 i + r = head i . row r (head 4: part5[r]); after the reduces lane l holds
    // slot l % 16 (lanes 0-15: heads 0-3) and head 4's row l & 3 (lanes 16-31).
    float part[16], part5[4];
#pragma unroll
    for (int x = 0; x < 16; ++x) part[x] = 0.0f;
#pragma unroll
    for (int x = 0; x < 4; ++x) part5[x] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk)
#pragma unroll
      for (int i = 0; i < kHeadsR; ++i) {
        const float4 qv = *reinterpret_cast<const float4*>(qs + i * int(kAttnMaxDim) + 128 * kk + 4 * lane);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float& p = i < 4 ? part[4 * i + r] : part5[r];  // i is a constant here
          p = __fmaf_rn(qv.x, v[r][kk][0], p);
          p = __fmaf_rn(qv.y, v[r][kk][1], p);
          p = __fmaf_rn(qv.z, v[r][kk][2], p);
          p = __fmaf_rn(qv.w, v[r][kk][3], p);
        }
      }
    float dot = reduce_scatter16(part, lane);
    if (kHeadsR == 5) {
      const float d5 = __shfl_sync(0xffffffffu, reduce_fifth(part5, lane), 4 * (lane & 3));
      dot = lane < 16 ? dot : d5;
    }
    // Lanes 4 i + r: head i, row r (i < 4); lanes 16-31 head 4 (4 heads: a copy of 0-15).
    const int my_h = lane < 16 ? lane >> 2 : (kHeadsR == 5 ? 4 : (lane & 15) >> 2), my_r = lane & 3;
    const float x = my_r < c ? __fmul_rn(dot, lscale) : -INFINITY;

    // Online softmax per head over the step's rows (lanes 4 i .. 4 i + 3 hold head i).
    float gm = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    gm = fmaxf(gm, __shfl_xor_sync(0xffffffffu, gm, 2));
    float mh = 0.0f;  // this lane's head's running max
#pragma unroll
    for (int i = 0; i < kHeadsR; ++i) mh = my_h == i ? m_run[i] : mh;
    const float m_new = fmaxf(mh, kBf16 ? ceilf(gm) : gm);
    const float p = my_r < c ? (kBf16 ? exp2f(__fsub_rn(x, m_new)) : expf(__fsub_rn(x, m_new))) : 0.0f;
    float rs = __fadd_rn(p, __shfl_xor_sync(0xffffffffu, p, 1));
    rs = __fadd_rn(rs, __shfl_xor_sync(0xffffffffu, rs, 2));
    const float corr = rescale<kBf16>(mh, m_new);
    const float pv = kBf16 ? bf16r(p) : p;
    float ci[kHeadsR];
    bool same = true;  // every head's corr is 1: acc * corr = acc
#pragma unroll
    for (int i = 0; i < kHeadsR; ++i) {
      ci[i] = __shfl_sync(0xffffffffu, corr, 4 * i);
      m_run[i] = __shfl_sync(0xffffffffu, m_new, 4 * i);
      l_run[i] = __fmaf_rn(l_run[i], ci[i], __shfl_sync(0xffffffffu, rs, 4 * i));
      same = same && ci[i] == 1.0f;
    }
    if (k > 0 && !same) {  // step 0: acc = +0 and corr = 0 (rescale of -inf), so acc * corr = acc
#pragma unroll
      for (int i = 0; i < kHeadsR; ++i)
#pragma unroll
        for (int kk = 0; kk < kChunks; ++kk)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) acc[i][kk][cc] = __fmul_rn(acc[i][kk][cc], ci[i]);
    }
    // acc += p v, rows in order (a row past c has p = 0 and zero values).
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int i = 0; i < kHeadsR; ++i) {
        const float pr = __shfl_sync(0xffffffffu, pv, 4 * i + r);
#pragma unroll
        for (int kk = 0; kk < kChunks; ++kk)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) acc[i][kk][cc] = __fmaf_rn(pr, v[r][kk][cc], acc[i][kk][cc]);
      }
    issue_step(k + kAhead);  // into this step's slots, which it no longer reads
  }
  ring_wait<0>();
  __syncthreads();  // every warp is done with its ring: the merge buffers reuse them

  // The warps' partials, merged in warp order into the block's.
#pragma unroll
  for (int i = 0; i < kHeadsR; ++i) {
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
      *reinterpret_cast<float4*>(wacc + (warp * kHeadsR + i) * int(kAttnMaxDim) + 128 * k + 4 * lane) =
          make_float4(acc[i][k][0], acc[i][k][1], acc[i][k][2], acc[i][k][3]);
    if (lane == 0) wm[warp * kHeadsR + i] = m_run[i], wl[warp * kHeadsR + i] = l_run[i];
  }
  __syncthreads();
  if (warp < (kHeadsR + 3) / 4) {  // warp hw, lane 4 w + j: warp w's weight for head i = 4 hw + j;
    const int j = lane & 3, i = 4 * warp + j, w = lane >> 2;  // the common max and sum per head
    const bool hv = i < kHeadsR;
    float M = -INFINITY;
#pragma unroll
    for (int ww = 0; ww < kWarps; ++ww) M = hv ? fmaxf(M, wm[ww * kHeadsR + i]) : M;
    const float wt = hv ? rescale<kBf16>(wm[w * kHeadsR + i], M) : 0.0f;
    if (hv) wts[w * kHeadsR + i] = wt;
    float den = 0.0f;
#pragma unroll
    for (int ww = 0; ww < kWarps; ++ww)
      den = __fmaf_rn(hv ? wl[ww * kHeadsR + i] : 0.0f, __shfl_sync(0xffffffffu, wt, 4 * ww + j), den);
    if (lane < 4 && hv) pm[i] = M, pl[i] = den;
  }
  __syncthreads();
  for (int idx = tid; idx < kHeadsR * int(kAttnMaxDim) / 4; idx += kThreads) {
    const int i = idx / (int(kAttnMaxDim) / 4), d = 4 * (idx % (int(kAttnMaxDim) / 4));
    float4 num = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = wts[w * kHeadsR + i];
      const float4 x = *reinterpret_cast<const float4*>(wacc + (w * kHeadsR + i) * int(kAttnMaxDim) + d);
      num.x = __fmaf_rn(x.x, wt, num.x);
      num.y = __fmaf_rn(x.y, wt, num.y);
      num.z = __fmaf_rn(x.z, wt, num.z);
      num.w = __fmaf_rn(x.w, wt, num.w);
    }
    *reinterpret_cast<float4*>(bacc + i * int(kAttnMaxDim) + d) = num;
  }
  cluster.sync();

  // The slices' weights with the sink, once per (slice, head): lane 4 r + i.
  if (warp < (kHeadsR + 3) / 4) {  // warp hw, lane 4 r + j: head i = 4 hw + j
    const int j = lane & 3, i = 4 * warp + j, r = lane >> 2;
    const bool hv = i < kHeadsR;
    const int64_t h = int64_t(g) * kHeadsR + i;
    const float sk = hv && h < a.heads ? a.sink[h] : 0.0f;
    const float ys = kBf16 ? __fmul_rn(sk, kAttnLog2eDev) : sk;
    const float msr = hv ? *cluster.map_shared_rank(pm + i, r) : -INFINITY;
    const float plr = hv ? *cluster.map_shared_rank(pl + i, r) : 0.0f;
    float mx = msr;  // the max over the 8 slices (lanes i, i + 4, ..): exact in any order
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
    const float M = fmaxf(kBf16 ? ceilf(ys) : ys, mx);
    const float wt = rescale<kBf16>(msr, M);
    if (hv) cwt[r * kHeadsR + i] = wt;
    float den = kBf16 ? exp2f(__fsub_rn(ys, M)) : expf(__fsub_rn(ys, M));
#pragma unroll
    for (int rr = 0; rr < kAttnSplits; ++rr)
      den = __fmaf_rn(__shfl_sync(0xffffffffu, plr, 4 * rr + j), __shfl_sync(0xffffffffu, wt, 4 * rr + j), den);
    if (lane < 4 && hv) cden[i] = den;
  }
  __syncthreads();

  // Block s writes channels [s * kSlice, (s + 1) * kSlice) of the 4 heads, a thread per
  // channel pair (the output's inverse RoPE needs both values of its pair).
  constexpr int kPairs = kSlice / 2;
  for (int idx = tid; idx < kHeadsR * kPairs; idx += kThreads) {
    const int i = idx / kPairs, d = s * kSlice + 2 * (idx % kPairs);
    const int64_t h = int64_t(g) * kHeadsR + i;
    if (h >= a.heads || d >= dim) continue;
    float num0 = 0.0f, num1 = 0.0f;
#pragma unroll
    for (int r = 0; r < kAttnSplits; ++r) {
      const float wt = cwt[r * kHeadsR + i];
      const float2 x = *reinterpret_cast<const float2*>(cluster.map_shared_rank(bacc + i * int(kAttnMaxDim) + d, r));
      num0 = __fmaf_rn(x.x, wt, num0);
      num1 = __fmaf_rn(x.y, wt, num1);  // d + 1 <= 511: inside the row (zero past dim)
    }
    const float den = cden[i];
    float o[2] = {__fdiv_rn(num0, den), __fdiv_rn(num1, den)};
    if (a.rope_dim > 0 && d >= rope0) {  // d - rope0 even: a whole pair; the inverse = sin negated
      const int pidx = (d - rope0) / 2;
      rope_pair(o, rcos[pidx], -rsin[pidx]);
    }
    float* dst = a.out + (t * a.heads + h) * a.dim + d;
    dst[0] = o[0];
    if (d + 1 < dim) dst[1] = o[1];
  }
  cluster.sync();  // peers may still be reading this block's partial
}

template <bool kBf16>
cudaError_t launch_one(const SinkAttentionArgs& a, cudaStream_t stream) {
  auto* kernel = small_attention_kernel<kBf16>;
  const size_t smem = kSmemFloatsRing * sizeof(float);
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (attr != cudaSuccess) return attr;
  const bool vec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.kv) % 16 == 0;
  const bool qvec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.q) % 16 == 0;
  const int64_t groups = (a.heads + kHeadsR - 1) / kHeadsR;
  const int64_t per_launch = std::max<int64_t>(1, INT_MAX / (groups * kAttnSplits));
  for (int64_t t0 = 0; t0 < a.n; t0 += per_launch) {
    SinkAttentionArgs c = a;
    c.n = std::min(per_launch, a.n - t0);
    c.q += t0 * a.heads * a.dim;
    c.out += t0 * a.heads * a.dim;
    c.offsets += t0;
    if (c.positions) c.positions += t0;
    kernel<<<dim3(unsigned(c.n * groups * kAttnSplits)), kThreads, smem, stream>>>(c, int(groups), vec, qvec);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// cudaOccupancyMaxActiveClusters of a kernel at its launch shape (the benchmark prints it:
// a cluster of 8 blocks of one SM each must fit in one GPC).
template <class K>
int max_clusters(K* kernel, size_t smem) {
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) != cudaSuccess) return -1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(kAttnSplits * 64), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = smem;
  LaunchAttrs attrs;
  attrs.cluster(kAttnSplits).apply(cfg);
  int n = -1;
  return cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) == cudaSuccess ? n : -1;
}

}  // namespace

cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream) {
  return a.bf16 ? launch_one<true>(a, stream) : launch_one<false>(a, stream);
}

}  // namespace deepinfer::kernels::attn::small

namespace deepinfer::kernels {

int attention_small_heads_per_block() { return attn::small::kHeadsR; }

int attention_small_max_clusters(bool bf16) {
  namespace s = attn::small;
  const size_t smem = s::kSmemFloatsRing * sizeof(float);
  return bf16 ? s::max_clusters(s::small_attention_kernel<true>, smem) : s::max_clusters(s::small_attention_kernel<false>, smem);
}

}  // namespace deepinfer::kernels
