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

  bool empty() const { return data == nullptr; }
};

struct LinearParams {
  const float* x = nullptr;  // [n, w.cols]
  float* y = nullptr;        // [n, num_rows]
  int64_t n = 0;
  WeightRef w;
  // Output rows row0 .. row0 + num_rows of W (num_rows < 0: all rows). A slice of
  // rows is how the grouped output projection runs one group's block of wo_a.
  int64_t row0 = 0;
  int64_t num_rows = -1;
};

// Dequantizes W[row, col0 : col0 + count] into out (fp32).
void dequant_row(const WeightRef& w, int64_t row, float* out, int64_t col0 = 0, int64_t count = -1);

namespace cpu {
void linear(const LinearParams& p);
}  // namespace cpu

}  // namespace deepinfer::ops
