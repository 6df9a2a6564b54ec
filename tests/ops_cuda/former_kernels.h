// The former kernels of the ops the small-kernel rework changed (former_kernels.cu):
// references for the bitwise A/B cases. Default stream, no argument checks (the
// cases pass valid shapes).
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/smxx_attention.cuh"
#include "kernels/cuda/smxx_elementwise.cuh"
#include "kernels/cuda/smxx_hyper_connection.cuh"
#include "kernels/cuda/smxx_model.cuh"
#include "kernels/cuda/smxx_moe.cuh"

namespace deepinfer::testing_cuda::former {

// The mixes' partial sums (per-token kernel) and the fused finish + collapse + norm,
// with the expand first when e is given.
cudaError_t hc_mixes_collapse_norm(const kernels::HcExpandArgs* e, const kernels::HcMixesArgs& m,
                                   const kernels::HcCollapseNormArgs& cn);
cudaError_t rope(const kernels::RopeArgs& a);
cudaError_t router_select(const kernels::RouterSelectArgs& a);
cudaError_t moe_combine(const kernels::MoeCombineArgs& a);
cudaError_t engram_gate(const kernels::EngramGateArgs& a);
// The small-batch sink attention kernel before its staged rework (4 heads per block), at
// every n, both modes (a.bf16), RoPE folded in where a.rope_dim > 0; a.path and a.kv_rows
// are not read.
cudaError_t sink_attention_small(const kernels::SinkAttentionArgs& a);

}  // namespace deepinfer::testing_cuda::former
