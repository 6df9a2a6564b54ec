// rms_norm, rope and the fake quantizations on the GPU (kernels/cuda/smxx_elementwise).
#include "kernels/cuda/smxx_elementwise.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer::ops::cuda {

void rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.n >= 0 && p.dim > 0, "rms_norm: bad shape");
  CUDA_OP_CHECK(p.n == 0 || (p.x && p.y), "rms_norm: null tensor");
  CUDA_CHECK(kernels::rms_norm({p.x, p.y, p.weight, p.n, p.dim, p.eps}, stream));
}

void rope(const RopeParamsOp& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.rope_dim % 2 == 0 && p.rope_dim >= 0 && p.rope_dim <= p.dim, "rope: rope_dim must be even and <= dim");
  CUDA_OP_CHECK(p.n >= 0 && p.heads > 0, "rope: bad shape");
  kernels::RopeArgs a;
  a.x = p.x;
  a.positions = p.positions;
  a.inv_freq = p.inv_freq;
  a.n = p.n;
  a.heads = p.heads;
  a.dim = p.dim;
  a.rope_dim = p.rope_dim;
  a.inverse = p.inverse;
  a.attention_factor = p.attention_factor;
  CUDA_CHECK(kernels::rope(a, stream));
}

static void fake_quant(const FakeQuantParams& p, kernels::QuantKind kind, cudaStream_t stream) {
  CUDA_OP_CHECK(p.block > 0 && p.block <= 32 && (p.block & (p.block - 1)) == 0,
                "fake_quant: the CUDA kernel takes power-of-two blocks up to 32");
  CUDA_OP_CHECK(p.n >= 0 && p.dim >= 0, "fake_quant: bad shape");
  CUDA_CHECK(kernels::fake_quant({p.x, p.n, p.dim, int(p.block), kind}, stream));
}

void fake_quant_fp8(const FakeQuantParams& p, cudaStream_t stream) {
  fake_quant(p, kernels::QuantKind::kFp8E4m3, stream);
}

void fake_quant_fp4(const FakeQuantParams& p, Fp4Scale scale_kind, cudaStream_t stream) {
  fake_quant(p, scale_kind == Fp4Scale::kE4m3 ? kernels::QuantKind::kFp4E4m3 : kernels::QuantKind::kFp4Ue8m0, stream);
}

}  // namespace deepinfer::ops::cuda
