// linear: y[n, o] = sum_i x[n, i] * W[o, i] for a weight stored in any checkpoint
// format (F32, BF16, F16, FP8 e4m3 with block scales, packed FP4 e2m1 with 1x32
// scales). The weight is described by a WeightRef that points into the mapped
// checkpoint; backends dequantize on the fly, so no second copy is made.
#pragma once

#include <cstdint>

#include "io/safetensors.h"

namespace deepinfer::ops {

// A weight matrix [rows, cols] (logical, i.e. unpacked) and its optional scales.
// FP4: data holds rows x cols/2 bytes, element 2j in the low nibble of byte j.
// Scale s[r / block_rows][c / block_cols] multiplies element (r, c).
struct WeightRef {
  DType dtype = DType::F32;  // F32, BF16, F16, F8_E4M3, or I8 (= packed e2m1)
  const uint8_t* data = nullptr;
  int64_t rows = 0, cols = 0;
  const uint8_t* scale = nullptr;  // null: no scale
  DType scale_dtype = DType::F8_E8M0;  // F8_E8M0 or F32
  int64_t scale_cols = 0;          // row stride of the scale matrix, in elements
  int64_t block_rows = 1, block_cols = 1;
  // CUDA only (null elsewhere): a device bf16 image of the whole weight, rows x cols, the
  // exact dequantization the cuBLASLt path would otherwise write per call (made once at
  // load under --bf16-weights; ops::cuda::linear_make_bf16_copy). The GEMM path reads it
  // in place; every other path still reads data / scale.
  const uint16_t* bf16 = nullptr;

  bool empty() const { return data == nullptr; }
};

// What the activations entering a matrix product (a linear layer, an expert's w1 / w3 /
// w2) are rounded to first (MODEL_V41.md §9.3; --activations on generate / serve).
//   kF32: nothing: x as the forward computed it (fp32). The exact mode: the CUDA kernels
//     match the CPU oracle's double sums to ~1e-6 relative (3-term bf16 tensor-core
//     products where they use tensor cores).
//   kBF16: x rounded to bf16 (round to nearest even) -- what the reference does in its
//     bf16 run, where every activation is bf16. Weights dequantize exactly to bf16
//     (e4m3 / e2m1 times a power-of-two scale), so products are exact in one bf16
//     tensor-core MMA and only the fp32 summation order differs from the CPU oracle,
//     which rounds x the same way. This is the fast mode (one MMA per tile, bf16 GEMMs).
//   kFP8: what the reference runtime does in front of every FP8 GEMM (§9.3): each token's
//     x is cut into blocks of 32 contiguous K-elements (the last one shorter when K % 32
//     != 0) and each block quantized to e4m3 with a ue8m0 scale, exactly as the window-KV
//     fake quantization does (ops/quant.h quant_fp8_block: s = 2^ceil(log2(max(amax,
//     1e-4) / 448)), code = e4m3(clamp(x / s, +-448)), round to nearest even). Only for
//     FP8 e4m3 weights with no scale or ue8m0 scales whose blocks are a multiple of 32
//     columns wide (V4.1's 32 x 32), so a weight scale is constant over a K-block too.
//     What is exact (the CPU oracle, and bit for bit on the GPU): the codes and scales
//     of x, and each block's dot product D_b = sum of code_x * code_w over the block
//     (products of two e4m3 values have 8 significant bits and are multiples of 2^-18,
//     32 of them sum below 2^23: exact in double). The oracle then forms
//     y = sum_b D_b * (s_x,b * s_w,b) in double, blocks in K order, rounded once to fp32.
//     What the GPU may differ in: the order and precision of that fp32 sum over blocks
//     (one FMA per block, in its own order), and on the FP8 tensor cores the per-block
//     dot itself, which the MMA accumulates with its own (not exactly fp32) alignment.
//     Both are bounded by a small multiple of 2^-23 times S = sum_b |s_x,b s_w,b| *
//     sum |code_x * code_w| (the same sum over absolute values) plus the MMA's internal
//     truncation; tests/ops_cuda/cases_linear_fp8.cpp checks |gpu - cpu| <= 2^-9 S per
//     element and reports the worst ratio seen.
// In the MoE the rounding applies to x before w1 / w3 and to the scaled SwiGLU output
// before w2 (kBF16 only: kFP8 is for the dense FP8 linears). The attention
// (SinkAttentionParams::act) takes kBF16 too: bf16 q and entries, probabilities rounded to
// bf16 before PV (ops/attention.h). Nothing else (norms, the indexer, hyper-connections)
// changes.
enum class Activations : uint8_t { kF32, kBF16, kFP8 };

// Whether a weight can take Activations::kFP8 (see above).
bool fp8_activation_weight(const WeightRef& w);

// The model-level fp8 mode (--activations fp8, the reference runtime's): a model run with
// Activations::kFP8 quantizes what enters every FP8 weight that can take kFP8 (the dense
// FP8 linears, the shared expert) and rounds what enters every other matrix product to
// bf16 (BF16 / FP4 weights, the routed experts, attention), as its bf16 run does. The CPU
// and CUDA models pick each product's activations with these two, so they agree.
inline Activations activations_for(Activations mode, const WeightRef& w) {
  if (mode != Activations::kFP8) return mode;
  return fp8_activation_weight(w) ? Activations::kFP8 : Activations::kBF16;
}
// What a product that is not a dense FP8 linear takes in `mode` (kFP8 -> kBF16).
inline Activations rounding_of(Activations mode) { return mode == Activations::kFP8 ? Activations::kBF16 : mode; }

// Rounds an fp32 value to the nearest bf16 (ties to even), returned as fp32. NaN stays NaN.
inline float round_to_bf16(float v) {
  uint32_t b;
  __builtin_memcpy(&b, &v, 4);
  if ((b & 0x7f800000u) == 0x7f800000u) return v;  // inf / NaN unchanged
  b += 0x7fffu + ((b >> 16) & 1u);
  b &= 0xffff0000u;
  float r;
  __builtin_memcpy(&r, &b, 4);
  return r;
}

struct LinearParams {
  const float* x = nullptr;  // [n, w.cols]
  float* y = nullptr;        // [n, num_rows]
  int64_t n = 0;
  WeightRef w;
  // Output rows row0 .. row0 + num_rows of W (num_rows < 0: all rows). A slice of
  // rows is how the grouped output projection runs one group's block of wo_a.
  int64_t row0 = 0;
  int64_t num_rows = -1;
  Activations act = Activations::kF32;  // x rounded to bf16 (kBF16) or quantized to e4m3 (kFP8) first
};

// Dequantizes W[row, col0 : col0 + count] into out (fp32).
void dequant_row(const WeightRef& w, int64_t row, float* out, int64_t col0 = 0, int64_t count = -1);

namespace cpu {
void linear(const LinearParams& p);
}  // namespace cpu

}  // namespace deepinfer::ops
