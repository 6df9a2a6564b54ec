#include <cmath>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_model.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;

// One block per token: the row is dequantized once per column and written to every stream.
__global__ void embed_rows_kernel(EmbedRowsArgs a) {
  const int64_t t = blockIdx.x, dim = a.w.cols, id = a.ids[t];
  float* out = a.h + t * a.hc * dim;
  for (int64_t c = threadIdx.x; c < dim; c += blockDim.x) {
    const float v = weight_at(a.w, id, c);
    for (int64_t s = 0; s < a.hc; ++s) out[s * dim + c] = v;
  }
}

// One block per (token, column).
__global__ void engram_gather_kernel(EngramGatherArgs a) {
  const int64_t t = blockIdx.x / a.cols, c = blockIdx.x % a.cols, hd = a.table.cols;
  const int64_t r = a.rows[t * a.row_stride + c];
  float* out = a.out + (t * a.cols + c) * hd;
  if (r < 0 || r >= a.table.rows) {
    if (threadIdx.x == 0) *a.bad_row = 1;
    for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) out[i] = 0.0f;
    return;
  }
  for (int64_t i = threadIdx.x; i < hd; i += blockDim.x) out[i] = weight_at(a.table, r, i);
}

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
// (engram.cpp) after double sums. Each thread's elements i = tid, tid + blockDim, ... in
// batches of kGateBatch whose loads are issued before any use (and before any store in
// the update): at batch 1 the 4 blocks' 20 elements per thread were 20 dependent round
// trips per loop, ~20 us. The sums and the update keep their order and expressions, so
// the bits are the one-element loops' (A/B case former_engram_gate_*).
constexpr int kGateBatch = 8;
__global__ void engram_gate_kernel(EngramGateArgs a) {
  __shared__ double scratch[32];
  const int64_t t = blockIdx.x / a.hc, k = blockIdx.x % a.hc, d = a.dim;
  float* hk = a.h + (t * a.hc + k) * d;
  const float* key = a.kv + (t * (a.hc + 1) + k) * d;
  const float* value = a.kv + (t * (a.hc + 1) + a.hc) * d;
  const float* gw = a.gate_weight + k * d;
  const int64_t step = int64_t(kGateBatch) * blockDim.x;
  double ssh = 0, ssk = 0, dot = 0;
  for (int64_t i0 = threadIdx.x; i0 < d; i0 += step) {
    float hv[kGateBatch], kv[kGateBatch], wv[kGateBatch];
#pragma unroll
    for (int u = 0; u < kGateBatch; ++u) {
      const int64_t i = i0 + int64_t(u) * blockDim.x;
      hv[u] = i < d ? hk[i] : 0.0f;
      kv[u] = i < d ? key[i] : 0.0f;
      wv[u] = i < d ? gw[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kGateBatch; ++u) {
      if (i0 + int64_t(u) * blockDim.x >= d) break;
      ssh += double(hv[u]) * hv[u];
      ssk += double(kv[u]) * kv[u];
      dot += double(hv[u]) * wv[u] * kv[u];
    }
  }
  ssh = block_sum_d(ssh, scratch);
  ssk = block_sum_d(ssk, scratch);
  dot = block_sum_d(dot, scratch);
  const float rstd = (1.0f / sqrtf(float(ssh / d) + a.eps)) * (1.0f / sqrtf(float(ssk / d) + a.eps));
  const float g = float(dot) * rstd / sqrtf(float(d));
  const float root = sqrtf(fmaxf(fabsf(g), 1e-6f));
  const float gate = 1.0f / (1.0f + expf(-copysignf(root, g)));
  __syncthreads();  // every thread has read hk before it is updated
  for (int64_t i0 = threadIdx.x; i0 < d; i0 += step) {
    float hv[kGateBatch], vv[kGateBatch];
#pragma unroll
    for (int u = 0; u < kGateBatch; ++u) {
      const int64_t i = i0 + int64_t(u) * blockDim.x;
      hv[u] = i < d ? hk[i] : 0.0f;
      vv[u] = i < d ? value[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kGateBatch; ++u) {
      const int64_t i = i0 + int64_t(u) * blockDim.x;
      if (i >= d) break;
      hk[i] = hv[u] + gate * vv[u];  // as `hk[i] += gate * value[i]`
    }
  }
}

// One channel of a group's softmax-gated pooling: Σ_k kv(k) softmax_k(gate), in fp32, in k order.
// kv(k) / gate(k) read row k's value of the channel; the one copy of this arithmetic, so
// compress_pool_kernel and compress_gather_pool_norm_kernel agree bit for bit.
template <class Kv, class Gate>
__device__ __forceinline__ float pool_channel(int64_t ratio, Kv kv, Gate gate) {
  float mx = -INFINITY;
  for (int64_t k = 0; k < ratio; ++k) mx = fmaxf(mx, gate(k));
  float denom = 0.0f;
  for (int64_t k = 0; k < ratio; ++k) denom += expf(gate(k) - mx);
  float acc = 0.0f;
  for (int64_t k = 0; k < ratio; ++k) acc += kv(k) * (expf(gate(k) - mx) / denom);
  return acc;
}

__global__ void compress_pool_kernel(CompressPoolArgs a) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.groups * a.dim) return;
  const int64_t g = idx / a.dim, ch = idx % a.dim;
  const float* ka = a.kv + g * a.ratio * a.dim + ch;
  const float* ga = a.gate + g * a.ratio * a.dim + ch;
  a.latent[idx] = pool_channel(
      a.ratio, [&](int64_t k) { return ka[k * a.dim]; }, [&](int64_t k) { return ga[k * a.dim]; });
}

