// The kernels as they were before the small-kernel rework (commit 57ea040), kept
// verbatim as the reference of the A/B cases (cases_former.cpp): the new kernels run
// the same operations in the same order, so their results must be bitwise these.
// Only the launchers below are new.
#include "former_kernels.h"

#include "kernels/cuda/smxx_common.cuh"

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

}  // namespace deepinfer::testing_cuda::former
