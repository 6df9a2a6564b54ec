#include "harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace deepinfer::testing_cuda {

const char* wkind_name(WKind k) {
  switch (k) {
    case WKind::kF32: return "f32";
    case WKind::kBF16: return "bf16";
    case WKind::kF16: return "f16";
    case WKind::kFp8E8m0: return "fp8";
    case WKind::kFp8F32Scale: return "fp8f32scale";
    case WKind::kFp4E8m0: return "fp4";
  }
  return "?";
}

namespace {

int log2_round(float sd) { return int(std::lround(std::log2(sd))); }

// Scales are powers of two (e8m0) near sd / 16 for FP8 and sd / 2 for FP4, jittered
// by one binade per block so that neighbouring blocks really differ.
void fill_e8m0_scales(Rng& rng, TestWeight& w, int target_log2) {
  const int64_t srows = (w.rows + w.block_rows - 1) / w.block_rows;
  w.scale.resize(srows * w.scale_cols);
  for (auto& s : w.scale) s = uint8_t(127 + target_log2 + int(randint(rng, -1, 1)));
}

float e8m0_value(uint8_t e) { return std::ldexp(1.0f, int(e) - 127); }

}  // namespace

std::unique_ptr<TestWeight> random_weight(Rng& rng, WKind kind, int64_t rows, int64_t cols, float sd) {
  auto w = std::make_unique<TestWeight>();
  w->rows = rows;
  w->cols = cols;
  std::normal_distribution<float> nd(0.0f, sd);
  switch (kind) {
    case WKind::kF32: {
      w->dtype = DType::F32;
      w->data.resize(rows * cols * 4);
      for (int64_t i = 0; i < rows * cols; ++i) {
        const float v = nd(rng);
        std::memcpy(&w->data[i * 4], &v, 4);
      }
      break;
    }
    case WKind::kBF16: {
      w->dtype = DType::BF16;
      w->data.resize(rows * cols * 2);
      for (int64_t i = 0; i < rows * cols; ++i) {
        const uint16_t b = float_to_bf16(nd(rng));
        std::memcpy(&w->data[i * 2], &b, 2);
      }
      break;
    }
    case WKind::kF16: {
      // Random fp16 bit patterns in the binades around sd (numeric.h has no
      // float -> fp16 rounding, and exact codes are all a test needs).
      w->dtype = DType::F16;
      w->data.resize(rows * cols * 2);
      const int e0 = 15 + log2_round(sd);
      for (int64_t i = 0; i < rows * cols; ++i) {
        const uint16_t sign = uint16_t(randint(rng, 0, 1) << 15);
        const uint16_t exp = uint16_t(std::clamp<int64_t>(e0 + randint(rng, -3, 1), 1, 30));
        const uint16_t b = uint16_t(sign | (exp << 10) | uint16_t(randint(rng, 0, 1023)));
        std::memcpy(&w->data[i * 2], &b, 2);
      }
      break;
    }
    case WKind::kFp8E8m0:
    case WKind::kFp8F32Scale: {
      w->dtype = DType::F8_E4M3;
      const bool f32 = kind == WKind::kFp8F32Scale;
      w->block_rows = w->block_cols = f32 ? 128 : 32;
      w->scale_cols = (cols + w->block_cols - 1) / w->block_cols;
      const int64_t srows = (rows + w->block_rows - 1) / w->block_rows;
      std::vector<float> sv(srows * w->scale_cols);
      if (f32) {
        w->scale_dtype = DType::F32;
        for (auto& s : sv) s = sd / 16.0f * std::uniform_real_distribution<float>(0.5f, 2.0f)(rng);
        w->scale.resize(sv.size() * 4);
        std::memcpy(w->scale.data(), sv.data(), w->scale.size());
      } else {
        w->scale_dtype = DType::F8_E8M0;
        fill_e8m0_scales(rng, *w, log2_round(sd) - 4);
        for (size_t i = 0; i < sv.size(); ++i) sv[i] = e8m0_value(w->scale[i]);
      }
      w->data.resize(rows * cols);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const float s = sv[(r / w->block_rows) * w->scale_cols + c / w->block_cols];
          w->data[r * cols + c] = float_to_e4m3(std::clamp(nd(rng) / s, -448.0f, 448.0f));
        }
      break;
    }
    case WKind::kFp4E8m0: {
      w->dtype = DType::I8;
      w->block_rows = 1;
      w->block_cols = 32;
      w->scale_cols = (cols + 31) / 32;
      w->scale_dtype = DType::F8_E8M0;
      fill_e8m0_scales(rng, *w, log2_round(sd) - 1);
      w->data.assign(rows * cols / 2, 0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) {
          const float s = e8m0_value(w->scale[r * w->scale_cols + c / 32]);
          const uint8_t code = float_to_e2m1(std::clamp(nd(rng) / s, -6.0f, 6.0f));
          w->data[r * (cols / 2) + c / 2] |= uint8_t((c & 1) ? code << 4 : code);
        }
      break;
    }
  }
  w->d_data = std::make_unique<Dev<uint8_t>>(w->data);
  if (!w->scale.empty()) w->d_scale = std::make_unique<Dev<uint8_t>>(w->scale);
  return w;
}

}  // namespace deepinfer::testing_cuda
