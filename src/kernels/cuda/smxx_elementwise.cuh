// Row-wise and element-wise kernels: RMS norm, partial interleaved RoPE, and the
// model's block fake quantization (FP8 e4m3 / FP4 e2m1). fp32 activations in and
// out, matching the CPU oracle; a bf16-activation variant will take the same
// arguments with bf16 pointers once the model runs bf16 between ops.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

struct RmsNormArgs {
  const float* x = nullptr;       // [n, dim]
  float* y = nullptr;             // [n, dim]; may alias x
  const float* weight = nullptr;  // [dim] or null
  int64_t n = 0, dim = 0;
  float eps = 1e-6f;
};
cudaError_t rms_norm(const RmsNormArgs& a, cudaStream_t stream);

struct RopeArgs {
  float* x = nullptr;                  // [n, heads, dim], rotated in place
  const int64_t* positions = nullptr;  // [n]
  const float* inv_freq = nullptr;     // [rope_dim / 2]
  int64_t n = 0, heads = 1, dim = 0, rope_dim = 0;  // rope_dim even, <= dim
  bool inverse = false;
  float attention_factor = 1.0f;
};
cudaError_t rope(const RopeArgs& a, cudaStream_t stream);

enum class QuantKind : int { kFp8E4m3, kFp4Ue8m0, kFp4E4m3 };

struct FakeQuantArgs {
  float* x = nullptr;  // [n, dim], in place; untouched when dim % block != 0
  int64_t n = 0, dim = 0;
  int block = 32;      // 1, 2, 4, 8, 16 or 32 (one block lives inside one warp)
  QuantKind kind = QuantKind::kFp8E4m3;
};
cudaError_t fake_quant(const FakeQuantArgs& a, cudaStream_t stream);

// rms_norm, rope and fake_quant of one row in one launch (one block per row, the row
// in shared memory between the steps): the KV path of attention (kv norm + RoPE +
// FP8 fake quantization), the compressed entry (RoPE + FP4) and the index key (norm +
// RoPE + FP4) each wrote and re-read their rows in HBM once per step. Every step runs
// the arithmetic of its own kernel in its order (the norm's 256-thread sum and tree,
// RoPE's double sincos, the quantization block inside one warp), so the result is
// bitwise the sequence's. Forward RoPE; `heads` consecutive rows share a position.
struct NormRopeQuantArgs {
  const float* x = nullptr;  // [n, dim]
  float* y = nullptr;        // [n, dim]; may alias x
  int64_t n = 0, dim = 0;    // dim <= kMaxNormRopeQuantDim
  bool norm = true;          // rms_norm first (weight may be null)
  const float* weight = nullptr;
  float eps = 1e-6f;
  const int64_t* positions = nullptr;  // [n / heads]; RoPE of the last rope_dim channels, 0: none
  int64_t heads = 1;                   // rows per position (heads of one token: rows t * heads ..)
  const float* inv_freq = nullptr;     // [rope_dim / 2]
  int64_t rope_dim = 0;
  float attention_factor = 1.0f;
  int quant_block = 0;  // 0: no fake quantization; else as FakeQuantArgs::block
  QuantKind kind = QuantKind::kFp8E4m3;
  // 0: a warp per row where dim % 32 == 0 and dim <= 256, else a block per row; 1: always
  // a block per row. Same bits; 1 exists for the A/B test.
  int variant = 0;
  // [n] or null: row t is also written to copy_to[t] (dim floats; the model's window ring
  // row of a decode token, so the copy_rows launch that wrote it goes).
  float* const* copy_to = nullptr;
};
constexpr int64_t kMaxNormRopeQuantDim = 8192;
cudaError_t norm_rope_quant(const NormRopeQuantArgs& a, cudaStream_t stream);
// rms_norm(r) and norm_rope_quant(q) in one launch (one block per row of either; q always
// on the block kernel): bitwise the two calls (the batched single-block loops of
// DEEPINFER_B1_FUSE). For two independent row sets, e.g. the decode layer's q and kv.
cudaError_t rms_norm_and_norm_rope_quant(const RmsNormArgs& r, const NormRopeQuantArgs& q, cudaStream_t stream);

}  // namespace deepinfer::kernels
