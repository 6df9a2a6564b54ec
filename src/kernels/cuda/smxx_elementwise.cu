#include <algorithm>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_elementwise.cuh"
#include "kernels/cuda/smxx_hyper_connection.cuh"  // b1_fuse_for
#include "kernels/cuda/smxx_rope.cuh"

namespace deepinfer::kernels {
namespace {

// One block per row: the row is read twice (sum of squares, then scale), the
// second time from L1/L2. fp32 partial sums per thread, then a tree.
__global__ void rms_norm_kernel(RmsNormArgs a) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  const float* x = a.x + t * a.dim;
  float* y = a.y + t * a.dim;
  float ss = 0.0f;
  // Explicit FMA / products (what the compiler contracted `ss += x * x` to): the fused
  // kernels (norm_rope_quant, hc_collapse_norm) repeat exactly this arithmetic.
  for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) ss = __fmaf_rn(x[i], x[i], ss);
  ss = block_sum(ss, scratch);
  // As the reference: rsqrt of the fp32 mean plus eps, in fp32 (IEEE division and sqrt).
  const float r = 1.0f / sqrtf(ss / float(a.dim) + a.eps);
  for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) {
    const float v = __fmul_rn(x[i], r);
    y[i] = a.weight ? __fmul_rn(a.weight[i], v) : v;
  }
}

// rms_norm_kernel with each thread's loads issued kNormBatch at a time before any is
// used (DEEPINFER_B1_FUSE). At batch 1 the one block's loop was a chain of dim / 256
// dependent global round trips per pass (the FMA waits on its load, the next load
// waits to issue); now one per 8 elements. Same elements, same FMAs in the same order,
// same tree: the same bits.
constexpr int kNormBatch = 8;
__device__ __forceinline__ void rms_norm_row_batched(const RmsNormArgs& a, int64_t t, float* scratch) {
  const int64_t step = int64_t(kNormBatch) * blockDim.x;
  const float* x = a.x + t * a.dim;
  float* y = a.y + t * a.dim;
  float ss = 0.0f;
  for (int64_t i0 = threadIdx.x; i0 < a.dim; i0 += step) {
    float v[kNormBatch];
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      const int64_t i = i0 + int64_t(u) * blockDim.x;
      v[u] = i < a.dim ? x[i] : 0.0f;
    }
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u)
      if (i0 + int64_t(u) * blockDim.x < a.dim) ss = __fmaf_rn(v[u], v[u], ss);
  }
  ss = block_sum(ss, scratch);
  const float r = 1.0f / sqrtf(ss / float(a.dim) + a.eps);
  for (int64_t i0 = threadIdx.x; i0 < a.dim; i0 += step) {
    float v[kNormBatch], w[kNormBatch];
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      const int64_t i = i0 + int64_t(u) * blockDim.x;
      v[u] = i < a.dim ? x[i] : 0.0f;
      w[u] = a.weight && i < a.dim ? a.weight[i] : 1.0f;
    }
#pragma unroll
    for (int u = 0; u < kNormBatch; ++u) {
      const int64_t i = i0 + int64_t(u) * blockDim.x;
      if (i >= a.dim) break;
      const float nv = __fmul_rn(v[u], r);
      y[i] = a.weight ? __fmul_rn(w[u], nv) : nv;
    }
  }
}
__global__ void rms_norm_batched_kernel(RmsNormArgs a) {
  pdl_trigger();  // as rms_norm_kernel
  __shared__ float scratch[32];
  rms_norm_row_batched(a, blockIdx.x, scratch);
}

