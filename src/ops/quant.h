// Fake quantization that is part of the V4.1 model (quantization-aware training):
// values are rounded onto a low-precision grid with block scales and kept in fp32.
//   fp8_block: e4m3, block 32, ue8m0 scale 2^ceil(log2(max(amax,1e-4)/448)) (window KV)
//   fp4_block: e2m1, block 16 with e4m3 scales (compressed KV) or block 32 with ue8m0
//              scales (indexer queries and keys).
// A vector whose width is not a multiple of the block is left untouched, exactly as
// the reference does (only tiny test configs hit this).
#pragma once

#include <cstdint>

namespace deepinfer::ops {

enum class Fp4Scale { kUe8m0, kE4m3 };

struct FakeQuantParams {
  float* x = nullptr;  // [n, dim], in place
  int64_t n = 0, dim = 0;
  int64_t block = 32;
};

// One block of the fp8_block rule: len (>= 1) values -> e4m3 codes (round to nearest
// even of clamp(v / s, +-448)); returns the ue8m0 scale s = 2^ceil(log2(max(amax, 1e-4)
// / 448)). fake_quant_fp8 stores code * s back; Activations::kFP8 (ops/linear.h) keeps
// codes and scale apart for its block dot products. NaN in v gives NaN codes.
float quant_fp8_block(const float* v, int64_t len, uint8_t* codes);

namespace cpu {
void fake_quant_fp8(const FakeQuantParams& p);
void fake_quant_fp4(const FakeQuantParams& p, Fp4Scale scale_kind);
}  // namespace cpu

}  // namespace deepinfer::ops
