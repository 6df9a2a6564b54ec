// The kernels as they were before the small-kernel rework (commit 57ea040), kept
// verbatim as the reference of the A/B cases (cases_former.cpp): the new kernels run
// the same operations in the same order, so their results must be bitwise these.
// Only the launchers below are new. At the end, the same for the small-batch attention
// kernel before its staged rework (cases_hc_attention.cpp's A/B cases).
#include "former_kernels.h"

#include <cooperative_groups.h>

#include <algorithm>
#include <climits>

#include "kernels/cuda/smxx_attention_common.cuh"
#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_rope.cuh"

namespace deepinfer::testing_cuda::former {
namespace {
using namespace deepinfer::kernels;

constexpr int kMaxMix = kMaxMixes;  // the short name used below
constexpr int kMixThreads = 128;  // one column (all streams) per thread: 128 columns per split at V4.1

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

// Column d of token t's hc streams after the expand: new h[k][d] = post[k] y[d] +
// Σ_j comb[j][k] h[j][d], stored and returned in f. Explicit _rn operations keep the
// CPU's unfused multiply-then-add order, so the results agree bit for bit; shared by
// hc_expand_kernel and the expand fused into the mixes' partial sums.
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
    float mixed = 0.0f;
#pragma unroll
    for (int j = 0; j < kMaxHc; ++j)
      if (j < hc) mixed = __fadd_rn(mixed, __fmul_rn(c[j * hc + k], old[j]));
    f[k] = __fadd_rn(__fmul_rn(a.post[t * hc + k], y), mixed);
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

// Token t's mixes from the split sums mix[0 .. kMaxMix] (one thread): normalizes (r Σ
// h·fn is the projection of the RMS-normalized state), then the gates and the tiny
// Sinkhorn problem. Not inlined, so hc_mixes_finish_kernel and the fused
// hc_mixes_finish_collapse_norm_kernel run the very same instructions (bitwise equal
// results whatever the compiler would contract in each caller).
__device__ __noinline__ void mixes_finish_token(const HcMixesArgs a, float* mix, int64_t t) {
  const int hc = int(a.hc), num_mix = (2 + hc) * hc;
  const int64_t width = a.hc * a.dim;
  const float r = 1.0f / sqrtf(mix[kMaxMix] / float(width) + a.norm_eps);
  for (int m = 0; m < num_mix; ++m) mix[m] *= r;

  float* pre = a.pre + t * hc;
  float* post = a.post + t * hc;
  float c[kMaxHc][kMaxHc];
  for (int k = 0; k < hc; ++k) {
    pre[k] = sigmoid(mix[k] * a.scale[0] + a.base[k]) + a.hc_eps;
    post[k] = 2.0f * sigmoid(mix[hc + k] * a.scale[1] + a.base[hc + k]);
  }
#pragma unroll
  for (int j = 0; j < kMaxHc; ++j) {
    if (j >= hc) break;
    float mx = -INFINITY, sum = 0.0f;
#pragma unroll
    for (int k = 0; k < kMaxHc; ++k)
      if (k < hc) {
        c[j][k] = mix[2 * hc + j * hc + k] * a.scale[2] + a.base[2 * hc + j * hc + k];
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

// Threads 0..kMaxMix of the block sum token t's splits in split order into mix.
__device__ __forceinline__ void mixes_sum_splits(const float* ws, int splits, int64_t t, float* mix) {
  if (threadIdx.x <= kMaxMix) {
    float v = 0.0f;
    for (int s = 0; s < splits; ++s) v += ws[(t * splits + s) * (kMaxMix + 1) + threadIdx.x];
    mix[threadIdx.x] = v;
  }
}



// One block of kCollapseNormThreads per token. Element d: the collapse's sum over the
// streams (hc_collapse_kernel's order); the sum of squares: thread i adds elements i,
// i + 256, .. with an FMA, then block_sum (rms_norm_kernel's order and arithmetic).
constexpr int kCollapseNormThreads = 256;
__device__ __forceinline__ void collapse_norm_token(const HcCollapseNormArgs& a, int64_t t, float* row,
                                                    float* scratch) {
  const float* h = a.h + t * a.hc * a.dim;
  const float* pre = a.pre + t * a.hc;
  float ss = 0.0f;
  for (int64_t d = threadIdx.x; d < a.dim; d += blockDim.x) {
    float acc = 0.0f;
    for (int64_t k = 0; k < a.hc; ++k) acc = __fadd_rn(acc, __fmul_rn(pre[k], h[k * a.dim + d]));
    row[d] = acc;
    ss = __fmaf_rn(acc, acc, ss);
  }
  ss = block_sum(ss, scratch);
  const float r = 1.0f / sqrtf(ss / float(a.dim) + a.eps);
  float* x = a.x + t * a.dim;
  for (int64_t d = threadIdx.x; d < a.dim; d += blockDim.x) {
    const float v = __fmul_rn(row[d], r);
    x[d] = a.weight ? __fmul_rn(a.weight[d], v) : v;
  }
}


// The mixes' finish fused into the collapse + norm that follows it in a decode layer
// (one node fewer per hyper-connection site): block t first collapses and normalizes
// token t with cn.pre (the previous site's weights, never m.pre), then sums the splits
// and runs the finish of m for token t. Both halves are the separate kernels' code.
__global__ void __launch_bounds__(kCollapseNormThreads)
    hc_mixes_finish_collapse_norm_kernel(HcMixesArgs m, const float* ws, int splits, HcCollapseNormArgs cn) {
  extern __shared__ float row[];
  __shared__ float scratch[32];
  __shared__ float mix[kMaxMix + 1];
  const int64_t t = blockIdx.x;
  collapse_norm_token(cn, t, row, scratch);
  mixes_sum_splits(ws, splits, t, mix);
  __syncthreads();
  if (threadIdx.x == 0) mixes_finish_token(m, mix, t);
}


// cos / sin of pair i at a position: the fp32 angle evaluated in double and rounded,
// exactly as the CPU does.
__device__ __forceinline__ void rope_cs(int64_t pos, const float* inv_freq, int64_t i, float factor, bool inverse,
                                        float& c, float& s) {
  const float angle = float(pos) * inv_freq[i];
  double sd, cd;
  sincos(double(angle), &sd, &cd);
  c = float(cd) * factor;
  s = float(sd) * factor;
  if (inverse) s = -s;
}
// __fmul_rn keeps the two products unfused, as the CPU computes them.
__device__ __forceinline__ void rope_pair(float* v, float c, float s) {
  const float x0 = v[0], x1 = v[1];
  v[0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  v[1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

// One thread per (token, pair), applied to every head.
__global__ void rope_kernel(RopeArgs a) {
  const int64_t half = a.rope_dim / 2;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.n * half) return;
  const int64_t t = idx / half, i = idx % half;
  float c, s;
  rope_cs(a.positions[t], a.inv_freq, i, a.attention_factor, a.inverse, c, s);
  const int64_t d0 = a.dim - a.rope_dim + 2 * i;
  for (int64_t h = 0; h < a.heads; ++h) rope_pair(a.x + (t * a.heads + h) * a.dim + d0, c, s);
}


// One warp per token; scores and biased scores live in shared memory. Each of the
// top_k rounds is a warp argmax (larger value, then lower id), after which the
// winner is marked taken. The picks come out in the oracle's order (descending,
// ties by id), so the weight sum is formed in the same order too.
__global__ void router_select_kernel(RouterSelectArgs a) {
  extern __shared__ float sm[];
  const int64_t t = blockIdx.x;
  const int lane = threadIdx.x;
  const int E = int(a.num_experts);
  float* score = sm;
  float* biased = sm + E;
  for (int e = lane; e < E; e += 32) {
    const float z = a.logits[t * E + e] / a.temp;
    const float sp = z > 20.0f ? z : float(log1p(exp(double(z))));
    score[e] = sqrtf(sp);
    biased[e] = score[e] + (a.bias ? a.bias[e] : 0.0f);
  }
  __syncwarp();
  int64_t* ids = a.expert_ids + t * a.top_k;
  float* wts = a.expert_weights + t * a.top_k;
  for (int64_t k = 0; k < a.top_k; ++k) {
    float best = -INFINITY;
    int best_id = -1;
    for (int e = lane; e < E; e += 32) {
      const float b = biased[e];
      if (b == -INFINITY && best_id >= 0) continue;
      if (best_id < 0 || b > best) {  // ascending e per lane: '>' keeps the lower id on ties
        best = b;
        best_id = e;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oid = __shfl_xor_sync(0xffffffffu, best_id, o);
      const bool take = oid >= 0 && (best_id < 0 || ob > best || (ob == best && oid < best_id));
      if (take) {
        best = ob;
        best_id = oid;
      }
    }
    if (lane == 0) {
      ids[k] = best_id;
      biased[best_id] = -INFINITY;  // taken; remaining ties still resolve by id
    }
    __syncwarp();
  }
  if (lane != 0) return;
  // Taken experts were overwritten in `biased`, but their ids are in `ids`.
  float sum = 0.0f;
  for (int64_t k = 0; k < a.top_k; ++k) sum += score[ids[k]];
  for (int64_t k = 0; k < a.top_k; ++k) {
    float w = score[ids[k]];
    if (a.norm_topk_prob && a.top_k > 1) w = w / (sum + 1e-20f);
    wts[k] = w * a.routed_scaling_factor;
  }
}


// One block per token: its slots sorted by (expert id, slot), summed from 0 in that
// order, then + residual: the CPU model's order, fixed per token.
constexpr int kMaxTopK = 16;
__global__ void moe_combine_kernel(MoeCombineArgs a) {
  const int64_t t = blockIdx.x;
  int32_t rows[kMaxTopK];
  int64_t ids[kMaxTopK];
  int m = 0;
  for (int j = 0; j < a.k; ++j) {
    const int32_t p = a.slot_row[t * a.k + j];
    if (p < 0) continue;
    const int64_t id = a.expert_ids[t * a.k + j];
    int q = m++;
    while (q > 0 && ids[q - 1] > id) {  // stable: equal ids keep slot order
      ids[q] = ids[q - 1];
      rows[q] = rows[q - 1];
      --q;
    }
    ids[q] = id;
    rows[q] = p;
  }
  for (int64_t c = threadIdx.x; c < a.dim; c += blockDim.x) {
    float acc = 0.0f;
    for (int i = 0; i < m; ++i) acc += a.y[int64_t(rows[i]) * a.dim + c];
    if (a.residual) acc = acc + a.residual[t * a.dim + c];
    a.out[t * a.dim + c] = acc;
  }
}

// engram_gate before the batch-1 rework (session 6, helper b1misc): one element per
// loop step.
__device__ __forceinline__ double block_sum_d(double v, double* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : 0.0;
  return warp_sum(v);
}

// One block per (token, stream). The gate uses the same fp32 expressions as the CPU
// (engram.cpp) after double sums.
__global__ void engram_gate_kernel(EngramGateArgs a) {
  __shared__ double scratch[32];
  const int64_t t = blockIdx.x / a.hc, k = blockIdx.x % a.hc, d = a.dim;
  float* hk = a.h + (t * a.hc + k) * d;
  const float* key = a.kv + (t * (a.hc + 1) + k) * d;
  const float* value = a.kv + (t * (a.hc + 1) + a.hc) * d;
  const float* gw = a.gate_weight + k * d;
  double ssh = 0, ssk = 0, dot = 0;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) {
    ssh += double(hk[i]) * hk[i];
    ssk += double(key[i]) * key[i];
    dot += double(hk[i]) * gw[i] * key[i];
  }
  ssh = block_sum_d(ssh, scratch);
  ssk = block_sum_d(ssk, scratch);
  dot = block_sum_d(dot, scratch);
  const float rstd = (1.0f / sqrtf(float(ssh / d) + a.eps)) * (1.0f / sqrtf(float(ssk / d) + a.eps));
  const float g = float(dot) * rstd / sqrtf(float(d));
  const float root = sqrtf(fmaxf(fabsf(g), 1e-6f));
  const float gate = 1.0f / (1.0f + expf(-copysignf(root, g)));
  __syncthreads();  // every thread has read hk before it is updated
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) hk[i] += gate * value[i];
}

}  // namespace

cudaError_t hc_mixes_collapse_norm(const HcExpandArgs* e, const HcMixesArgs& m, const HcCollapseNormArgs& cn) {
  const int64_t splits = hc_mixes_splits(m.hc, m.dim), dchunk = (m.dim + splits - 1) / splits;
  const dim3 grid(unsigned(splits), unsigned(m.n));
  if (e) hc_mixes_partial_kernel<true><<<grid, kMixThreads, 0>>>(m, *e, m.workspace, dchunk);
  else hc_mixes_partial_kernel<false><<<grid, kMixThreads, 0>>>(m, HcExpandArgs{}, m.workspace, dchunk);
  hc_mixes_finish_collapse_norm_kernel<<<unsigned(m.n), kCollapseNormThreads, size_t(cn.dim) * sizeof(float)>>>(
      m, m.workspace, int(splits), cn);
  return cudaGetLastError();
}

cudaError_t rope(const RopeArgs& a) {
  rope_kernel<<<grid_1d(a.n * (a.rope_dim / 2), 128), 128>>>(a);
  return cudaGetLastError();
}

cudaError_t router_select(const RouterSelectArgs& a) {
  router_select_kernel<<<unsigned(a.n), 32, 2 * sizeof(float) * size_t(a.num_experts)>>>(a);
  return cudaGetLastError();
}

cudaError_t engram_gate(const EngramGateArgs& a) {
  const int threads = a.dim >= 256 ? 256 : a.dim > 64 ? 128 : 64;  // the model kernels' row_threads
  engram_gate_kernel<<<unsigned(a.n * a.hc), threads>>>(a);
  return cudaGetLastError();
}

cudaError_t moe_combine(const MoeCombineArgs& a) {
  moe_combine_kernel<<<unsigned(a.n), 256>>>(a);
  return cudaGetLastError();
}


// The small-batch sink attention kernel before its staged rework (NOTES sections 13 and
// 23), moved here verbatim from the library (smxx_attention.cu, namespace small, where it
// was gpu_path 3): the reference of the bitwise A/B cases against the current kernel
// (kernels/cuda/smxx_attention_small.cu). Heads per block 4; the helpers it shares with
// the current kernel come from the library (smxx_attention_common.cuh), so both sum with
// the same trees.
namespace {
namespace small_attention {

namespace cg = cooperative_groups;
// The library's names, ahead of this file's former RoPE helpers (the same arithmetic).
using deepinfer::kernels::rope_cs;
using deepinfer::kernels::rope_pair;
using kernels::attn::small::bf16r;
using kernels::attn::small::kChunks;
using kernels::attn::small::kRows;
using kernels::attn::small::kSlice;
using kernels::attn::small::kThreads;
using kernels::attn::small::kWarps;
using kernels::attn::small::reduce_scatter16;
using kernels::attn::small::rescale;

constexpr int kHeads = 4;   // heads per block (a lane keeps 4 x 16 q and accumulator values)
// Shared memory: the warps' accumulators [kWarps][kHeads][512], then the block's
// [kHeads][512] (read by the cluster), the warps' (max, sum) and the block's.
constexpr size_t kSmemFloats = size_t(kWarps + 1) * kHeads * kAttnMaxDim + 2 * kWarps * kHeads + 2 * kHeads;

// The rows of each step loaded from global memory into registers after the previous
// step, the warp merge's weights recomputed per channel.
template <bool kBf16>
__global__ void __cluster_dims__(kAttnSplits, 1, 1) __launch_bounds__(kThreads, 1)
    former_attention_kernel(SinkAttentionArgs a, int groups, bool vec) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  extern __shared__ float4 smem4[];
  float* wacc = reinterpret_cast<float*>(smem4);                 // [kWarps][kHeads][512]
  float* bacc = wacc + kWarps * kHeads * int(kAttnMaxDim);       // [kHeads][512]
  float* wm = bacc + kHeads * int(kAttnMaxDim);                  // [kWarps][kHeads]
  float* wl = wm + kWarps * kHeads;                              // [kWarps][kHeads]
  float* pm = wl + kWarps * kHeads;                              // [kHeads]
  float* pl = pm + kHeads;                                       // [kHeads]

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
    for (int i = tid; i < kHeads * kSlice; i += kThreads) {
      const int lh = i / kSlice, d = s * kSlice + i % kSlice;
      const int64_t h = int64_t(g) * kHeads + lh;
      if (h < a.heads && d < dim) a.out[(t * a.heads + h) * a.dim + d] = 0.0f;
    }
    return;  // the whole cluster shares t
  }

  // The block's slice (as the SIMT kernel), then the warp's part of it.
  const int64_t chunk = (cnt + kAttnSplits - 1) / kAttnSplits;
  const int64_t j0 = b + s * chunk < e ? b + s * chunk : e, j1 = j0 + chunk < e ? j0 + chunk : e;
  const int64_t len = j1 - j0, sub = (len + kWarps - 1) / kWarps;
  const int64_t w0 = j0 + (warp * sub < len ? warp * sub : len);
  const int64_t w1 = j0 + ((warp + 1) * sub < len ? (warp + 1) * sub : len);

  // Lane l: channels 128 k + 4 l .. + 3 of every row, for the block's 4 heads.
  float q[kHeads][kChunks][4], acc[kHeads][kChunks][4], m_run[kHeads], l_run[kHeads];
#pragma unroll
  for (int i = 0; i < kHeads; ++i) {
    const int64_t h = int64_t(g) * kHeads + i;
    const bool valid = h < a.heads;
    const float* qh = a.q + (t * a.heads + (valid ? h : 0)) * a.dim;
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int d = 128 * k + 4 * lane + c;
        q[i][k][c] = valid && d < dim ? qh[d] : 0.0f;
        acc[i][k][c] = 0.0f;
      }
    m_run[i] = -INFINITY;
    l_run[i] = 0.0f;
  }
  // RoPE of q (SinkAttentionArgs::rope_dim): dim is even, so a pair (rope start + 2 p,
  // + 1) is channels c = 0, 1 or 2, 3 of one lane; cos / sin once per pair for the 4 heads.
  const int rope0 = dim - int(a.rope_dim);
  if (a.rope_dim > 0) {
    const int64_t pos = a.positions[t];
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
#pragma unroll
      for (int c = 0; c < 4; c += 2) {
        const int d = 128 * k + 4 * lane + c;
        if (d < rope0 || d >= dim) continue;
        float cs, sn;
        rope_cs(pos, a.inv_freq, (d - rope0) / 2, a.rope_factor, false, cs, sn);
#pragma unroll
        for (int i = 0; i < kHeads; ++i) {
          float pr[2] = {q[i][k][c], q[i][k][c + 1]};
          rope_pair(pr, cs, sn);
          q[i][k][c] = pr[0], q[i][k][c + 1] = pr[1];
        }
      }
  }
  if (kBf16) {
#pragma unroll
    for (int i = 0; i < kHeads; ++i)
#pragma unroll
      for (int k = 0; k < kChunks; ++k)
#pragma unroll
        for (int c = 0; c < 4; ++c) q[i][k][c] = bf16r(q[i][k][c]);
  }
  const float lscale = kBf16 ? a.log2_scale : a.scale;

  int64_t id_base = w0;
  int64_t my_id = lane < w1 - w0 ? a.ids[w0 + lane] : 0;  // the ids of the next 32 entries
  for (int64_t j = w0; j < w1; j += kRows) {
    if (j - id_base >= 32) {  // warp-uniform
      id_base = j;
      my_id = lane < w1 - j ? a.ids[j + lane] : 0;
    }
    const int c = int(w1 - j < kRows ? w1 - j : kRows);
    float v[kRows][kChunks][4];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t id = __shfl_sync(0xffffffffu, my_id, int(j - id_base) + r);
      const float* src = a.kv + id * a.dim;
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        const int d = 128 * k + 4 * lane;
        if (r < c && vec && d < dim) {
          const float4 x = __ldg(reinterpret_cast<const float4*>(src + d));
          v[r][k][0] = x.x, v[r][k][1] = x.y, v[r][k][2] = x.z, v[r][k][3] = x.w;
        } else {
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) v[r][k][cc] = r < c && d + cc < dim ? src[d + cc] : 0.0f;
        }
      }
    }
    if (kBf16) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int k = 0; k < kChunks; ++k)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) v[r][k][cc] = bf16r(v[r][k][cc]);
    }

    // Dots: slot 4 i + r = head i . row r; after the reduce lane l holds slot l % 16.
    float part[16];