// Block (token, group of up to `hb` heads): the token's cos / sin pairs once into shared
// memory, then one thread per (head, pair) of the group. The former kernel (a thread
// per (token, pair) looping over all heads) ran 32 threads at batch 1, each a chain of
// 64 dependent read-modify-writes of its pair: 27 us per call. Same rope_cs and
// rope_pair, so the same bits.
constexpr int kRopeThreads = 128;
__global__ void __launch_bounds__(kRopeThreads) rope_kernel(RopeArgs a, int hb) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  extern __shared__ float rope_cs_sm[];  // [half] cos, then [half] sin
  const int64_t half = a.rope_dim / 2, t = blockIdx.x;
  const int64_t h0 = int64_t(blockIdx.y) * hb, nh = a.heads - h0 < hb ? a.heads - h0 : hb;
  for (int64_t i = threadIdx.x; i < half; i += blockDim.x)
    rope_cs(a.positions[t], a.inv_freq, i, a.attention_factor, a.inverse, rope_cs_sm[i], rope_cs_sm[half + i]);
  __syncthreads();
  float* x = a.x + (t * a.heads + h0) * a.dim + a.dim - a.rope_dim;
  for (int64_t p = threadIdx.x; p < nh * half; p += blockDim.x) {
    const int64_t h = p / half, i = p % half;
    rope_pair(x + h * a.dim + 2 * i, rope_cs_sm[i], rope_cs_sm[half + i]);
  }
}

// The fake-quantized value of v in a block of absolute maximum amax.
__device__ __forceinline__ float quant_value(float v, float amax, QuantKind kind) {
  if (kind == QuantKind::kFp8E4m3) {
    const float s = fp8_block_scale(amax);
    return fp8_block_code(v, s) * s;
  }
  float s;
  if (kind == QuantKind::kFp4E4m3)
    s = round_e4m3(fmaxf(amax, 6.0f * 0.001953125f) / 6.0f);
  else
    s = pow2_ceil(fmaxf(amax, 6.0f * 1.1754943508222875e-38f) * (1.0f / 6.0f));
  return round_e2m1(clamp_like_std(v / s, -6.0f, 6.0f)) * s;
}
// The block's amax: `block` consecutive lanes of one warp (every lane must call).
__device__ __forceinline__ float block_amax(float v, int block) {
  float amax = fabsf(v);
  for (int o = block >> 1; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  return amax;
}

// One thread per element; a quantization block is `block` consecutive lanes of one
// warp, so its amax is a few shuffles. Bit-exact with the CPU.
__global__ void fake_quant_kernel(FakeQuantArgs a) {
  const int64_t total = a.n * a.dim;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool live = i < total;
  const float v = live ? a.x[i] : 0.0f;
  const float amax = block_amax(v, a.block);
  if (!live) return;
  a.x[i] = quant_value(v, amax, a.kind);
}

// One block per row (kNrqThreads): norm into shared memory, RoPE pairs there, then the
// quantization in 256-element sweeps whose 32-lane warps hold whole blocks (block
// divides 32), the row written once.
// kBatched (DEEPINFER_B1_FUSE): the norm's loads kNormBatch at a time, as
// rms_norm_batched_kernel (same order, same bits).
constexpr int kNrqThreads = 256;
template <bool kBatched>
__device__ __forceinline__ void nrq_row(const NormRopeQuantArgs& a, int64_t t, float* row, float* scratch) {
  const float* x = a.x + t * a.dim;
  if (kBatched && a.norm) {
    const int64_t step = int64_t(kNormBatch) * blockDim.x;
    float ss = 0.0f;
    for (int64_t i0 = threadIdx.x; i0 < a.dim; i0 += step) {
      float v[kNormBatch];
#pragma unroll
      for (int u = 0; u < kNormBatch; ++u) {
        const int64_t i = i0 + int64_t(u) * blockDim.x;
        v[u] = i < a.dim ? x[i] : 0.0f;
      }
#pragma unroll
      for (int u = 0; u < kNormBatch; ++u) {
        const int64_t i = i0 + int64_t(u) * blockDim.x;
        if (i >= a.dim) break;
        row[i] = v[u];
        ss = __fmaf_rn(v[u], v[u], ss);
      }
    }
    ss = block_sum(ss, scratch);
    const float r = 1.0f / sqrtf(ss / float(a.dim) + a.eps);
    for (int64_t i0 = threadIdx.x; i0 < a.dim; i0 += step) {
      float w[kNormBatch];
#pragma unroll
      for (int u = 0; u < kNormBatch; ++u) {
        const int64_t i = i0 + int64_t(u) * blockDim.x;
        w[u] = a.weight && i < a.dim ? a.weight[i] : 1.0f;
      }
#pragma unroll
      for (int u = 0; u < kNormBatch; ++u) {
        const int64_t i = i0 + int64_t(u) * blockDim.x;
        if (i >= a.dim) break;
        const float v = __fmul_rn(row[i], r);
        row[i] = a.weight ? __fmul_rn(w[u], v) : v;
      }
    }
  } else if (a.norm) {
    float ss = 0.0f;
    for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) {
      const float v = x[i];
      row[i] = v;
      ss = __fmaf_rn(v, v, ss);
    }
    ss = block_sum(ss, scratch);
    const float r = 1.0f / sqrtf(ss / float(a.dim) + a.eps);
    for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) {
      const float v = __fmul_rn(row[i], r);
      row[i] = a.weight ? __fmul_rn(a.weight[i], v) : v;
    }
  } else {
    for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) row[i] = x[i];
  }
  __syncthreads();
  if (a.rope_dim > 0) {
    const int64_t half = a.rope_dim / 2, pos = a.positions[t / a.heads];
    for (int64_t i = threadIdx.x; i < half; i += blockDim.x) {
      float c, s;
      rope_cs(pos, a.inv_freq, i, a.attention_factor, false, c, s);
      rope_pair(row + a.dim - a.rope_dim + 2 * i, c, s);
    }
    __syncthreads();
  }
  float* y = a.y + t * a.dim;
  float* y2 = a.copy_to ? a.copy_to[t] : nullptr;
  const bool quant = a.quant_block > 0 && a.dim % a.quant_block == 0;  // as fake_quant
  for (int64_t base = 0; base < a.dim; base += blockDim.x) {
    const int64_t i = base + threadIdx.x;
    const bool live = i < a.dim;
    const float v = live ? row[i] : 0.0f;
    if (quant) {
      const float amax = block_amax(v, a.quant_block);
      if (live) {
        const float q = quant_value(v, amax, a.kind);
        y[i] = q;
        if (y2) y2[i] = q;
      }
    } else if (live) {
      y[i] = v;
      if (y2) y2[i] = v;
    }
  }
}
template <bool kBatched>
__global__ void __launch_bounds__(kNrqThreads) norm_rope_quant_kernel(NormRopeQuantArgs a) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  extern __shared__ float row[];
  __shared__ float scratch[32];
  nrq_row<kBatched>(a, blockIdx.x, row, scratch);
}

