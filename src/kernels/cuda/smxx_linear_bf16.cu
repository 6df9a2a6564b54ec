// The two conversions in front of linear's cuBLASLt bf16 GEMM (ops/cuda/linear.cu):
//   round_rows_bf16:     x fp32 -> bf16, round to nearest even (Activations::kBF16);
//   dequant_weight_bf16: e4m3 / e2m1 codes times a power-of-two (e8m0) scale -> bf16.
//     Exact: the codes carry at most 4 significant bits and the scale only moves the
//     exponent, which bf16 shares with fp32, so the bf16 weight is the CPU's fp32 one.
// Both are memory-bound: one thread per 8 elements (16-byte stores), no division in
// the vector path beyond one scale index per thread.
#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 256;

__device__ __forceinline__ uint32_t bf16_bits(float v) { return __float_as_uint(round_bf16(v)) >> 16; }
__device__ __forceinline__ uint32_t pack2(float lo, float hi) { return bf16_bits(lo) | (bf16_bits(hi) << 16); }

__global__ void __launch_bounds__(kThreads) round_kernel(const float* __restrict__ x, uint16_t* __restrict__ out,
                                                         int64_t count) {
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  const int64_t vecs = count / 8;
  const bool vec = (reinterpret_cast<uintptr_t>(x) % 16 == 0) && (reinterpret_cast<uintptr_t>(out) % 16 == 0);
  int64_t tail = 0;
  if (vec) {
    for (int64_t v = int64_t(blockIdx.x) * kThreads + threadIdx.x; v < vecs; v += stride) {
      const float4 a = reinterpret_cast<const float4*>(x)[2 * v];
      const float4 b = reinterpret_cast<const float4*>(x)[2 * v + 1];
      reinterpret_cast<uint4*>(out)[v] = make_uint4(pack2(a.x, a.y), pack2(a.z, a.w), pack2(b.x, b.y), pack2(b.z, b.w));
    }
    tail = vecs * 8;
  }
  for (int64_t i = tail + int64_t(blockIdx.x) * kThreads + threadIdx.x; i < count; i += stride)
    out[i] = uint16_t(bf16_bits(x[i]));
}

// Vector path: cols % 8 == 0, each thread 8 elements of one row under one scale
// (no scale, or block_cols % 8 == 0).
template <WFormat F>
__global__ void __launch_bounds__(kThreads) dequant_vec_kernel(WeightArgs w, int64_t row0, int64_t rows,
                                                               uint16_t* __restrict__ out) {
  const int64_t per_row = w.cols / 8;
  const int64_t total = rows * per_row;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t v = int64_t(blockIdx.x) * kThreads + threadIdx.x; v < total; v += stride) {
    const int64_t lr = v / per_row, c0 = (v - lr * per_row) * 8, r = row0 + lr;
    const float s = weight_scale(w, r, c0);
    float f[8];
    if constexpr (F == WFormat::kE4M3) {
      const uint2 b = *reinterpret_cast<const uint2*>(w.data + r * w.cols + c0);
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = e4m3_to_float(uint8_t(((i < 4 ? b.x : b.y) >> (8 * (i & 3))) & 0xffu)) * s;
    } else {
      const uint32_t b = *reinterpret_cast<const uint32_t*>(w.data + r * (w.cols / 2) + c0 / 2);
#pragma unroll
      for (int i = 0; i < 8; ++i) f[i] = e2m1_to_float((b >> (4 * i)) & 0xfu) * s;
    }
    reinterpret_cast<uint4*>(out)[v] = make_uint4(pack2(f[0], f[1]), pack2(f[2], f[3]), pack2(f[4], f[5]), pack2(f[6], f[7]));
  }
}

// Any shape: one element per thread step.
__global__ void __launch_bounds__(kThreads) dequant_any_kernel(WeightArgs w, int64_t row0, int64_t rows,
                                                               uint16_t* __restrict__ out) {
  const int64_t total = rows * w.cols;
  const int64_t stride = int64_t(gridDim.x) * kThreads;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += stride) {
    const int64_t lr = i / w.cols, c = i - lr * w.cols;
    out[i] = uint16_t(bf16_bits(weight_at(w, row0 + lr, c)));
  }
}

unsigned grid_for(int64_t items) {
  const int64_t blocks = (items + kThreads - 1) / kThreads;
  return unsigned(blocks < 1 ? 1 : blocks > 8192 ? 8192 : blocks);  // grid-stride beyond
}

}  // namespace

cudaError_t round_rows_bf16(const float* x, uint16_t* out, int64_t count, cudaStream_t stream) {
  if (count < 0 || (count > 0 && (x == nullptr || out == nullptr))) return cudaErrorInvalidValue;
  if (count == 0) return cudaSuccess;
  round_kernel<<<grid_for((count + 7) / 8), kThreads, 0, stream>>>(x, out, count);
  return cudaGetLastError();
}

cudaError_t dequant_weight_bf16(const WeightArgs& w, int64_t row0, int64_t rows, uint16_t* out, cudaStream_t stream) {
  if (!weight_args_valid(w) || row0 < 0 || rows < 0 || row0 + rows > w.rows || out == nullptr) return cudaErrorInvalidValue;
  // Only the formats whose bf16 image is exact: e4m3 / e2m1 with no or e8m0 scales.
  if ((w.format != WFormat::kE4M3 && w.format != WFormat::kE2M1) || w.scale_format == SFormat::kF32)
    return cudaErrorInvalidValue;
  if (rows == 0) return cudaSuccess;
  const bool one_scale = w.scale_format == SFormat::kNone || w.block_cols % 8 == 0;
  const int align = w.format == WFormat::kE4M3 ? 8 : 4;
  const bool vec = w.cols % 8 == 0 && one_scale && reinterpret_cast<uintptr_t>(w.data) % align == 0 &&
                   reinterpret_cast<uintptr_t>(out) % 16 == 0;
  if (vec) {
    const unsigned grid = grid_for(rows * (w.cols / 8));
    if (w.format == WFormat::kE4M3)
      dequant_vec_kernel<WFormat::kE4M3><<<grid, kThreads, 0, stream>>>(w, row0, rows, out);
    else
      dequant_vec_kernel<WFormat::kE2M1><<<grid, kThreads, 0, stream>>>(w, row0, rows, out);
  } else {
    dequant_any_kernel<<<grid_for(rows * w.cols), kThreads, 0, stream>>>(w, row0, rows, out);
  }
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