#pragma unroll
    for (int x = 0; x < 16; ++x) part[x] = 0.0f;
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
#pragma unroll
      for (int i = 0; i < kHeads; ++i)
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float& p = part[4 * i + r];
          p = __fmaf_rn(q[i][k][0], v[r][k][0], p);
          p = __fmaf_rn(q[i][k][1], v[r][k][1], p);
          p = __fmaf_rn(q[i][k][2], v[r][k][2], p);
          p = __fmaf_rn(q[i][k][3], v[r][k][3], p);
        }
    const float dot = reduce_scatter16(part, lane);
    const int my_h = (lane & 15) >> 2, my_r = lane & 3;
    const float x = my_r < c ? __fmul_rn(dot, lscale) : -INFINITY;

    // Online softmax per head over the step's rows (lanes 4 i .. 4 i + 3 hold head i).
    float gm = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    gm = fmaxf(gm, __shfl_xor_sync(0xffffffffu, gm, 2));
    float mh = 0.0f;  // this lane's head's running max
#pragma unroll
    for (int i = 0; i < kHeads; ++i) mh = my_h == i ? m_run[i] : mh;
    const float m_new = fmaxf(mh, kBf16 ? ceilf(gm) : gm);
    const float p = my_r < c ? (kBf16 ? exp2f(__fsub_rn(x, m_new)) : expf(__fsub_rn(x, m_new))) : 0.0f;
    float rs = __fadd_rn(p, __shfl_xor_sync(0xffffffffu, p, 1));
    rs = __fadd_rn(rs, __shfl_xor_sync(0xffffffffu, rs, 2));
    const float corr = rescale<kBf16>(mh, m_new);
    const float pv = kBf16 ? bf16r(p) : p;