// rms_norm(r) and norm_rope_quant(q) in one launch (the decode layer's q and kv norms, both
// right after the wq_a + wkv gemv): blocks [0, r.n) run rms_norm_batched_kernel's rows,
// blocks r.n.. norm_rope_quant_kernel<true>'s, so each output is bitwise its own kernel's.
__global__ void __launch_bounds__(kNrqThreads) rms_norm_and_nrq_kernel(RmsNormArgs r, NormRopeQuantArgs q) {
  pdl_trigger();  // as the two kernels
  extern __shared__ float row[];
  __shared__ float scratch[32];
  if (int64_t(blockIdx.x) < r.n)
    rms_norm_row_batched(r, blockIdx.x, scratch);
  else
    nrq_row<true>(q, int64_t(blockIdx.x) - r.n, row, scratch);
}

// Narrow rows (dim a multiple of 32, at most the block kernel's 256 threads; V4.1's
// indexer query, 32 heads x 128 per token, and its key): one warp per row, 8 rows per
// block. The block kernel spends a 256-thread block and two or three barriers on each
// 128-element row (262144 blocks, 0.56 ms per call at an 8K prefill for 268 MB, a 63 us
// read + write). Lane l holds elements 32e + l, as the block kernel's warp e does, and
// every step repeats that kernel's arithmetic: the norm's block_sum is its per-warp
// butterflies (warps past the row sum zeros) and then the butterfly over the eight warp
// sums in lanes 0..7; the RoPE pairs go through this warp's row in shared memory with
// the same rope_cs / rope_pair; a quantization block is the same consecutive lanes. So
// the bits are the block kernel's (NormRopeQuantArgs::variant 1 runs it; fused cases).
constexpr int kNrqRowsPerBlock = kNrqThreads / 32;
constexpr int kNrqWarpMaxDim = kNrqThreads;
__global__ void __launch_bounds__(kNrqThreads) norm_rope_quant_warp_kernel(NormRopeQuantArgs a) {
  pdl_trigger();  // as the block kernel
  __shared__ float rows[kNrqRowsPerBlock][kNrqWarpMaxDim];
  const int lane = threadIdx.x & 31, wr = threadIdx.x >> 5;
  const int64_t t = int64_t(blockIdx.x) * kNrqRowsPerBlock + wr;
  if (t >= a.n) return;  // whole warp; no block barrier below
  constexpr int kE = kNrqWarpMaxDim / 32;
  const int ne = int(a.dim / 32);
  const float* x = a.x + t * a.dim;
  float v[kE];
#pragma unroll
  for (int e = 0; e < kE; ++e) v[e] = e < ne ? x[32 * e + lane] : 0.0f;
  if (a.norm) {
    float mine = 0.0f;  // lane w < 8: the block kernel's warp w sum
#pragma unroll
    for (int e = 0; e < kE; ++e) {
      const float s = warp_sum(e < ne ? __fmaf_rn(v[e], v[e], 0.0f) : 0.0f);
      if (lane == e) mine = s;
    }
    const float ss = warp_sum(mine);
    const float r = 1.0f / sqrtf(ss / float(a.dim) + a.eps);
#pragma unroll
    for (int e = 0; e < kE; ++e) {
      if (e >= ne) break;
      const float nv = __fmul_rn(v[e], r);
      v[e] = a.weight ? __fmul_rn(a.weight[32 * e + lane], nv) : nv;
    }
  }
  if (a.rope_dim > 0) {
    float* row = rows[wr];
#pragma unroll
    for (int e = 0; e < kE; ++e)
      if (e < ne) row[32 * e + lane] = v[e];
    __syncwarp();
    const int64_t half = a.rope_dim / 2, pos = a.positions[t / a.heads];
    for (int64_t i = lane; i < half; i += 32) {
      float c, s;
      rope_cs(pos, a.inv_freq, i, a.attention_factor, false, c, s);
      rope_pair(row + a.dim - a.rope_dim + 2 * i, c, s);
    }
    __syncwarp();
#pragma unroll
    for (int e = 0; e < kE; ++e)
      if (e < ne) v[e] = row[32 * e + lane];
  }
  float* y = a.y + t * a.dim;
  float* y2 = a.copy_to ? a.copy_to[t] : nullptr;
  const bool quant = a.quant_block > 0 && a.dim % a.quant_block == 0;  // as fake_quant
#pragma unroll
  for (int e = 0; e < kE; ++e) {
    if (e >= ne) break;
    const float q = quant ? quant_value(v[e], block_amax(v[e], a.quant_block), a.kind) : v[e];
    y[32 * e + lane] = q;
    if (y2) y2[32 * e + lane] = q;
  }
}

}  // namespace

