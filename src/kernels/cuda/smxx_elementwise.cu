#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_elementwise.cuh"

namespace deepinfer::kernels {
namespace {

// One block per row: the row is read twice (sum of squares, then scale), the
// second time from L1/L2. fp32 partial sums per thread, then a tree.
__global__ void rms_norm_kernel(RmsNormArgs a) {
  __shared__ float scratch[32];
  const int64_t t = blockIdx.x;
  const float* x = a.x + t * a.dim;
  float* y = a.y + t * a.dim;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) ss += x[i] * x[i];
  ss = block_sum(ss, scratch);
  // As the reference: rsqrt of the fp32 mean plus eps, in fp32 (IEEE division and sqrt).
  const float r = 1.0f / sqrtf(ss / float(a.dim) + a.eps);
  for (int64_t i = threadIdx.x; i < a.dim; i += blockDim.x) {
    const float v = x[i] * r;
    y[i] = a.weight ? a.weight[i] * v : v;
  }
}

// One thread per (token, pair): cos/sin of the fp32 angle are evaluated in double
// and rounded, exactly as the CPU does, then applied to every head.
__global__ void rope_kernel(RopeArgs a) {
  const int64_t half = a.rope_dim / 2;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.n * half) return;
  const int64_t t = idx / half, i = idx % half;
  const float angle = float(a.positions[t]) * a.inv_freq[i];
  double sd, cd;
  sincos(double(angle), &sd, &cd);
  const float c = float(cd) * a.attention_factor;
  float s = float(sd) * a.attention_factor;
  if (a.inverse) s = -s;
  const int64_t d0 = a.dim - a.rope_dim + 2 * i;
  for (int64_t h = 0; h < a.heads; ++h) {
    float* v = a.x + (t * a.heads + h) * a.dim + d0;
    const float x0 = v[0], x1 = v[1];
    // __fmul_rn keeps the two products unfused, as the CPU computes them.
    v[0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
    v[1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
  }
}

__device__ __forceinline__ float clamp_like_std(float v, float lo, float hi) {
  return v < lo ? lo : (hi < v ? hi : v);  // std::clamp: NaN passes through
}

// One thread per element; a quantization block is `block` consecutive lanes of one
// warp, so its amax is a few shuffles. Bit-exact with the CPU.
__global__ void fake_quant_kernel(FakeQuantArgs a) {
  const int64_t total = a.n * a.dim;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const bool live = i < total;
  const float v = live ? a.x[i] : 0.0f;
  float amax = fabsf(v);
  for (int o = a.block >> 1; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (!live) return;
  float out;
  if (a.kind == QuantKind::kFp8E4m3) {
    const float s = pow2_ceil(fmaxf(amax, 1e-4f) * (1.0f / 448.0f));
    out = round_e4m3(clamp_like_std(v / s, -448.0f, 448.0f)) * s;
  } else {
    float s;
    if (a.kind == QuantKind::kFp4E4m3)
      s = round_e4m3(fmaxf(amax, 6.0f * 0.001953125f) / 6.0f);
    else
      s = pow2_ceil(fmaxf(amax, 6.0f * 1.1754943508222875e-38f) * (1.0f / 6.0f));
    out = round_e2m1(clamp_like_std(v / s, -6.0f, 6.0f)) * s;
  }
  a.x[i] = out;
}

}  // namespace

cudaError_t rms_norm(const RmsNormArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.dim <= 0 || (a.n > 0 && (a.x == nullptr || a.y == nullptr))) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (a.n > INT32_MAX) return cudaErrorInvalidValue;
  rms_norm_kernel<<<unsigned(a.n), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t rope(const RopeArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.heads <= 0 || a.rope_dim < 0 || a.rope_dim % 2 != 0 || a.rope_dim > a.dim)
    return cudaErrorInvalidValue;
  if (a.n == 0 || a.rope_dim == 0) return cudaSuccess;
  if (a.x == nullptr || a.positions == nullptr || a.inv_freq == nullptr) return cudaErrorInvalidValue;
  const int64_t work = a.n * (a.rope_dim / 2);
  rope_kernel<<<grid_1d(work, 128), 128, 0, stream>>>(a);
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
