#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_moe.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kLogitTokens = 8;  // tokens per warp: one weight read feeds eight dots
constexpr int kLogitWarps = 8;

// Grid (ceil(experts / 8), ceil(n / 8)): warp = one expert row, eight tokens.
__global__ void __launch_bounds__(kLogitWarps * 32) router_logits_kernel(RouterLogitsArgs a) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t e = int64_t(blockIdx.x) * kLogitWarps + warp;
  const int64_t t0 = int64_t(blockIdx.y) * kLogitTokens;
  if (e >= a.gate.rows) return;
  const int64_t dim = a.gate.cols;
  double acc[kLogitTokens] = {};
  for (int64_t c = lane; c < dim; c += 32) {
    const double w = double(weight_at(a.gate, e, c));
#pragma unroll
    for (int t = 0; t < kLogitTokens; ++t)
      if (t0 + t < a.n) acc[t] += w * double(a.x[(t0 + t) * dim + c]);
  }
#pragma unroll
  for (int t = 0; t < kLogitTokens; ++t) {
    const double s = warp_sum(acc[t]);
    if (lane == 0 && t0 + t < a.n) a.logits[(t0 + t) * a.gate.rows + e] = float(s);
  }
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

__global__ void swiglu_act_kernel(SwigluActArgs a) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.n * a.inter) return;
  float g = a.gate[idx], u = a.up[idx];
  const float lim = a.limit;
  if (lim > 0) {
    u = u < -lim ? -lim : (lim < u ? lim : u);
    g = g < lim ? g : lim;
  }
  float v = __fmul_rn(g / (1.0f + expf(-g)), u);
  if (a.route_weight) v = __fmul_rn(a.route_weight[idx / a.inter], v);
  a.gate[idx] = v;
}

}  // namespace

cudaError_t router_logits(const RouterLogitsArgs& a, cudaStream_t stream) {
  if (!weight_args_valid(a.gate) || a.n < 0) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.x || !a.logits) return cudaErrorInvalidValue;
  const int64_t gy = (a.n + kLogitTokens - 1) / kLogitTokens;
  if (gy > 65535) return cudaErrorInvalidValue;
  const dim3 grid(unsigned((a.gate.rows + kLogitWarps - 1) / kLogitWarps), unsigned(gy));
  router_logits_kernel<<<grid, kLogitWarps * 32, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t router_select(const RouterSelectArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.num_experts <= 0 || a.num_experts > 4096 || a.top_k < 1 || a.top_k > a.num_experts ||
      a.n > INT32_MAX)
    return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.logits || !a.expert_ids || !a.expert_weights) return cudaErrorInvalidValue;
  router_select_kernel<<<unsigned(a.n), 32, 2 * sizeof(float) * size_t(a.num_experts), stream>>>(a);
  return cudaGetLastError();
}

cudaError_t swiglu_act(const SwigluActArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.inter <= 0) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.gate || !a.up) return cudaErrorInvalidValue;
  swiglu_act_kernel<<<grid_1d(a.n * a.inter, 256), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
