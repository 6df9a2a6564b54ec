// The tiled SIMT path of linear (smxx_linear.cuh): any format, any shape. A
// shared-memory GEMM with 64 x 64 output tiles and fp32 FMAs; weights are
// dequantized while they are staged. The fallback for what the gemv and mma
// paths do not take (F32 / F16 weights, fp32 scales, unaligned shapes).
#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear.cuh"

namespace deepinfer::kernels::tiled {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 32;

template <WFormat F>
__device__ __forceinline__ float raw_at(const uint8_t* data, int64_t row, int64_t cols, int64_t c) {
  if constexpr (F == WFormat::kF32) return reinterpret_cast<const float*>(data)[row * cols + c];
  if constexpr (F == WFormat::kBF16) return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(data)[row * cols + c]);
  if constexpr (F == WFormat::kF16) return f16_bits_to_float(reinterpret_cast<const uint16_t*>(data)[row * cols + c]);
  if constexpr (F == WFormat::kE4M3) return e4m3_to_float(data[row * cols + c]);
  if constexpr (F == WFormat::kE2M1) {
    const uint8_t b = data[row * (cols / 2) + c / 2];
    return e2m1_to_float((c & 1) ? (b >> 4) : (b & 0xf));
  }
  return 0.0f;
}

// 256 threads; thread (ty, tx) owns tokens ty + 16 i and rows tx + 16 j (i, j < 4),
// so a warp reads 2 broadcast x values and 16 consecutive weight values per k.
// A thread stages weight column k = tid % 32 of rows tid / 32 + 8 i: its rows'
// scale offsets are computed once, the scale column once per K step.
template <WFormat F>
__global__ void __launch_bounds__(256) tiled_kernel(LinearArgs a) {
  __shared__ float xs[kBK][kBM + 1];
  __shared__ float ws[kBK][kBN + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  const WeightArgs& w = a.w;
  const int64_t K = w.cols;
  const bool scaled = w.scale_format != SFormat::kNone;
  const int kcol = tid % kBK;
  int64_t wrow[kBN * kBK / 256], soff[kBN * kBK / 256];
#pragma unroll
  for (int i = 0; i < kBN * kBK / 256; ++i) {
    const int64_t gn = n0 + tid / kBK + 8 * i;
    wrow[i] = gn < a.num_rows ? a.row0 + gn : -1;
    soff[i] = scaled && wrow[i] >= 0 ? (wrow[i] / w.block_rows) * w.scale_cols : 0;
  }
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kBK) {
#pragma unroll
    for (int i = 0; i < kBM * kBK / 256; ++i) {
      const int idx = tid + 256 * i, m = idx / kBK, k = idx % kBK;
      const int64_t gm = m0 + m, gk = k0 + k;
      const float xv = (gm < a.n && gk < K) ? a.x[gm * K + gk] : 0.0f;
      xs[k][m] = a.bf16_x ? round_bf16(xv) : xv;
    }
    const int64_t gk = k0 + kcol;
    const int64_t scol = scaled ? gk / w.block_cols : 0;
#pragma unroll
    for (int i = 0; i < kBN * kBK / 256; ++i) {
      float v = 0.0f;
      if (wrow[i] >= 0 && gk < K) {
        v = raw_at<F>(w.data, wrow[i], K, gk);
        if (scaled) {
          const int64_t si = soff[i] + scol;
          v *= w.scale_format == SFormat::kE8M0 ? e8m0_to_float(w.scale[si]) : reinterpret_cast<const float*>(w.scale)[si];
        }
      }
      ws[kcol][tid / kBK + 8 * i] = v;
    }
    __syncthreads();
#pragma unroll 8
    for (int k = 0; k < kBK; ++k) {
      float xv[4], wv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) xv[i] = xs[k][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) wv[j] = ws[k][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += xv[i] * wv[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t gm = m0 + ty + 16 * i, gn = n0 + tx + 16 * j;
      if (gm < a.n && gn < a.num_rows) a.y[gm * a.num_rows + gn] = acc[i][j];
    }
}

}  // namespace

cudaError_t launch(const LinearArgs& a, cudaStream_t stream) {
  const int64_t gx = (a.num_rows + kBN - 1) / kBN, gy = (a.n + kBM - 1) / kBM;
  if (gx > INT32_MAX || gy > 65535) return cudaErrorInvalidValue;
  const dim3 grid{unsigned(gx), unsigned(gy)};
  switch (a.w.format) {
    case WFormat::kF32: tiled_kernel<WFormat::kF32><<<grid, 256, 0, stream>>>(a); break;
    case WFormat::kBF16: tiled_kernel<WFormat::kBF16><<<grid, 256, 0, stream>>>(a); break;
    case WFormat::kF16: tiled_kernel<WFormat::kF16><<<grid, 256, 0, stream>>>(a); break;
    case WFormat::kE4M3: tiled_kernel<WFormat::kE4M3><<<grid, 256, 0, stream>>>(a); break;
    case WFormat::kE2M1: tiled_kernel<WFormat::kE2M1><<<grid, 256, 0, stream>>>(a); break;
  }
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels::tiled
