// A random FP8 weight in the released dense format for the CPU op tests.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "ops/linear.h"

namespace deepinfer::testing {

// The WeightRef of e4m3 codes [rows, cols] with 32 x 32 ue8m0 scale blocks (the released
// dense format), over the caller's buffers.
inline ops::WeightRef fp8_ref(const std::vector<uint8_t>& codes, const std::vector<uint8_t>& scales, int64_t rows,
                              int64_t cols) {
  ops::WeightRef w;
  w.dtype = DType::F8_E4M3;
  w.data = codes.data();
  w.rows = rows;
  w.cols = cols;
  w.scale = scales.data();
  w.scale_cols = (cols + 31) / 32;
  w.block_rows = w.block_cols = 32;
  return w;
}

// Random e4m3 codes [rows, cols] (every byte but the two NaN codes) with 32 x 32 ue8m0 scale
// blocks of 2^-7 .. 2^0. The WeightRef is built on demand from the owned buffers, so it
// stays valid however the struct is moved.
struct Fp8TestWeight {
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> codes, scales;

  Fp8TestWeight(std::mt19937& rng, int64_t r, int64_t c)
      : rows(r), cols(c), codes(size_t(r * c)), scales(size_t(((r + 31) / 32) * ((c + 31) / 32))) {
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto& b : codes) {
      do b = uint8_t(byte(rng));
      while ((b & 0x7f) == 0x7f);  // no NaN codes
    }
    for (auto& b : scales) b = uint8_t(120 + byte(rng) % 8);
  }

  ops::WeightRef ref() const { return fp8_ref(codes, scales, rows, cols); }
};

}  // namespace deepinfer::testing
