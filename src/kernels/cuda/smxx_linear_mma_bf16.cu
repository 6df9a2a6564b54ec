// Tensor-core path of linear, bf16 weights (one instantiation per file: parallel builds).
#include "kernels/cuda/smxx_linear_mma.cuh"

namespace deepinfer::kernels::mma {
template cudaError_t launch<WFormat::kBF16>(const LinearArgs& a, cudaStream_t stream);
}  // namespace deepinfer::kernels::mma
