// gemv path of linear, e4m3 weights (one instantiation per file: parallel builds).
#include "kernels/cuda/smxx_linear_gemv.cuh"

namespace deepinfer::kernels::gemv {
template cudaError_t launch<WFormat::kE4M3>(const LinearArgs* calls, int count, cudaStream_t stream);
}  // namespace deepinfer::kernels::gemv

namespace deepinfer::kernels {
bool linear_gemv_xs_eligible(const LinearArgs& a) {
  return linear_gemv_eligible(a) && a.w.format == WFormat::kE4M3 &&
         gemv::xs_fits(a, gemv::gemv_ks(WFormat::kE4M3, a.num_rows, a.w.cols));
}
}  // namespace deepinfer::kernels
