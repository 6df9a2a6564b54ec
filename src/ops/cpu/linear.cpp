#include "ops/linear.h"

#include <algorithm>
#include <vector>

#include "common/check.h"
#include "common/numeric.h"
#include "common/parallel.h"
#include "ops/quant.h"

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

bool fp8_activation_weight(const WeightRef& w) {
  if (w.dtype != DType::F8_E4M3) return false;
  if (w.scale == nullptr) return true;
  return w.scale_dtype == DType::F8_E8M0 && w.block_cols > 0 && w.block_cols % 32 == 0 && w.block_rows > 0;
}

namespace cpu {

namespace {

// Activations::kFP8 (linear.h): x quantized per 32-K block, block dot products of the
// e4m3 codes exact in double, scaled by s_x * s_w and summed in K order.
void linear_fp8(const LinearParams& p, int64_t rows) {
  const WeightRef& w = p.w;
  // The weight comes from the checkpoint and the mode from the command line: an input error.
  DI_CHECK_INPUT(fp8_activation_weight(w),
                 "linear: Activations::kFP8 needs an e4m3 weight with no or ue8m0 scales in blocks of 32k columns");
  const int64_t k = w.cols, nb = (k + 31) / 32;
  std::vector<float> xcode(size_t(p.n * k)), xscale(size_t(p.n * nb));
  std::vector<uint8_t> codes(32);
  for (int64_t t = 0; t < p.n; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t len = std::min<int64_t>(32, k - b * 32);
      xscale[size_t(t * nb + b)] = quant_fp8_block(p.x + t * k + b * 32, len, codes.data());
      for (int64_t i = 0; i < len; ++i) xcode[size_t(t * k + b * 32 + i)] = e4m3_to_float(codes[size_t(i)]);
    }
  parallel_for(
      rows,
      [&](int64_t r0, int64_t r1) {
        std::vector<float> wcode(static_cast<size_t>(k));
        std::vector<double> wscale(static_cast<size_t>(nb));
        for (int64_t r = r0; r < r1; ++r) {
          const int64_t row = p.row0 + r;
          const uint8_t* src = w.data + row * k;
          for (int64_t i = 0; i < k; ++i) wcode[size_t(i)] = e4m3_to_float(src[i]);
          for (int64_t b = 0; b < nb; ++b) wscale[size_t(b)] = scale_at(w, row, b * 32);
          for (int64_t t = 0; t < p.n; ++t) {
            const float* xc = xcode.data() + t * k;
            const float* xs = xscale.data() + t * nb;
            double acc = 0.0;
            for (int64_t b = 0; b < nb; ++b) {
              const int64_t i0 = b * 32, i1 = std::min<int64_t>(k, i0 + 32);
              double dot = 0.0;  // exact: see linear.h
              for (int64_t i = i0; i < i1; ++i) dot += double(xc[i]) * double(wcode[size_t(i)]);
              acc += dot * (double(xs[b]) * wscale[size_t(b)]);
            }
            p.y[t * rows + r] = float(acc);
          }
        }
      },
      /*min_grain=*/8);
}

}  // namespace


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
  if (p.act == Activations::kFP8) {
    linear_fp8(p, rows);
    return;
  }
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