cudaError_t rms_norm(const RmsNormArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.dim <= 0 || (a.n > 0 && (a.x == nullptr || a.y == nullptr))) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (a.n > INT32_MAX) return cudaErrorInvalidValue;
  if (b1_fuse_for(a.n))
    rms_norm_batched_kernel<<<unsigned(a.n), 256, 0, stream>>>(a);
  else
    rms_norm_kernel<<<unsigned(a.n), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t rope(const RopeArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.heads <= 0 || a.rope_dim < 0 || a.rope_dim % 2 != 0 || a.rope_dim > a.dim)
    return cudaErrorInvalidValue;
  if (a.n == 0 || a.rope_dim == 0) return cudaSuccess;
  if (a.x == nullptr || a.positions == nullptr || a.inv_freq == nullptr) return cudaErrorInvalidValue;
  if (a.n > INT32_MAX || a.rope_dim / 2 > 6144) return cudaErrorInvalidValue;  // grid x; cos / sin in 48 KB
  // Heads per block: all of them once the batch alone fills the GPU (the pairs' cos /
  // sin then computed once per token), else 8 (8 blocks per token at 64 heads).
  const int64_t hb = a.n >= 256 ? a.heads : std::min<int64_t>(a.heads, 8);
  const int64_t groups = (a.heads + hb - 1) / hb;
  if (groups > 65535) return cudaErrorInvalidValue;
  rope_kernel<<<dim3(unsigned(a.n), unsigned(groups)), kRopeThreads, size_t(a.rope_dim) * sizeof(float), stream>>>(
      a, int(hb));
  return cudaGetLastError();
}

