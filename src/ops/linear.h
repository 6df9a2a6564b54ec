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
// In the MoE the rounding applies to x before w1 / w3 and to the scaled SwiGLU output
// before w2. Nothing else (attention, norms, the indexer, hyper-connections) changes.
enum class Activations : uint8_t { kF32, kBF16 };

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
  Activations act = Activations::kF32;  // x is rounded to bf16 first under kBF16
};

// Dequantizes W[row, col0 : col0 + count] into out (fp32).
void dequant_row(const WeightRef& w, int64_t row, float* out, int64_t col0 = 0, int64_t count = -1);

namespace cpu {
void linear(const LinearParams& p);
}  // namespace cpu

}  // namespace deepinfer::ops
