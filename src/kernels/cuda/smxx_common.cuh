// Device helpers shared by the smxx_* kernels (any arch >= sm_80; tuned on sm_90a):
// exact number-format conversions that match src/common/numeric.h bit for bit, warp
// and block reductions, and element access to a weight (smxx_types.h).
//
// Framework-agnostic: no engine headers. Launchers return cudaError_t;
// cudaErrorInvalidValue means the arguments failed validation before any launch.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/smxx_types.h"

namespace deepinfer::kernels {

// ---------------------------------------------------------------------------
// Number formats (the same definitions as src/common/numeric.h).
// ---------------------------------------------------------------------------

__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) { return __uint_as_float(uint32_t(h) << 16); }

// fp32 -> the nearest bf16 (ties to even), as fp32; inf / NaN unchanged (ops::round_to_bf16).
__device__ __forceinline__ float round_bf16(float v) {
  uint32_t b = __float_as_uint(v);
  if ((b & 0x7f800000u) == 0x7f800000u) return v;
  b += 0x7fffu + ((b >> 16) & 1u);
  return __uint_as_float(b & 0xffff0000u);
}

__device__ __forceinline__ float f16_bits_to_float(uint16_t h) {
  __half_raw r;
  r.x = h;
  return __half2float(__half(r));
}

// e4m3fn: normal codes map straight onto fp32 bit fields; subnormals are man * 2^-9.
__device__ __forceinline__ float e4m3_to_float(uint8_t v) {
  const uint32_t exp = (v >> 3) & 0xf, man = v & 7, sign = uint32_t(v & 0x80) << 24;
  if (exp == 0xf && man == 7) return __uint_as_float(0x7fc00000u);
  if (exp == 0) return __uint_as_float(sign | __float_as_uint(float(man) * 0.001953125f));
  return __uint_as_float(sign | ((exp + 120) << 23) | (man << 20));
}

// ue8m0: 2^(e - 127); e = 0 is the fp32 subnormal 2^-127; 0xff is NaN.
__device__ __forceinline__ float e8m0_to_float(uint8_t e) {
  if (e == 0xff) return __uint_as_float(0x7fc00000u);
  if (e == 0) return __uint_as_float(0x00400000u);
  return __uint_as_float(uint32_t(e) << 23);
}

__device__ __forceinline__ float e2m1_to_float(uint32_t code) {
  // Magnitude codes 0..7 = {0, .5, 1, 1.5, 2, 3, 4, 6}: placed into an fp16 exponent
  // and mantissa field they read as value * 2^-14, subnormal 0.5 included.
  __half_raw r;
  r.x = uint16_t(((code & 7u) << 9) | ((code & 8u) << 12));
  return __half2float(__half(r)) * 16384.0f;
}

// Round to nearest even onto the e4m3 grid, saturating at +-448 (numeric.h's
// round_e4m3). Scaling by the binade's power-of-two quantum is exact.
__device__ __forceinline__ float round_e4m3(float f) {
  if (isnan(f)) return f;
  const float a = fabsf(f);
  if (a >= 448.0f) return copysignf(448.0f, f);
  int e = int((__float_as_uint(a) >> 23) & 0xff) - 127;  // floor(log2(a)) for normal a
  if (e < -6) e = -6;                                    // subnormals share the 2^-9 step
  const float step = ldexpf(1.0f, e - 3);
  float q = rintf(a / step) * step;  // rintf: ties to even
  if (q >= 448.0f) q = 448.0f;
  return copysignf(q, f);
}

// e2m1 rounding of a value already clamped to [-6, 6]; ties go to the even code.
__device__ __forceinline__ float round_e2m1(float f) {
  const float a = fabsf(f);
  float q;
  if (a <= 0.25f) q = 0.0f;
  else if (a < 0.75f) q = 0.5f;
  else if (a <= 1.25f) q = 1.0f;
  else if (a < 1.75f) q = 1.5f;
  else if (a <= 2.5f) q = 2.0f;
  else if (a < 3.5f) q = 3.0f;
  else if (a <= 5.0f) q = 4.0f;
  else q = 6.0f;
  return copysignf(q, f);
}

// 2^ceil(log2(t)) for t > 0 from the fp32 bit pattern (numeric.h's pow2_ceil).
__device__ __forceinline__ float pow2_ceil(float t) {
  const uint32_t bits = __float_as_uint(t);
  const int k = int((bits >> 23) & 0xff) - 127 + ((bits & 0x7fffff) != 0 ? 1 : 0);
  return ldexpf(1.0f, k);
}

__device__ __forceinline__ float clamp_like_std(float v, float lo, float hi) {
  return v < lo ? lo : (hi < v ? hi : v);  // std::clamp: NaN passes through
}

// The fp8_block rule (ops/quant.h quant_fp8_block): a block's ue8m0 scale from its
// absolute maximum, and a value's e4m3 rounding under that scale (code value, unscaled).
__device__ __forceinline__ float fp8_block_scale(float amax) {
  return pow2_ceil(fmaxf(amax, 1e-4f) * (1.0f / 448.0f));
}
__device__ __forceinline__ float fp8_block_code(float v, float s) {
  return round_e4m3(clamp_like_std(v / s, -448.0f, 448.0f));
}

// ---------------------------------------------------------------------------
// Weights, element by element (the generic path; fast kernels decode vectors).
// ---------------------------------------------------------------------------

__device__ __forceinline__ float weight_scale(const WeightArgs& w, int64_t r, int64_t c) {
  if (w.scale_format == SFormat::kNone) return 1.0f;
  const int64_t i = (r / w.block_rows) * w.scale_cols + c / w.block_cols;
  if (w.scale_format == SFormat::kE8M0) return e8m0_to_float(w.scale[i]);
  return reinterpret_cast<const float*>(w.scale)[i];
}

__device__ __forceinline__ float weight_raw(const WeightArgs& w, int64_t r, int64_t c) {
  switch (w.format) {
    case WFormat::kF32: return reinterpret_cast<const float*>(w.data)[r * w.cols + c];
    case WFormat::kBF16: return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(w.data)[r * w.cols + c]);
    case WFormat::kF16: return f16_bits_to_float(reinterpret_cast<const uint16_t*>(w.data)[r * w.cols + c]);
    case WFormat::kE4M3: return e4m3_to_float(w.data[r * w.cols + c]);
    case WFormat::kE2M1: {
      const uint8_t b = w.data[r * (w.cols / 2) + c / 2];
      return e2m1_to_float((c & 1) ? (b >> 4) : (b & 0xf));
    }
  }
  return 0.0f;
}

// The dequantized element, rounded exactly as the CPU's dequant_row (raw * scale in fp32).
__device__ __forceinline__ float weight_at(const WeightArgs& w, int64_t r, int64_t c) {
  const float v = weight_raw(w, r, c);
  return w.scale_format == SFormat::kNone ? v : v * weight_scale(w, r, c);
}

// ---------------------------------------------------------------------------
// Reductions.
// ---------------------------------------------------------------------------

// Programmatic dependent launch (PDL). pdl_wait: the kernel's reads of what earlier
// kernels in the stream wrote must come after it (it returns at once when the kernel was
// not launched with cudaLaunchAttributeProgrammaticStreamSerialization). pdl_trigger: a
// kernel launched after this one with that attribute may start once every block of this
// one has passed here (a no-op when none is). Neither changes a value.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ double warp_sum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the whole block (blockDim.x a multiple of 32, at most 1024); every
// thread gets the result. scratch: 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

inline unsigned grid_1d(int64_t work, int threads) { return unsigned((work + threads - 1) / threads); }

}  // namespace deepinfer::kernels
