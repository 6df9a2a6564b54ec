// Glue kernels of the V4.1 forward on the GPU (src/model/v41/model_cuda.cpp): the
// steps between the ops of src/ops/cuda that the CPU model does with loops.
//   embed_rows      h[t, s, :] = dequant(W[ids[t], :]) for every stream s < hc.
//   engram_gather   e[t, c, :] = dequant(table[rows[t * row_stride + c], :]).
//   engram_gate     h[t, k] += sigmoid(signed sqrt(g)) * value[t]; g from the
//                   normalized dot of h[t, k] and key[t, k] (MODEL_V41.md §5). One
//                   block per (t, k); the three sums in double, as the CPU.
//   compress_pool   latent[g, ch] = sum_k kv[g*ratio+k, ch] softmax_k(gate[., ch]),
//                   in fp32 in the CPU's order (one thread per (group, channel)).
//   copy_rows       dst_rows[i][0:dim] = src_rows[i][0:dim] (pointer lists built by
//                   the host: window rings, paged history, gathers and scatters).
//   scatter_add_rows acc[rows[i], :] += y[i, :] (rows distinct within one call).
//   add / scale     elementwise.
// Shapes and limits: dims are int64; every pointer list lives in device memory.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/smxx_types.h"

namespace deepinfer::kernels {

struct EmbedRowsArgs {
  WeightArgs w;                   // [vocab, dim]
  const int64_t* ids = nullptr;   // [n] device
  float* h = nullptr;             // [n, hc, dim]
  int64_t n = 0, hc = 1;
};
cudaError_t embed_rows(const EmbedRowsArgs& a, cudaStream_t stream);

struct EngramGatherArgs {
  WeightArgs table;                // [rows, head_dim]
  const int64_t* rows = nullptr;   // [n, row_stride] device; columns 0..cols-1 used
  int64_t row_stride = 0, n = 0, cols = 0;
  float* out = nullptr;            // [n, cols, head_dim]
  int* bad_row = nullptr;          // set to 1 when a row is out of range (checked by the host)
};
cudaError_t engram_gather(const EngramGatherArgs& a, cudaStream_t stream);

struct EngramGateArgs {
  float* h = nullptr;              // [n, hc, dim], updated
  const float* kv = nullptr;       // [n, hc + 1, dim]: hc keys then the value
  const float* gate_weight = nullptr;  // [hc, dim]
  int64_t n = 0, hc = 0, dim = 0;
  float eps = 1e-6f;
};
cudaError_t engram_gate(const EngramGateArgs& a, cudaStream_t stream);

struct CompressPoolArgs {
  const float* kv = nullptr;    // [groups * ratio, dim] (rows of consecutive groups)
  const float* gate = nullptr;  // [groups * ratio, dim]
  float* latent = nullptr;      // [groups, dim]
  int64_t groups = 0, ratio = 1, dim = 0;
};
cudaError_t compress_pool(const CompressPoolArgs& a, cudaStream_t stream);

// The compressor's gather (copy_rows of each group's rows into consecutive scratch rows),
// compress_pool and the latent's rms_norm in one launch (NOTES 54): one 256-thread block per
// group reads its rows in place through the pointer list, pools each channel with
// compress_pool_kernel's arithmetic (ratio 1: the row itself) into shared memory and
// normalizes it with rms_norm's (the 256-thread strided sum of products, block_sum, the
// IEEE rsqrt, weight * (x * r)): bitwise the three launches. At batch 1 they were three
// dependent 1-4-block kernels on the source layers' critical path.
struct CompressGatherArgs {
  // [groups * ratio * (ratio > 1 ? 2 : 1)]: group g's rows k = 0 .. ratio - 1 in order, each
  // its kv row, then (ratio > 1) its gate row (the compressor's gather list).
  const float* const* rows = nullptr;
  float* latent = nullptr;        // [groups, dim]
  const float* weight = nullptr;  // [dim] or null: the norm's weight
  int64_t groups = 0, ratio = 1, dim = 0;  // dim <= kMaxCompressGatherDim
  float eps = 1e-6f;
};
constexpr int64_t kMaxCompressGatherDim = 8192;
cudaError_t compress_gather_pool_norm(const CompressGatherArgs& a, cudaStream_t stream);

struct CopyRowsArgs {
  const float* const* src = nullptr;  // [count] device array of row pointers
  float* const* dst = nullptr;        // [count]
  int64_t count = 0, dim = 0;
};
cudaError_t copy_rows(const CopyRowsArgs& a, cudaStream_t stream);

struct ScatterAddRowsArgs {
  float* acc = nullptr;            // [*, dim]
  const int64_t* rows = nullptr;   // [m] distinct
  const float* y = nullptr;        // [m, dim]
  int64_t m = 0, dim = 0;
};
cudaError_t scatter_add_rows(const ScatterAddRowsArgs& a, cudaStream_t stream);

// out[i] = a[i] + b[i]
cudaError_t add(const float* a, const float* b, float* out, int64_t count, cudaStream_t stream);
// x[i] *= s
cudaError_t scale(float* x, float s, int64_t count, cudaStream_t stream);

}  // namespace deepinfer::kernels