namespace {
bool nrq_args_ok(const NormRopeQuantArgs& a) {
  const bool qb_ok = a.quant_block == 0 || (a.quant_block > 0 && a.quant_block <= 32 &&
                                            (a.quant_block & (a.quant_block - 1)) == 0);
  if (a.n < 0 || a.dim <= 0 || a.dim > kMaxNormRopeQuantDim || a.n > INT32_MAX || !qb_ok || a.heads < 1 || a.rope_dim < 0 ||
      a.rope_dim % 2 != 0 || a.rope_dim > a.dim)
    return false;
  if (a.n > 0 && (a.x == nullptr || a.y == nullptr || (a.rope_dim > 0 && (a.positions == nullptr || a.inv_freq == nullptr))))
    return false;
  return a.variant >= 0 && a.variant <= 1;
}
}  // namespace

cudaError_t rms_norm_and_norm_rope_quant(const RmsNormArgs& r, const NormRopeQuantArgs& q, cudaStream_t stream) {
  if (r.n < 0 || r.dim <= 0 || (r.n > 0 && (r.x == nullptr || r.y == nullptr)) || !nrq_args_ok(q)) return cudaErrorInvalidValue;
  if (r.n + q.n > INT32_MAX) return cudaErrorInvalidValue;
  if (r.n + q.n == 0) return cudaSuccess;
  rms_norm_and_nrq_kernel<<<unsigned(r.n + q.n), kNrqThreads, size_t(q.dim) * sizeof(float), stream>>>(r, q);
  return cudaGetLastError();
}

cudaError_t norm_rope_quant(const NormRopeQuantArgs& a, cudaStream_t stream) {
  const bool qb_ok = a.quant_block == 0 || (a.quant_block > 0 && a.quant_block <= 32 &&
                                            (a.quant_block & (a.quant_block - 1)) == 0);
  if (a.n < 0 || a.dim <= 0 || a.dim > kMaxNormRopeQuantDim || a.n > INT32_MAX || !qb_ok || a.heads < 1 || a.rope_dim < 0 ||
      a.rope_dim % 2 != 0 || a.rope_dim > a.dim)
    return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (a.x == nullptr || a.y == nullptr || (a.rope_dim > 0 && (a.positions == nullptr || a.inv_freq == nullptr)))
    return cudaErrorInvalidValue;
  if (a.variant < 0 || a.variant > 1) return cudaErrorInvalidValue;
  if (a.variant == 0 && a.dim % 32 == 0 && a.dim <= kNrqWarpMaxDim) {
    const int64_t blocks = (a.n + kNrqRowsPerBlock - 1) / kNrqRowsPerBlock;
    norm_rope_quant_warp_kernel<<<unsigned(blocks), kNrqThreads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  if (b1_fuse_for(a.n))
    norm_rope_quant_kernel<true><<<unsigned(a.n), kNrqThreads, size_t(a.dim) * sizeof(float), stream>>>(a);
  else
    norm_rope_quant_kernel<false><<<unsigned(a.n), kNrqThreads, size_t(a.dim) * sizeof(float), stream>>>(a);
  return cudaGetLastError();
}

cudaError_t fake_quant(const FakeQuantArgs& a, cudaStream_t stream) {
  const bool pow2 = a.block > 0 && a.block <= 32 && (a.block & (a.block - 1)) == 0;
  if (!pow2 || a.n < 0 || a.dim < 0) return cudaErrorInvalidValue;
  if (a.n == 0 || a.dim == 0 || a.dim % a.block != 0) return cudaSuccess;  // as the reference
  if (a.x == nullptr) return cudaErrorInvalidValue;
  fake_quant_kernel<<<grid_1d(a.n * a.dim, 256), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
