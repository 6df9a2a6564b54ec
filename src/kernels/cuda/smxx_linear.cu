#include "kernels/cuda/smxx_linear.cuh"

namespace deepinfer::kernels::gemv {
// Defined in smxx_linear_gemv.cuh, instantiated in smxx_linear_gemv_<format>.cu.
template <WFormat F>
cudaError_t launch(const LinearArgs& a, cudaStream_t stream);
}  // namespace deepinfer::kernels::gemv

namespace deepinfer::kernels {
namespace {

// ---------------------------------------------------------------------------
// Tiled SIMT path.
// ---------------------------------------------------------------------------

constexpr int kBM = 64, kBN = 64, kBK = 32;

// 256 threads; thread (ty, tx) owns tokens ty + 16 i and rows tx + 16 j (i, j < 4),
// so a warp reads 2 broadcast x values and 16 consecutive weight values per k.
__global__ void __launch_bounds__(256) tiled_kernel(LinearArgs a) {
  __shared__ float xs[kBK][kBM + 1];
  __shared__ float ws[kBK][kBN + 1];
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  const int64_t K = a.w.cols;
  float acc[4][4] = {};
  for (int64_t k0 = 0; k0 < K; k0 += kBK) {
#pragma unroll
    for (int i = 0; i < kBM * kBK / 256; ++i) {
      const int idx = tid + 256 * i, m = idx / kBK, k = idx % kBK;
      const int64_t gm = m0 + m, gk = k0 + k;
      xs[k][m] = (gm < a.n && gk < K) ? a.x[gm * K + gk] : 0.0f;
    }
#pragma unroll
    for (int i = 0; i < kBN * kBK / 256; ++i) {
      const int idx = tid + 256 * i, nn = idx / kBK, k = idx % kBK;
      const int64_t gn = n0 + nn, gk = k0 + k;
      ws[k][nn] = (gn < a.num_rows && gk < K) ? weight_at(a.w, a.row0 + gn, gk) : 0.0f;
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

bool linear_gemv_eligible(const LinearArgs& a) {
  const WeightArgs& w = a.w;
  const int per_vec = w.format == WFormat::kF32 ? 4 : (w.format == WFormat::kBF16 || w.format == WFormat::kF16) ? 8
                      : w.format == WFormat::kE4M3 ? 16 : 32;
  const int64_t row_bytes = w.format == WFormat::kE2M1 ? w.cols / 2 : w.cols * (per_vec == 4 ? 4 : per_vec == 8 ? 2 : 1);
  return a.n <= 8 && w.cols % per_vec == 0 && row_bytes % 16 == 0 && w.cols % 4 == 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0 && reinterpret_cast<uintptr_t>(a.x) % 16 == 0 &&
         (w.scale_format == SFormat::kNone || w.block_cols % per_vec == 0);
}

cudaError_t linear(const LinearArgs& a, cudaStream_t stream) {
  if (!weight_args_valid(a.w) || a.n < 0 || a.row0 < 0 || a.num_rows < 0 || a.row0 + a.num_rows > a.w.rows)
    return cudaErrorInvalidValue;
  if (a.n == 0 || a.num_rows == 0) return cudaSuccess;
  if (a.x == nullptr || a.y == nullptr) return cudaErrorInvalidValue;
  const bool gemv = a.path == LinearPath::kGemv || (a.path == LinearPath::kAuto && linear_gemv_eligible(a));
  if (gemv) {
    if (!linear_gemv_eligible(a)) return cudaErrorInvalidValue;
    switch (a.w.format) {
      case WFormat::kF32: return gemv::launch<WFormat::kF32>(a, stream);
      case WFormat::kBF16: return gemv::launch<WFormat::kBF16>(a, stream);
      case WFormat::kF16: return gemv::launch<WFormat::kF16>(a, stream);
      case WFormat::kE4M3: return gemv::launch<WFormat::kE4M3>(a, stream);
      case WFormat::kE2M1: return gemv::launch<WFormat::kE2M1>(a, stream);
    }
    return cudaErrorInvalidValue;
  }
  const int64_t gx = (a.num_rows + kBN - 1) / kBN, gy = (a.n + kBM - 1) / kBM;
  if (gx > INT32_MAX || gy > 65535) return cudaErrorInvalidValue;
  tiled_kernel<<<dim3(unsigned(gx), unsigned(gy)), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
