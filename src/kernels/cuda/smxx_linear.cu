#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear.cuh"

namespace deepinfer::kernels {
namespace gemv {
// Defined in smxx_linear_gemv.cuh, instantiated in smxx_linear_gemv_<format>.cu.
template <WFormat F>
cudaError_t launch(const LinearArgs& a, cudaStream_t stream);
}  // namespace gemv
namespace mma {
// Defined in smxx_linear_mma.cuh, instantiated in smxx_linear_mma_<format>.cu.
template <WFormat F>
cudaError_t launch(const LinearArgs& a, cudaStream_t stream);
}  // namespace mma
namespace tiled {
cudaError_t launch(const LinearArgs& a, cudaStream_t stream);  // smxx_linear_tiled.cu
}  // namespace tiled

namespace {
bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
}  // namespace

bool linear_gemv_eligible(const LinearArgs& a) {
  const WeightArgs& w = a.w;
  const int per_vec = w.format == WFormat::kF32 ? 4 : (w.format == WFormat::kBF16 || w.format == WFormat::kF16) ? 8
                      : w.format == WFormat::kE4M3 ? 16 : 32;
  const int64_t row_bytes = w.format == WFormat::kE2M1 ? w.cols / 2 : w.cols * (per_vec == 4 ? 4 : per_vec == 8 ? 2 : 1);
  const bool strided_ok = a.x_stride == 0 || (a.x_stride >= w.cols && a.x_stride % 4 == 0);
  const bool groups_ok = a.x_group_rows == 0 || (a.x_group_rows > 0 && a.x_group_rows % 4 == 0 &&
                                                 a.x_group_step >= 0 && a.x_group_step % 4 == 0);
  return a.n <= 8 && w.cols % per_vec == 0 && row_bytes % 16 == 0 && w.cols % 4 == 0 && aligned16(w.data) &&
         aligned16(a.x) && strided_ok && groups_ok &&
         (w.scale_format == SFormat::kNone || (pow2(w.block_cols) && w.block_cols >= per_vec));
}

bool linear_mma_eligible(const LinearArgs& a) {
  const WeightArgs& w = a.w;
  const bool quant = w.format == WFormat::kE4M3 || w.format == WFormat::kE2M1;
  // Power-of-two scales keep the bf16 weights exact; 16 staged elements share one.
  const bool scale_ok = quant ? (w.scale_format == SFormat::kNone ||
                                 (w.scale_format == SFormat::kE8M0 && pow2(w.block_cols) && w.block_cols >= 16))
                              : (w.format == WFormat::kBF16 && w.scale_format == SFormat::kNone);
  return scale_ok && w.cols % 32 == 0 && aligned16(w.data) && aligned16(a.x);
}

cudaError_t linear(const LinearArgs& a, cudaStream_t stream) {
  if (!weight_args_valid(a.w) || a.n < 0 || a.row0 < 0 || a.num_rows < 0 || a.row0 + a.num_rows > a.w.rows)
    return cudaErrorInvalidValue;
  if (a.n == 0 || a.num_rows == 0) return cudaSuccess;
  if (a.x == nullptr || a.y == nullptr) return cudaErrorInvalidValue;
  LinearPath path = a.path;
  if (a.x_stride != 0 || a.x_group_rows != 0) {  // strided / grouped x: the gemv path only
    if (path != LinearPath::kAuto && path != LinearPath::kGemv) return cudaErrorInvalidValue;
    path = LinearPath::kGemv;
  }
  if (path == LinearPath::kAuto)
    path = linear_gemv_eligible(a) ? LinearPath::kGemv : linear_mma_eligible(a) ? LinearPath::kMma : LinearPath::kTiled;
  switch (path) {
    case LinearPath::kGemv:
      if (!linear_gemv_eligible(a)) return cudaErrorInvalidValue;
      switch (a.w.format) {
        case WFormat::kF32: return gemv::launch<WFormat::kF32>(a, stream);
        case WFormat::kBF16: return gemv::launch<WFormat::kBF16>(a, stream);
        case WFormat::kF16: return gemv::launch<WFormat::kF16>(a, stream);
        case WFormat::kE4M3: return gemv::launch<WFormat::kE4M3>(a, stream);
        case WFormat::kE2M1: return gemv::launch<WFormat::kE2M1>(a, stream);
      }
      return cudaErrorInvalidValue;
    case LinearPath::kMma:
      if (!linear_mma_eligible(a)) return cudaErrorInvalidValue;
      if (a.w.format == WFormat::kE4M3) return mma::launch<WFormat::kE4M3>(a, stream);
      if (a.w.format == WFormat::kE2M1) return mma::launch<WFormat::kE2M1>(a, stream);
      return mma::launch<WFormat::kBF16>(a, stream);
    default:
      return tiled::launch(a, stream);
  }
}

}  // namespace deepinfer::kernels
