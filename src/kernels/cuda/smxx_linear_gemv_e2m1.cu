// gemv path of linear, e2m1 weights (one instantiation per file: parallel builds).
#include "kernels/cuda/smxx_linear_gemv.cuh"

namespace deepinfer::kernels::gemv {
template cudaError_t launch<WFormat::kE2M1>(const LinearArgs* calls, int count, cudaStream_t stream);
}  // namespace deepinfer::kernels::gemv
