// Tensor-core path of linear, e2m1 weights (one instantiation per file: parallel builds).
#include "kernels/cuda/smxx_linear_mma.cuh"

namespace deepinfer::kernels::mma {
template cudaError_t launch<WFormat::kE2M1>(const LinearArgs& a, cudaStream_t stream);
}  // namespace deepinfer::kernels::mma
