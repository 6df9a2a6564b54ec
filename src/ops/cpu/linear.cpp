#include "ops/linear.h"

#include <vector>

#include "common/check.h"
#include "common/numeric.h"
#include "common/parallel.h"

namespace deepinfer::ops {

static float scale_at(const WeightRef& w, int64_t row, int64_t col) {
  if (w.scale == nullptr) return 1.0f;
  int64_t idx = (row / w.block_rows) * w.scale_cols + col / w.block_cols;
  if (w.scale_dtype == DType::F32) {
    float s;
    std::memcpy(&s, w.scale + idx * 4, 4);
    return s;
  }
  return e8m0_to_float(w.scale[idx]);
}

void dequant_row(const WeightRef& w, int64_t row, float* out, int64_t col0, int64_t count) {
  if (count < 0) count = w.cols - col0;
  DI_DCHECK(row >= 0 && row < w.rows && col0 >= 0 && col0 + count <= w.cols);
  switch (w.dtype) {
    case DType::F32: {
      const uint8_t* src = w.data + (row * w.cols + col0) * 4;
      std::memcpy(out, src, count * 4);
      break;
    }
    case DType::BF16: {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(w.data) + row * w.cols + col0;
      for (int64_t i = 0; i < count; ++i) out[i] = bf16_to_float(src[i]);
      break;
    }
    case DType::F16: {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(w.data) + row * w.cols + col0;
      for (int64_t i = 0; i < count; ++i) out[i] = fp16_to_float(src[i]);
      break;
    }
    case DType::F8_E4M3: {
      const uint8_t* src = w.data + row * w.cols + col0;
      for (int64_t i = 0; i < count; ++i) out[i] = e4m3_to_float(src[i]);
      break;
    }
    case DType::I8: {  // packed e2m1 pairs
      const uint8_t* src = w.data + row * (w.cols / 2);
      for (int64_t i = 0; i < count; ++i) {
        int64_t c = col0 + i;
        uint8_t byte = src[c / 2];
        out[i] = e2m1_to_float((c & 1) ? (byte >> 4) : (byte & 0xf));
      }
      break;
    }
    default:
      DI_CHECK(false, "unsupported weight dtype ", dtype_name(w.dtype));
  }
  if (w.scale != nullptr) {
    for (int64_t i = 0; i < count; ++i) out[i] *= scale_at(w, row, col0 + i);
  }
}

namespace cpu {

// Each output row is dequantized once and dotted with every input row. Sums are
// kept in double: the CPU backend is the oracle, so it aims at the exact value
// rather than at any particular fp32 summation order. Under Activations::kBF16 x is
// rounded to bf16 first (once, into a copy), so the products are those of the bf16
// tensor-core paths and only their summation order differs.
void linear(const LinearParams& p) {
  const WeightRef& w = p.w;
  const int64_t k = w.cols;
  const int64_t rows = p.num_rows < 0 ? w.rows - p.row0 : p.num_rows;
  DI_CHECK(p.row0 >= 0 && p.row0 + rows <= w.rows, "linear: row slice out of range");
  std::vector<float> rounded;
  const float* xs = p.x;
  if (p.act == Activations::kBF16 && p.n > 0) {
    rounded.resize(size_t(p.n * k));
    for (size_t i = 0; i < rounded.size(); ++i) rounded[i] = round_to_bf16(p.x[i]);
    xs = rounded.data();
  }
  parallel_for(
      rows,
      [&](int64_t r0, int64_t r1) {
        std::vector<float> row(k);
        for (int64_t r = r0; r < r1; ++r) {
          dequant_row(w, p.row0 + r, row.data());
          for (int64_t t = 0; t < p.n; ++t) {
            const float* x = xs + t * k;
            double acc = 0.0;
            for (int64_t i = 0; i < k; ++i) acc += double(x[i]) * double(row[i]);
            p.y[t * rows + r] = float(acc);
          }
        }
      },
      /*min_grain=*/8);
}

}  // namespace cpu
}  // namespace deepinfer::ops
