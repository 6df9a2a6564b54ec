// gemv path of linear, f32 weights (one instantiation per file: parallel builds).
#include "kernels/cuda/smxx_linear_gemv.cuh"

namespace deepinfer::kernels::gemv {
template cudaError_t launch<WFormat::kF32>(const LinearArgs* calls, int count, cudaStream_t stream);
}  // namespace deepinfer::kernels::gemv