#pragma unroll
    for (int i = 0; i < kHeads; ++i) {
      const float ci = __shfl_sync(0xffffffffu, corr, 4 * i);
      m_run[i] = __shfl_sync(0xffffffffu, m_new, 4 * i);
      l_run[i] = __fmaf_rn(l_run[i], ci, __shfl_sync(0xffffffffu, rs, 4 * i));
#pragma unroll
      for (int k = 0; k < kChunks; ++k)
#pragma unroll
        for (int cc = 0; cc < 4; ++cc) acc[i][k][cc] = __fmul_rn(acc[i][k][cc], ci);
    }
    // acc += p v, rows in order (a row past c has p = 0 and zero values).
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int i = 0; i < kHeads; ++i) {
        const float pr = __shfl_sync(0xffffffffu, pv, 4 * i + r);
#pragma unroll
        for (int k = 0; k < kChunks; ++k)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) acc[i][k][cc] = __fmaf_rn(pr, v[r][k][cc], acc[i][k][cc]);
      }
  }

  // The warps' partials, merged in warp order into the block's.
#pragma unroll
  for (int i = 0; i < kHeads; ++i) {
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
      *reinterpret_cast<float4*>(wacc + (warp * kHeads + i) * int(kAttnMaxDim) + 128 * k + 4 * lane) =
          make_float4(acc[i][k][0], acc[i][k][1], acc[i][k][2], acc[i][k][3]);
    if (lane == 0) wm[warp * kHeads + i] = m_run[i], wl[warp * kHeads + i] = l_run[i];
  }
  __syncthreads();
  for (int idx = tid; idx < kHeads * int(kAttnMaxDim); idx += kThreads) {
    const int i = idx / int(kAttnMaxDim), d = idx % int(kAttnMaxDim);
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wm[w * kHeads + i]);
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = rescale<kBf16>(wm[w * kHeads + i], M);
      num = __fmaf_rn(wacc[(w * kHeads + i) * int(kAttnMaxDim) + d], wt, num);
      den = __fmaf_rn(wl[w * kHeads + i], wt, den);
    }
    bacc[idx] = num;
    if (d == 0) pm[i] = M, pl[i] = den;
  }
  cluster.sync();

  // Merge the slices in order 0..kAttnSplits-1 with the sink; block s writes channels
  // [s * kSlice, (s + 1) * kSlice) of the 4 heads, a thread per channel pair (so that the
  // output's inverse RoPE has both values of its pair).
  constexpr int kPairs = kSlice / 2;
  for (int idx = tid; idx < kHeads * kPairs; idx += kThreads) {
    const int i = idx / kPairs, d = s * kSlice + 2 * (idx % kPairs);
    const int64_t h = int64_t(g) * kHeads + i;
    if (h >= a.heads || d >= dim) continue;
    const float ys = kBf16 ? __fmul_rn(a.sink[h], kAttnLog2eDev) : a.sink[h];
    float ms[kAttnSplits], M = kBf16 ? ceilf(ys) : ys;
#pragma unroll
    for (int r = 0; r < kAttnSplits; ++r) {
      ms[r] = *cluster.map_shared_rank(pm + i, r);
      M = fmaxf(M, ms[r]);
    }
    float den = kBf16 ? exp2f(__fsub_rn(ys, M)) : expf(__fsub_rn(ys, M)), num0 = 0.0f, num1 = 0.0f;
#pragma unroll
    for (int r = 0; r < kAttnSplits; ++r) {
      const float wt = rescale<kBf16>(ms[r], M);
      const float* peer = cluster.map_shared_rank(bacc + i * int(kAttnMaxDim) + d, r);
      den = __fmaf_rn(*cluster.map_shared_rank(pl + i, r), wt, den);
      num0 = __fmaf_rn(peer[0], wt, num0);
      num1 = __fmaf_rn(peer[1], wt, num1);  // d + 1 <= 511: inside the row (zero past dim)
    }
    float o[2] = {__fdiv_rn(num0, den), __fdiv_rn(num1, den)};
    if (a.rope_dim > 0 && d >= rope0) {  // d - rope0 even: a whole pair
      float cs, sn;
      rope_cs(a.positions[t], a.inv_freq, (d - rope0) / 2, a.rope_factor, true, cs, sn);
      rope_pair(o, cs, sn);
    }
    float* dst = a.out + (t * a.heads + h) * a.dim + d;
    dst[0] = o[0];
    if (d + 1 < dim) dst[1] = o[1];
  }
  cluster.sync();  // peers may still be reading this block's partial
}

template <bool kBf16>
cudaError_t launch_former_one(const SinkAttentionArgs& a, cudaStream_t stream) {
  auto* kernel = former_attention_kernel<kBf16>;
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
    c.offsets += t0;
    if (c.positions) c.positions += t0;
    kernel<<<dim3(unsigned(c.n * groups * kAttnSplits)), kThreads, smem, stream>>>(c, int(groups), vec);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t launch_former(const SinkAttentionArgs& a, cudaStream_t stream) {
  return a.bf16 ? launch_former_one<true>(a, stream) : launch_former_one<false>(a, stream);
}

}  // namespace small_attention
}  // namespace

cudaError_t sink_attention_small(const kernels::SinkAttentionArgs& a) { return small_attention::launch_former(a, nullptr); }

}  // namespace deepinfer::testing_cuda::former