// One block of kThreads per group (compress_gather_pool_norm): pooled channels into shared
// memory, then the norm. Channel ch is thread ch % kThreads's, in rms_norm_kernel's order.
__global__ void __launch_bounds__(kThreads) compress_gather_pool_norm_kernel(CompressGatherArgs a) {
  extern __shared__ float lat_row[];
  __shared__ float scratch[32];
  const int64_t g = blockIdx.x, per = a.ratio > 1 ? 2 : 1;
  const float* const* rows = a.rows + g * a.ratio * per;
  float ss = 0.0f;
  for (int64_t ch = threadIdx.x; ch < a.dim; ch += blockDim.x) {
    float v;
    if (a.ratio == 1) {
      v = rows[0][ch];
    } else {  // compress_pool_kernel's arithmetic on the same values
      v = pool_channel(
          a.ratio, [&](int64_t k) { return rows[2 * k][ch]; }, [&](int64_t k) { return rows[2 * k + 1][ch]; });
    }
    lat_row[ch] = v;
    ss = __fmaf_rn(v, v, ss);  // rms_norm_kernel's sum
  }
  ss = block_sum(ss, scratch);
  const float r = 1.0f / sqrtf(ss / float(a.dim) + a.eps);
  float* y = a.latent + g * a.dim;
  for (int64_t ch = threadIdx.x; ch < a.dim; ch += blockDim.x) {
    const float v = __fmul_rn(lat_row[ch], r);
    y[ch] = a.weight ? __fmul_rn(a.weight[ch], v) : v;
  }
}

// Block (row, chunk): kCopyChunk floats of one row. Why chunks and batches (NOTES 49's timeline,
// session 13): the former one block per row with a plain loop, whose loads the compiler could not
// hoist past the stores (src and dst might alias), copied one element per thread per memory round
// trip: 8-10 us for the 1-4-row copies of the compressor / indexer chain and 15 us for the head's
// one row, on the batch-1 critical path. Here every thread's loads of a batch are in flight
// together (registers first, then the stores) and a long row spreads over several blocks. Rows must
// not overlap (as before: the lists name ring rows, pool rows and scratch rows).
constexpr int kCopyThreads = 256, kCopyBatch = 8;
constexpr int64_t kCopyChunk = int64_t(kCopyThreads) * kCopyBatch * 4;  // 8192 floats, 32 KB
__global__ void __launch_bounds__(kCopyThreads) copy_rows_kernel(CopyRowsArgs a) {
  const float* __restrict__ s = a.src[blockIdx.x];
  float* __restrict__ d = a.dst[blockIdx.x];
  const int64_t lo = int64_t(blockIdx.y) * kCopyChunk, hi = lo + kCopyChunk < a.dim ? lo + kCopyChunk : a.dim;
  const int tid = int(threadIdx.x);
  if (((reinterpret_cast<uintptr_t>(s) | reinterpret_cast<uintptr_t>(d)) & 15) == 0) {
    // 16-byte rows (lo is a multiple of 4): float4 batches, then the last < 4 floats.
    const int64_t n4 = (hi - lo) / 4;
    const float4* s4 = reinterpret_cast<const float4*>(s + lo);
    float4* d4 = reinterpret_cast<float4*>(d + lo);
    float4 v[kCopyBatch];
#pragma unroll
    for (int u = 0; u < kCopyBatch; ++u) {
      const int64_t i = tid + int64_t(u) * kCopyThreads;
      if (i < n4) v[u] = s4[i];
    }
#pragma unroll
    for (int u = 0; u < kCopyBatch; ++u) {
      const int64_t i = tid + int64_t(u) * kCopyThreads;
      if (i < n4) d4[i] = v[u];
    }
    const int64_t t = lo + 4 * n4 + tid;
    if (t < hi) d[t] = s[t];
    return;
  }
  // Other alignments: the chunk (kCopyChunk = kCopyBatch * 4 floats per thread) as one batch of floats.
  float v[kCopyBatch * 4];
#pragma unroll
  for (int u = 0; u < kCopyBatch * 4; ++u) {
    const int64_t i = lo + tid + int64_t(u) * kCopyThreads;
    if (i < hi) v[u] = s[i];
  }
#pragma unroll
  for (int u = 0; u < kCopyBatch * 4; ++u) {
    const int64_t i = lo + tid + int64_t(u) * kCopyThreads;
    if (i < hi) d[i] = v[u];
  }
}

