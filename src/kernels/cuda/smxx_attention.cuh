// Sink attention over an explicit per-query entry list (CSR), shared K = V
// (MODEL_V41.md §3): out[t, h] = sum_j p_j kv[ids_j], p = softmax over
// {scale * q[t, h] . kv[ids_j]} plus one sink logit per head that has no value.
// fp32 with an online softmax; entries are staged once per block and shared by
// the block's heads, since every head of a query reads the same entries.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

constexpr int64_t kAttnMaxDim = 512;  // V4.1 head_dim; a lane keeps dim / 32 values

struct SinkAttentionArgs {
  const float* q = nullptr;          // [n, heads, dim]
  const float* kv = nullptr;         // [num_entries, dim]
  const int64_t* offsets = nullptr;  // [n + 1], non-decreasing
  const int64_t* ids = nullptr;      // [offsets[n]] indices into kv
  const float* sink = nullptr;       // [heads]
  float scale = 1.0f;
  float* out = nullptr;              // [n, heads, dim]
  int64_t n = 0, heads = 0, dim = 0;  // dim <= kAttnMaxDim
};
cudaError_t sink_attention(const SinkAttentionArgs& a, cudaStream_t stream);

}  // namespace deepinfer::kernels
