// Plain types shared by the kernel launchers and their host-side callers: the weight
// descriptor every matrix kernel reads. No device code, so host compilers can
// include it (and the launcher headers that use it).
#pragma once

#include <cstdint>

namespace deepinfer::kernels {

// Storage of a weight matrix's elements. kE2M1 packs two codes per byte, element
// 2j in the low nibble of byte j of its row.
enum class WFormat : int { kF32, kBF16, kF16, kE4M3, kE2M1 };
enum class SFormat : int { kNone, kE8M0, kF32 };

// A weight matrix W [rows, cols] in device memory with optional block scales:
// element (r, c) is multiplied by scale[(r / block_rows) * scale_cols + c / block_cols].
struct WeightArgs {
  WFormat format = WFormat::kF32;
  const uint8_t* data = nullptr;   // [rows, cols] elements ([rows, cols / 2] bytes for kE2M1)
  int64_t rows = 0, cols = 0;
  SFormat scale_format = SFormat::kNone;
  const uint8_t* scale = nullptr;  // [ceil(rows / block_rows), scale_cols]; null iff kNone
  int64_t scale_cols = 0, block_rows = 1, block_cols = 1;
};

// True when the descriptor is self-consistent (host-side check, no device access).
inline bool weight_args_valid(const WeightArgs& w) {
  if (w.data == nullptr || w.rows <= 0 || w.cols <= 0) return false;
  if (w.format == WFormat::kE2M1 && w.cols % 2 != 0) return false;
  if ((w.scale_format == SFormat::kNone) != (w.scale == nullptr)) return false;
  if (w.scale_format != SFormat::kNone) {
    if (w.block_rows <= 0 || w.block_cols <= 0) return false;
    if (w.scale_cols < (w.cols + w.block_cols - 1) / w.block_cols) return false;
  }
  return true;
}

}  // namespace deepinfer::kernels