__global__ void scatter_add_rows_kernel(ScatterAddRowsArgs a) {
  float* acc = a.acc + a.rows[blockIdx.x] * a.dim;
  const float* y = a.y + int64_t(blockIdx.x) * a.dim;
  for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) acc[i] += y[i];
}

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = a[i] + b[i];
}

__global__ void scale_kernel(float* x, float s, int64_t count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) x[i] *= s;
}

int row_threads(int64_t dim) { return dim >= 256 ? 256 : dim > 64 ? 128 : 64; }

}  // namespace

cudaError_t embed_rows(const EmbedRowsArgs& a, cudaStream_t stream) {
  if (!weight_args_valid(a.w) || a.n < 0 || a.hc < 1 || (a.n > 0 && (!a.ids || !a.h))) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  embed_rows_kernel<<<unsigned(a.n), row_threads(a.w.cols), 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t engram_gather(const EngramGatherArgs& a, cudaStream_t stream) {
  if (!weight_args_valid(a.table) || a.n < 0 || a.cols < 1 || a.row_stride < a.cols || !a.bad_row)
    return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  engram_gather_kernel<<<unsigned(a.n * a.cols), row_threads(a.table.cols), 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t engram_gate(const EngramGateArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.hc < 1 || a.dim < 1 || !a.gate_weight) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  engram_gate_kernel<<<unsigned(a.n * a.hc), row_threads(a.dim), 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t compress_pool(const CompressPoolArgs& a, cudaStream_t stream) {
  if (a.groups < 0 || a.ratio < 1 || a.dim < 1) return cudaErrorInvalidValue;
  if (a.groups == 0) return cudaSuccess;
  compress_pool_kernel<<<grid_1d(a.groups * a.dim, kThreads), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t compress_gather_pool_norm(const CompressGatherArgs& a, cudaStream_t stream) {
  if (a.groups < 0 || a.ratio < 1 || a.dim < 1 || a.dim > kMaxCompressGatherDim || a.groups > INT32_MAX)
    return cudaErrorInvalidValue;
  if (a.groups == 0) return cudaSuccess;
  if (a.rows == nullptr || a.latent == nullptr) return cudaErrorInvalidValue;
  compress_gather_pool_norm_kernel<<<unsigned(a.groups), kThreads, size_t(a.dim) * sizeof(float), stream>>>(a);
  return cudaGetLastError();
}

cudaError_t copy_rows(const CopyRowsArgs& a, cudaStream_t stream) {
  if (a.count < 0 || a.dim < 1 || a.count > (int64_t(1) << 31) - 1) return cudaErrorInvalidValue;
  if (a.count == 0) return cudaSuccess;
  const int64_t chunks = (a.dim + kCopyChunk - 1) / kCopyChunk;
  if (chunks > 65535) return cudaErrorInvalidValue;
  copy_rows_kernel<<<dim3(unsigned(a.count), unsigned(chunks)), kCopyThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t scatter_add_rows(const ScatterAddRowsArgs& a, cudaStream_t stream) {
  if (a.m < 0 || a.dim < 1) return cudaErrorInvalidValue;
  if (a.m == 0) return cudaSuccess;
  scatter_add_rows_kernel<<<unsigned(a.m), row_threads(a.dim), 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t add(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream) {
  if (count < 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  add_kernel<<<grid_1d(count, kThreads), kThreads, 0, stream>>>(a, b, out, count);
  return cudaGetLastError();
}

cudaError_t scale(float* x, float s, int64_t count, cudaStream_t stream) {
  if (count < 0) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  scale_kernel<<<grid_1d(count, kThreads), kThreads, 0, stream>>>(x, s, count);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
