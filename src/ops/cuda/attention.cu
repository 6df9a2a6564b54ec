// Sink attention on the GPU (kernels/cuda/smxx_attention).
#include "kernels/cuda/smxx_attention.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"

namespace deepinfer::ops::cuda {

static_assert(kernels::kAttnLog2eDev == kAttnLog2e, "the bf16 mode's log2(e) must be one constant");

void sink_attention(const SinkAttentionParams& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.n >= 0 && p.heads > 0 && p.dim > 0, "sink_attention: bad shape");
  CUDA_OP_CHECK(p.dim <= kernels::kAttnMaxDim, "sink_attention: head dim above the kernel's 512");
  kernels::SinkAttentionArgs a;
  a.q = p.q;
  a.kv = p.kv;
  a.offsets = p.offsets;
  a.ids = p.ids;
  a.sink = p.sink;
  a.scale = p.scale;
  a.out = p.out;
  a.n = p.n;
  a.heads = p.heads;
  a.dim = p.dim;
  a.bf16 = p.act == Activations::kBF16;
  a.log2_scale = attention_log2_scale(p.scale);
  CUDA_OP_CHECK(p.gpu_path >= 0 && p.gpu_path <= 2, "sink_attention: gpu_path must be 0, 1 or 2");
  a.path = p.gpu_path;
  a.positions = p.positions;
  a.inv_freq = p.inv_freq;
  a.rope_dim = p.rope_dim;
  a.rope_factor = p.rope_factor;
  CUDA_OP_CHECK(p.kv_rows >= 0, "sink_attention: negative kv_rows");
  a.kv_rows = p.kv_rows;
  CUDA_CHECK(kernels::sink_attention(a, stream));
}

}  // namespace deepinfer::ops::cuda
