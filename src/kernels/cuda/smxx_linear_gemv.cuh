// The gemv path of linear (smxx_linear.cuh): kernel template and launcher,
// instantiated once per weight format in smxx_linear_gemv_<format>.cu so the
// variants compile in parallel. Internal to the kernels directory.
#pragma once

#include <cuda_fp8.h>

#include <algorithm>
#include <utility>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_device.h"
#include "kernels/cuda/smxx_linear.cuh"

namespace deepinfer::kernels::gemv {

// ---------------------------------------------------------------------------
// Decoding one 32-bit word of a 16-byte weight vector into fp32.
// ---------------------------------------------------------------------------

template <WFormat F> struct Fmt;
template <> struct Fmt<WFormat::kF32> { static constexpr int kPerWord = 1; static constexpr float kFactor = 1.0f; };
template <> struct Fmt<WFormat::kBF16> { static constexpr int kPerWord = 2; static constexpr float kFactor = 1.0f; };
template <> struct Fmt<WFormat::kF16> { static constexpr int kPerWord = 2; static constexpr float kFactor = 1.0f; };
template <> struct Fmt<WFormat::kE4M3> { static constexpr int kPerWord = 4; static constexpr float kFactor = 1.0f; };
// e2m1 codes decode to their exact values (decode_e2m1 below).
template <> struct Fmt<WFormat::kE2M1> { static constexpr int kPerWord = 8; static constexpr float kFactor = 1.0f; };

// Eight e2m1 codes (nibble i = element i) -> fp32. The bf16 bits of the magnitudes (code
// & 7: 0, .5, 1, 1.5, 2, 3, 4, 6) sit in a low-byte and a high-byte table of two registers
// each; one PRMT looks up four codes, PRMT's sign mode copies each code's sign bit over
// a byte, two more PRMTs interleave low / high bytes into bf16 pairs, and a bf16 is the
// top half of its fp32. ~23 integer ops per 8 codes; the former nibble -> fp16 -> fp32
// path took ~42 plus 8 quarter-rate conversions (bench/flash/NOTES.md §4).
__device__ __forceinline__ uint32_t prmt_b32(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}
__device__ __forceinline__ void decode_e2m1(uint32_t u, float* out) {
  const uint32_t m = u & 0x77777777u, mh = m >> 16, u4 = u << 4;
  const uint32_t l0 = prmt_b32(0xC0800000u, 0xC0804000u, m), l1 = prmt_b32(0xC0800000u, 0xC0804000u, mh);
  const uint32_t h0 = prmt_b32(0x3F3F3F00u, 0x40404040u, m) | (prmt_b32(u, u4, 0x9D8Cu) & 0x80808080u);
  const uint32_t h1 = prmt_b32(0x3F3F3F00u, 0x40404040u, mh) | (prmt_b32(u, u4, 0xBFAEu) & 0x80808080u);
  const uint32_t p[4] = {prmt_b32(l0, h0, 0x5140u), prmt_b32(l0, h0, 0x7362u), prmt_b32(l1, h1, 0x5140u),
                         prmt_b32(l1, h1, 0x7362u)};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(p[i] << 16);
    out[2 * i + 1] = __uint_as_float(p[i] & 0xffff0000u);
  }
}

template <WFormat F>
__device__ __forceinline__ void decode_word(uint32_t u, float* out) {
  if constexpr (F == WFormat::kF32) {
    out[0] = __uint_as_float(u);
  } else if constexpr (F == WFormat::kBF16) {
    out[0] = __uint_as_float(u << 16);
    out[1] = __uint_as_float(u & 0xffff0000u);
  } else if constexpr (F == WFormat::kF16) {
    __half2_raw r;
    r.x = uint16_t(u);
    r.y = uint16_t(u >> 16);
    const float2 f = __half22float2(__half2(r));
    out[0] = f.x;
    out[1] = f.y;
  } else if constexpr (F == WFormat::kE4M3) {
    // cvt.rn.f16x2.e4m3x2: exact, e4m3 is a subset of fp16.
#pragma unroll
    for (int p = 0; p < 2; ++p) {
      const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(u >> (16 * p)), __NV_E4M3);
      const float2 f = __half22float2(__half2(r));
      out[2 * p] = f.x;
      out[2 * p + 1] = f.y;
    }
  } else {
    decode_e2m1(u, out);
  }
}

// Weights are streamed once: keep them out of L1 so x stays resident there.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

template <int N>
__device__ __forceinline__ void load_x(const float* p, float* out) {
  if constexpr (N == 1) {
    out[0] = p[0];
  } else if constexpr (N == 2) {
    const float2 v = *reinterpret_cast<const float2*>(p);
    out[0] = v.x;
    out[1] = v.y;
  } else {
#pragma unroll
    for (int i = 0; i < N; i += 4) {
      const float4 v = *reinterpret_cast<const float4*>(p + i);
      out[i] = v.x;
      out[i + 1] = v.y;
      out[i + 2] = v.z;
      out[i + 3] = v.w;
    }
  }
}

constexpr int kGemvWarps = 8;
constexpr int kGemvRows = 4;  // rows per warp: each x load feeds four weight rows

__host__ __device__ constexpr int bytes_per_element_x2(WFormat f) {
  return f == WFormat::kF32 ? 8 : (f == WFormat::kBF16 || f == WFormat::kF16) ? 4 : f == WFormat::kE4M3 ? 2 : 1;
}

// ---------------------------------------------------------------------------
// The per-row arithmetic both gemv kernels share (so they give the same bits).
//
// A row's sum is fixed by the weight's shape alone: its 16-byte vectors are cut into ks
// slices (gemv_ks), lane l of a slice sums the vectors l, l + 32, ... of it in order
// (each vector's products in element order into a partial, then acc += partial * scale),
// the 32 lanes meet in warp_sum's butterfly, the slices are added in slice order from
// 0.0f. Which warp of which block computes a (row, slice), how many rows a warp carries
// and how the weight bytes reach it do not enter the result.
// ---------------------------------------------------------------------------

// One 16-byte vector of kGemvRows rows (wv, their scales s) times x columns c0.. of
// tokens 0 .. n - 1 into acc.
template <WFormat F, int NT>
__device__ __forceinline__ void gemv_vector(const uint4 (&wv)[kGemvRows], const float (&s)[kGemvRows],
                                            const float* xg, int64_t x_stride, int64_t c0, int n, bool bf16_x,
                                            float (&acc)[kGemvRows][NT]) {
  constexpr int kPerWord = Fmt<F>::kPerWord;
  float part[kGemvRows][NT];
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) part[r][t] = 0.0f;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float wf[kGemvRows][kPerWord];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      const uint32_t word = q == 0 ? wv[r].x : q == 1 ? wv[r].y : q == 2 ? wv[r].z : wv[r].w;
      decode_word<F>(word, wf[r]);
    }
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      if (t >= n) break;
      float xf[kPerWord];
      load_x<kPerWord>(xg + t * x_stride + c0 + q * kPerWord, xf);
      if (bf16_x) {
#pragma unroll
        for (int e = 0; e < kPerWord; ++e) xf[e] = round_bf16(xf[e]);
      }
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
        for (int e = 0; e < kPerWord; ++e) part[r][t] += wf[r][e] * xf[e];
    }
  }
  // One scale per vector: block_cols is a multiple of the vector width.
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] += part[r][t] * s[r];
}

// The scales of vector v of the kGemvRows rows whose scale rows start at srow.
template <WFormat F>
__device__ __forceinline__ void gemv_scales(SFormat sf, const uint8_t* const (&srow)[kGemvRows], int v, int vec_shift,
                                            float (&s)[kGemvRows]) {
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r) {
    float sv = 1.0f;
    if (sf != SFormat::kNone) {
      const int sc = v >> vec_shift;
      sv = sf == SFormat::kE8M0 ? e8m0_to_float(srow[r][sc]) : reinterpret_cast<const float*>(srow[r])[sc];
    }
    s[r] = sv * Fmt<F>::kFactor;
  }
}

// Block: 8 warps = (8 / ks) row groups x ks slices of K. Warp (group g, slice s)
// owns rows 4 * (block * (8 / ks) + g) + {0..3} and the s-th slice of the row's
// 16-byte vectors; the ks partial sums meet in shared memory.
// vec_shift: log2(16-byte vectors per scale block along K), so the scale column of
// vector v is v >> vec_shift (no integer division in the loop; the first version
// divided 64-bit indices per vector and ran at 5-10% of bandwidth).
// This is the former kernel (GemvKind::kStream): each thread streams its four rows'
// vectors straight from global memory, one block per 4 .. 32 rows.
template <WFormat F, int NT>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(LinearArgs a, int ks, int vec_shift) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  constexpr int kPerWord = Fmt<F>::kPerWord, kPerVec = 4 * kPerWord;
  __shared__ float red[kGemvWarps][kGemvRows][NT];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int slice = warp % ks, group = warp / ks, groups = kGemvWarps / ks;
  const int64_t lr0 = (int64_t(blockIdx.x) * groups + group) * kGemvRows;
  const WeightArgs& w = a.w;
  const int64_t row_bytes = w.cols * bytes_per_element_x2(F) / 2;
  const int nvec = int(w.cols / kPerVec);
  const int per = (nvec + ks - 1) / ks;
  const int v_end = min(nvec, (slice + 1) * per);
  const bool scaled = w.scale_format != SFormat::kNone;

  // x of this warp's rows (a warp's 4 rows lie in one input group).
  const int64_t x_stride = a.x_stride > 0 ? a.x_stride : w.cols;
  const float* xg = a.x + (a.x_group_rows > 0 ? (min(lr0, a.num_rows - 1) / a.x_group_rows) * a.x_group_step : 0);
  const uint8_t* wrow[kGemvRows];
  const uint8_t* srow[kGemvRows];  // this row's scale entries (bytes; fp32 scales index x4)
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r) {
    const int64_t row = a.row0 + min(lr0 + r, a.num_rows - 1);  // clamped rows are computed, never stored
    wrow[r] = w.data + row * row_bytes;
    const int64_t so = scaled ? (row / w.block_rows) * w.scale_cols : 0;
    srow[r] = w.scale + so * (w.scale_format == SFormat::kF32 ? 4 : 1);
  }
  float acc[kGemvRows][NT];
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;

  // Under PDL (gemv_set_pdl) this block may run while the kernel before it finishes: the
  // lane's first two weight vectors (constant data) go to L2 meanwhile; x, which that
  // kernel may be writing, is read only after pdl_wait.
#pragma unroll
  for (int k = 0; k < 2; ++k) {
    const int v = slice * per + lane + 32 * k;
    if (v < v_end)
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) asm volatile("prefetch.global.L2 [%0];" ::"l"(wrow[r] + int64_t(v) * 16));
  }
  pdl_wait();

  for (int v = slice * per + lane; v < v_end; v += 32) {
    uint4 wv[kGemvRows];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) wv[r] = load_stream(wrow[r] + int64_t(v) * 16);
    float s[kGemvRows];
    gemv_scales<F>(w.scale_format, srow, v, vec_shift, s);
    gemv_vector<F, NT>(wv, s, xg, x_stride, int64_t(v) * kPerVec, int(a.n), a.bf16_x, acc);
  }
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) {
      const float sum = warp_sum(acc[r][t]);
      if (lane == 0) red[warp][r][t] = sum;
    }
  __syncthreads();
  // Thread i of the block finishes output (group, r, t) = unravel(i) over its ks slices.
  const int i = threadIdx.x;
  if (i >= groups * kGemvRows * NT) return;
  const int g = i / (kGemvRows * NT), r = (i / NT) % kGemvRows, t = i % NT;
  const int64_t lr = (int64_t(blockIdx.x) * groups + g) * kGemvRows + r;
  if (t >= a.n || lr >= a.num_rows) return;
  float sum = 0.0f;
  for (int k = 0; k < ks; ++k) sum += red[g * ks + k][r][t];
  a.y[t * a.num_rows + lr] = sum;
}

// ---------------------------------------------------------------------------
// The one-token FP8 kernel with x staged in shared memory (GemvKind::kXs;
// bench/flash/NOTES.md section 27).
//
// Why: per 16-byte step of its 4 rows (64 weight bytes) a thread of gemv_kernel loads 16
// floats of x with 4 LDG.128 whose addresses are 64 bytes apart across the warp (each
// such load touches 16 L1 lines: ~64 L1 wavefronts of x per 2 KB of weights on top of
// the weights' 16) and, under bf16_x, rounds all 16 again. Here the block copies its x
// row once (rounded once) into shared memory laid out [quad q][vector v] (float4 each),
// so lane l's quad q of vector v sits next to lane l + 1's: one conflict-free LDS.128 per
// quad. The first step's weights are requested before pdl_wait and the copy, so the copy
// hides under that DRAM round trip.
// Scales: one load per step where a warp's four rows share a scale row (always at 128-row
// scale blocks), not four.
// Tried and deleted (session 9; NOTES 27 has the numbers): the next step's weights requested
// before this step's arithmetic (xsp: within +-5%), and an exact integer e4m3 decode with x
// staged times 2^120 (xsi: more instructions than the cvt pipe it spared, slower).
// Bits: the (row, slice, lane, vector) assignment, element order, scale step, warp_sum
// and slice order are gemv_kernel's (n = 1), so each output has its bits
// (tests/ops_cuda/cases_linear_gemv.cpp, family "xs").
// ---------------------------------------------------------------------------

// A template (on the one format it takes) so that, as every kernel in this header, it is
// compiled only in the files that launch it.
template <WFormat F>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_xs_kernel(LinearArgs a, int ks, int vec_shift) {
  static_assert(F == WFormat::kE4M3, "gemv_xs_kernel: e4m3 weights only");
  pdl_trigger();
  extern __shared__ __align__(16) float4 xs[];  // [4][nvec]: quad q of vector v at q * nvec + v
  __shared__ float red[kGemvWarps][kGemvRows];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int slice = warp % ks, group = warp / ks, groups = kGemvWarps / ks;
  const int64_t blk_r0 = int64_t(blockIdx.x) * groups * kGemvRows;
  const int64_t lr0 = blk_r0 + group * kGemvRows;
  const WeightArgs& w = a.w;
  const int64_t row_bytes = w.cols;
  const int nvec = int(w.cols / 16);
  const int per = (nvec + ks - 1) / ks;
  const int v_end = min(nvec, (slice + 1) * per);
  const bool scaled = w.scale_format != SFormat::kNone;
  const uint8_t* wrow[kGemvRows];
  const uint8_t* srow[kGemvRows];
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r) {
    const int64_t row = a.row0 + min(lr0 + r, a.num_rows - 1);  // clamped rows are computed, never stored
    wrow[r] = w.data + row * row_bytes;
    const int64_t so = scaled ? (row / w.block_rows) * w.scale_cols : 0;
    srow[r] = w.scale + so * (w.scale_format == SFormat::kF32 ? 4 : 1);
  }
  const bool one_srow = srow[kGemvRows - 1] == srow[0];  // rows only grow: all four share it
  // The first step's weights (constant data) before pdl_wait and the x copy.
  int v = slice * per + lane;
  uint4 wv[kGemvRows];
  if (v < v_end) {
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) wv[r] = load_stream(wrow[r] + int64_t(v) * 16);
    if (v + 32 < v_end)
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) asm volatile("prefetch.global.L2 [%0];" ::"l"(wrow[r] + int64_t(v + 32) * 16));
  }
  pdl_wait();
  // The block's x (the host checked that the block's rows lie in one input group).
  const float* xb = a.x + (a.x_group_rows > 0 ? (min(blk_r0, a.num_rows - 1) / a.x_group_rows) * a.x_group_step : 0);
  for (int c = threadIdx.x; c < nvec * 4; c += kGemvWarps * 32) {
    float4 t = *reinterpret_cast<const float4*>(xb + int64_t(c) * 4);
    if (a.bf16_x) {
      t.x = round_bf16(t.x);
      t.y = round_bf16(t.y);
      t.z = round_bf16(t.z);
      t.w = round_bf16(t.w);
    }
    xs[(c & 3) * nvec + (c >> 2)] = t;
  }
  __syncthreads();

  float acc[kGemvRows];
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r) acc[r] = 0.0f;
  for (bool first = true; v < v_end; v += 32, first = false) {
    if (!first) {
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) wv[r] = load_stream(wrow[r] + int64_t(v) * 16);
    }
    float s[kGemvRows];
    if (one_srow) {  // the four rows share a scale row: one load, the same value
      const uint8_t* const one[kGemvRows] = {srow[0], srow[0], srow[0], srow[0]};
      float s1[kGemvRows];
      gemv_scales<F>(w.scale_format, one, v, vec_shift, s1);
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) s[r] = s1[0];
    } else {
      gemv_scales<F>(w.scale_format, srow, v, vec_shift, s);
    }
    float part[kGemvRows];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) part[r] = 0.0f;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 x4 = xs[q * nvec + v];
      const float xf[4] = {x4.x, x4.y, x4.z, x4.w};
      float wf[kGemvRows][4];
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) {
        const uint32_t word = q == 0 ? wv[r].x : q == 1 ? wv[r].y : q == 2 ? wv[r].z : wv[r].w;
        decode_word<F>(word, wf[r]);
      }
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
        for (int e = 0; e < 4; ++e) part[r] += wf[r][e] * xf[e];
    }
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) acc[r] += part[r] * s[r];
  }
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r) {
    const float sum = warp_sum(acc[r]);
    if (lane == 0) red[warp][r] = sum;
  }
  __syncthreads();
  const int i = threadIdx.x;
  if (i >= groups * kGemvRows) return;
  const int g = i / kGemvRows, r = i % kGemvRows;
  const int64_t lr = blk_r0 + g * kGemvRows + r;
  if (lr >= a.num_rows) return;
  float sum = 0.0f;
  for (int k = 0; k < ks; ++k) sum += red[g * ks + k][r];
  a.y[lr] = sum;
}

// Whether gemv_xs_kernel takes the call (one token, e4m3): its x row within 48 KB of
// shared memory and each block's rows in one input group.
inline bool xs_fits(const LinearArgs& a, int ks) {
  const int64_t rows_per_block = int64_t(kGemvWarps / ks) * kGemvRows;
  return a.n == 1 && a.w.format == WFormat::kE4M3 && a.w.cols * 4 <= 48 * 1024 && a.w.cols % 16 == 0 &&
         reinterpret_cast<uintptr_t>(a.x) % 16 == 0 &&
         (a.x_group_rows <= 0 || (a.x_group_rows % rows_per_block == 0 && a.x_group_step % 4 == 0));
}

// The K split of a weight (a function of its shape only: rows and columns, never n, so
// a row's sum order is the same at every batch size and in both kernels).
inline int gemv_ks(WFormat f, int64_t rows, int64_t cols) {
  const int per_vec = f == WFormat::kF32 ? 4 : (f == WFormat::kBF16 || f == WFormat::kF16) ? 8
                      : f == WFormat::kE4M3 ? 16 : 32;
  const int64_t nvec = cols / per_vec;
  // Split K across warps until each warp has about two vectors per lane: short
  // rows then still put enough loads in flight per block.
  int ks = 1;
  while (ks < kGemvWarps && nvec / (2 * ks) >= 64) ks *= 2;
  // FP8 weights with few rows (V4.1: wq_a 1280 x 5120, wkv 512 x 5120, indexer wq_b
  // 4096 x 1280): fewer than ~2 blocks per SM left most SMs idle or one wave ragged
  // (wq_a: 160 blocks, ~7 us for 6.5 MB). Split K further, down to one 16-byte vector
  // per lane, until ~256 blocks. The split follows the weight's shape only (rows and
  // columns), never n: a row's sum order is the same at every batch size.
  if (f == WFormat::kE4M3) {
    auto blocks_at = [&](int k) {
      return (rows + int64_t(kGemvWarps / k) * kGemvRows - 1) / (int64_t(kGemvWarps / k) * kGemvRows);
    };
    while (ks < kGemvWarps && blocks_at(ks) < 256 && nvec / (2 * ks) >= 32) ks *= 2;
  }
  return ks;
}

inline int gemv_vec_shift(const WeightArgs& w) {
  const int per_vec = w.format == WFormat::kF32 ? 4 : (w.format == WFormat::kBF16 || w.format == WFormat::kF16) ? 8
                      : w.format == WFormat::kE4M3 ? 16 : 32;
  int vec_shift = 0;
  if (w.scale_format != SFormat::kNone)
    while ((int64_t(per_vec) << vec_shift) < w.block_cols) ++vec_shift;
  return vec_shift;
}

// A gemv launch, with the programmatic-serialization attribute when gemv_pdl() is on (the
// kernels call pdl_wait before reading x): the blocks may then start, and fetch their
// first weights, while the kernel before them drains.
template <class... KArgs, class... Args>
cudaError_t launch_pdl(void (*kernel)(KArgs...), dim3 grid, size_t smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kGemvWarps * 32);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute at[1];
  if (gemv_pdl()) {
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

template <WFormat F, int NT>
cudaError_t launch_gemv(const LinearArgs& a, cudaStream_t stream) {
  constexpr int kPerVec = 4 * Fmt<F>::kPerWord;
  const int64_t nvec = a.w.cols / kPerVec;
  // ks from the weight's full shape (a.num_rows: a slice keeps its own count, as before).
  const int ks = gemv_ks(F, a.num_rows, a.w.cols);
  const int vec_shift = gemv_vec_shift(a.w);
  const int64_t rows_per_block = int64_t(kGemvWarps / ks) * kGemvRows;
  const int64_t blocks = (a.num_rows + rows_per_block - 1) / rows_per_block;
  if (blocks > INT32_MAX || nvec > INT32_MAX) return cudaErrorInvalidValue;
  return launch_pdl(gemv_kernel<F, NT>, dim3(unsigned(blocks)), 0, stream, a, ks, vec_shift);
}

// gemv_xs_kernel (one e4m3 call at one token; the caller checked xs_fits).
template <WFormat F = WFormat::kE4M3>
cudaError_t launch_xs(const LinearArgs& a, cudaStream_t stream) {
  const int ks = gemv_ks(WFormat::kE4M3, a.num_rows, a.w.cols);
  const int vec_shift = gemv_vec_shift(a.w);
  const int64_t rows_per_block = int64_t(kGemvWarps / ks) * kGemvRows;
  const int64_t blocks = (a.num_rows + rows_per_block - 1) / rows_per_block;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  return launch_pdl(gemv_xs_kernel<F>, dim3(unsigned(blocks)), size_t(a.w.cols) * 4, stream, a, ks, vec_shift);
}

// ---------------------------------------------------------------------------
// The bulk-copy kernel (GemvKind::kBulk; bench/flash/NOTES.md section 12).
//
// Why: the former kernel gives each block 4 .. 32 rows and each thread two or three
// 16-byte loads per row, then it exits: at V4.1's shapes a block lives for about two
// DRAM round trips, the grid is 1.2 .. 5 waves of such blocks (wo_b 1280 blocks, wq_b
// 1024), and every wave ramps up and drains. Measured 1.4 .. 2.5 TB/s on the 33 .. 42 MB
// weights and 0.4 .. 1 TB/s on the 2.6 .. 12 MB ones (ncu, run 15).
// Here the unit of work is a tile: the rows one 8-warp block of the former kernel
// covered ((8 / ks) x 4 rows, all columns), which are contiguous in memory. One thread
// per block copies whole tiles into a ring of shared-memory stages with
// cp.async.bulk (the TMA engine; one instruction per tile, completion counted in bytes
// on an mbarrier), `stages` tiles ahead; the grid is at most the resident blocks (one
// wave), each looping over its tiles. The 8 warps then read their rows' vectors from
// shared memory instead of global memory; the arithmetic is gemv_vector's, with the
// same ks, the same (row, slice, lane) assignment, the same warp_sum and slice order:
// bitwise the former kernel's outputs (tests/ops_cuda/cases_linear_gemv.cpp).
//
// Measured (H200, bench/results/2026-11-30-b1-linears.md): the prediction (80-90% of
// bandwidth) failed. At n = 1 the bulk kernel runs the 33-42 MB weights at 1.5-1.6 TB/s,
// 0.78-0.81x of the former kernel (2.0 TB/s), and the small ones no faster: the former
// kernel is not bound by bytes in flight but by a fixed ~5-8 us per launch (time = fixed +
// bytes / 3.3 TB/s fits its 2.6-157 MB points), and the TMA ring delivered only ~15-20 GB/s
// per SM (310 KB per SM in 25 us on wo_b, with 2 x 3 stages of 32 KB requested), half of
// the ~32 GB/s per SM that 4.27 TB/s needs. Where it wins: n = 8 (1.2-1.34x on the big
// weights: 16 warps per SM for the 8 FMAs per weight instead of the former kernel's 8 at
// 196 registers) and several weights per launch (one launch's fixed cost saved). So
// GemvKind::kAuto (launch_n below) takes it only there.
//
// Several weights (jobs) may share one launch when they have the same format and token
// count (V4.1: wq_a and wkv on the same x, the shared expert's w1 and w3, the
// compressor's wkv and wgate): their tiles are numbered one after the other; each job
// keeps its own ks, scales, x and y, so each output is what its own launch gives.
// ---------------------------------------------------------------------------

constexpr int kBulkMaxJobs = 4;
constexpr int kBulkMaxStages = 8;
constexpr int64_t kBulkMaxStage = 64 * 1024;  // the largest tile staged (bytes)

struct GemvJob {
  const float* x = nullptr;
  float* y = nullptr;
  const uint8_t* data = nullptr;  // row 0 of the job's slice (w.data + row0 * row_bytes)
  const uint8_t* scale = nullptr;
  int64_t x_stride = 0, x_group_rows = 0, x_group_step = 0;
  int64_t row0 = 0;  // the slice's first weight row (scale rows are indexed by row0 + row)
  int64_t num_rows = 0, row_bytes = 0, nvec = 0, scale_cols = 0, block_rows = 1;
  SFormat scale_format = SFormat::kNone;
  int ks = 1, vec_shift = 0, tile_rows = 0, tile0 = 0;  // tile0: the job's first tile in the launch
};

struct GemvBulkArgs {
  GemvJob job[kBulkMaxJobs];
  int jobs = 0, tiles = 0, stages = 1, stage_bytes = 0, n = 0;
  bool bf16_x = false;
};

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)), "r"(count) : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint64_t* bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(ok)
      : "r"(smem_u32(bar)), "r"(parity)
      : "memory");
  return ok != 0;
}

// Tile i of this block into ring stage i % stages (thread 0 only).
__device__ __forceinline__ void bulk_issue(const GemvBulkArgs& a, uint8_t* ring, uint64_t* full, int i) {
  const int tile = int(blockIdx.x) + i * int(gridDim.x);
  int j = 0;
  while (j + 1 < a.jobs && tile >= a.job[j + 1].tile0) ++j;
  const GemvJob& jb = a.job[j];
  const int64_t lt0 = int64_t(tile - jb.tile0) * jb.tile_rows;
  const uint32_t bytes = uint32_t(min(int64_t(jb.tile_rows), jb.num_rows - lt0) * jb.row_bytes);
  const int stage = i % a.stages;
  uint64_t* bar = full + stage;
  const uint8_t* src = jb.data + lt0 * jb.row_bytes;
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_u32(ring + int64_t(stage) * a.stage_bytes)),
      "l"(src), "r"(bytes), "r"(smem_u32(bar))
      : "memory");
}

template <WFormat F, int NT>
__global__ void __launch_bounds__(kGemvWarps * 32, 2) gemv_bulk_kernel(const __grid_constant__ GemvBulkArgs a) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  constexpr int kPerWord = Fmt<F>::kPerWord, kPerVec = 4 * kPerWord;
  extern __shared__ __align__(128) uint8_t ring[];  // [stages][stage_bytes]
  __shared__ __align__(8) uint64_t full[kBulkMaxStages];
  __shared__ float red[2][kGemvWarps][kGemvRows][NT];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int S = a.stages;
  // The host launches at most a.tiles blocks, so every block has >= 1 tile.
  const int my_tiles = (a.tiles - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x);
  if (threadIdx.x == 0) {
    for (int s = 0; s < S; ++s) mbar_init(full + s, 1);
    // The barriers' initialization visible to the async proxy (the bulk copies).
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    for (int i = 0; i < min(S, my_tiles); ++i) bulk_issue(a, ring, full, i);
  }
  __syncthreads();
  pdl_wait();  // the copies above read weights only; x (gemv_vector) comes after
  for (int i = 0; i < my_tiles; ++i) {
    const int tile = int(blockIdx.x) + i * int(gridDim.x);
    int j = 0;
    while (j + 1 < a.jobs && tile >= a.job[j + 1].tile0) ++j;
    const GemvJob& jb = a.job[j];
    const int ks = jb.ks, slice = warp % ks, group = warp / ks, groups = kGemvWarps / ks;
    const int64_t lt0 = int64_t(tile - jb.tile0) * jb.tile_rows;  // the tile's first row (of the slice)
    const int64_t lr0 = lt0 + group * kGemvRows;                    // this warp's first row
    const int nvec = int(jb.nvec);
    const int per = (nvec + ks - 1) / ks;
    const int v_end = min(nvec, (slice + 1) * per);
    const bool scaled = jb.scale_format != SFormat::kNone;
    const int64_t x_stride = jb.x_stride;
    const float* xg =
        jb.x + (jb.x_group_rows > 0 ? (min(lr0, jb.num_rows - 1) / jb.x_group_rows) * jb.x_group_step : 0);
    const uint8_t* srow[kGemvRows];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      const int64_t row = jb.row0 + min(lr0 + r, jb.num_rows - 1);
      const int64_t so = scaled ? (row / jb.block_rows) * jb.scale_cols : 0;
      srow[r] = jb.scale + so * (jb.scale_format == SFormat::kF32 ? 4 : 1);
    }
    float acc[kGemvRows][NT];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
    // The copy stops at the slice's last row: rows past it hold stale bytes (a warp whose
    // first row is past it skips the loop; the others' extra rows are never stored).
    const bool live = lr0 < jb.num_rows;
    const uint8_t* st = ring + int64_t(i % S) * a.stage_bytes + int64_t(group) * kGemvRows * jb.row_bytes;
    while (!mbar_try_wait(full + i % S, uint32_t(i / S) & 1u)) {
    }
    for (int v = slice * per + lane; live && v < v_end; v += 32) {
      uint4 wv[kGemvRows];
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r)
        wv[r] = *reinterpret_cast<const uint4*>(st + int64_t(r) * jb.row_bytes + int64_t(v) * 16);
      float s[kGemvRows];
      gemv_scales<F>(jb.scale_format, srow, v, jb.vec_shift, s);
      gemv_vector<F, NT>(wv, s, xg, x_stride, int64_t(v) * kPerVec, a.n, a.bf16_x, acc);
    }
    float (&rb)[kGemvWarps][kGemvRows][NT] = red[i & 1];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
      for (int t = 0; t < NT; ++t) {
        const float sum = warp_sum(acc[r][t]);
        if (lane == 0) rb[warp][r][t] = sum;
      }
    // Every warp is done with stage i % S (and red[i & 1] is written): refill the stage.
    // red alternates, so the next tile's writes never meet this tile's reads below.
    __syncthreads();
    if (threadIdx.x == 0 && i + S < my_tiles) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // generic reads before the async writes
      bulk_issue(a, ring, full, i + S);
    }
    const int e = threadIdx.x;
    if (e < groups * kGemvRows * NT) {
      const int g = e / (kGemvRows * NT), r = (e / NT) % kGemvRows, t = e % NT;
      const int64_t lr = lt0 + g * kGemvRows + r;
      if (t < a.n && lr < jb.num_rows) {
        float sum = 0.0f;
        for (int k = 0; k < ks; ++k) sum += rb[g * ks + k][r][t];
        jb.y[t * jb.num_rows + lr] = sum;
      }
    }
  }
}

// Host side of the bulk kernel: tiles, ring and grid for a list of jobs (all of format F,
// n <= NT tokens). The caller has checked each job with bulk_job (below).
int bulk_blocks_per_sm(const void* kernel, int dyn_smem_bytes);  // smxx_linear.cu (cached)

inline GemvJob bulk_job(const LinearArgs& a) {
  GemvJob j;
  const WeightArgs& w = a.w;
  const int64_t row_bytes = w.cols * bytes_per_element_x2(w.format) / 2;
  j.x = a.x;
  j.y = a.y;
  j.data = w.data + a.row0 * row_bytes;
  j.scale = w.scale;
  j.x_stride = a.x_stride > 0 ? a.x_stride : w.cols;
  j.x_group_rows = a.x_group_rows;
  j.x_group_step = a.x_group_step;
  j.row0 = a.row0;
  j.num_rows = a.num_rows;
  j.row_bytes = row_bytes;
  j.nvec = w.cols / (4 * (w.format == WFormat::kF32 ? 1 : (w.format == WFormat::kBF16 || w.format == WFormat::kF16) ? 2
                                                      : w.format == WFormat::kE4M3 ? 4 : 8));
  j.scale_cols = w.scale_cols;
  j.block_rows = w.block_rows;
  j.scale_format = w.scale_format;
  j.ks = gemv_ks(w.format, a.num_rows, w.cols);
  j.vec_shift = gemv_vec_shift(w);
  j.tile_rows = (kGemvWarps / j.ks) * kGemvRows;
  return j;
}

// Whether a (gemv-eligible) call fits the bulk kernel: its tile within kBulkMaxStage and
// the tile count within int.
// A stage holds a job's largest tile, at least up to the end of its last 4-row group (a
// warp reads its four rows whole; rows past num_rows are computed and never stored).
inline int64_t bulk_stage_bytes(const GemvJob& j) {
  return std::min<int64_t>(j.tile_rows, (j.num_rows + kGemvRows - 1) / kGemvRows * kGemvRows) * j.row_bytes;
}

inline bool bulk_fits(const LinearArgs& a) {
  const GemvJob j = bulk_job(a);
  const int64_t tile_bytes = bulk_stage_bytes(j);
  return tile_bytes <= kBulkMaxStage && (a.num_rows + j.tile_rows - 1) / j.tile_rows < (int64_t(1) << 30) &&
         j.nvec < (int64_t(1) << 30);
}

template <WFormat F, int NT>
cudaError_t launch_bulk(const LinearArgs* calls, int count, cudaStream_t stream) {
  GemvBulkArgs g;
  g.jobs = count;
  g.n = int(calls[0].n);
  g.bf16_x = calls[0].bf16_x;
  int64_t tiles = 0, stage = 0;
  for (int k = 0; k < count; ++k) {
    GemvJob j = bulk_job(calls[k]);
    j.tile0 = int(tiles);
    tiles += (j.num_rows + j.tile_rows - 1) / j.tile_rows;
    stage = std::max(stage, bulk_stage_bytes(j));
    g.job[k] = j;
  }
  if (tiles >= (int64_t(1) << 30) || stage > kBulkMaxStage) return cudaErrorInvalidValue;
  g.tiles = int(tiles);
  g.stage_bytes = int((stage + 127) / 128 * 128);
  const void* kernel = reinterpret_cast<const void*>(gemv_bulk_kernel<F, NT>);
  static const cudaError_t attr = cudaFuncSetAttribute(gemv_bulk_kernel<F, NT>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       int(kBulkMaxStages * kBulkMaxStage) > 200 * 1024
                                                           ? 200 * 1024
                                                           : int(kBulkMaxStages * kBulkMaxStage));
  if (attr != cudaSuccess) return attr;
  const int sms = device_sm_count();
  // One stage per block when every tile fits in one wave of resident blocks (each block
  // then copies its tile and computes it: all of the weight in flight at once); else a
  // ring of up to ~96 KB per block (two blocks per SM: far more bytes in flight than the
  // ~32 KB per SM that 4.27 TB/s needs at ~1 us latency) and a grid of one wave.
  int stages = 1;
  // A concurrent branch may hold the launch to fewer blocks per SM (gemv_set_bulk_blocks_per_sm).
  const int sm_cap = gemv_bulk_blocks_per_sm();
  auto capped = [&](int fit) { return sm_cap > 0 ? std::min(fit, sm_cap) : fit; };
  int per_sm = capped(bulk_blocks_per_sm(kernel, g.stage_bytes));
  if (per_sm <= 0) return cudaErrorInvalidConfiguration;
  const int cap = gemv_bulk_grid_cap();  // tests: a small grid makes every ring wrap
  if (tiles > int64_t(per_sm) * sms || (cap > 0 && tiles > cap)) {
    stages = int(std::clamp<int64_t>((96 * 1024) / g.stage_bytes, 2, kBulkMaxStages));
    while (stages > 1 && int64_t(stages) * g.stage_bytes > 200 * 1024) --stages;
    per_sm = capped(bulk_blocks_per_sm(kernel, stages * g.stage_bytes));
    if (per_sm <= 0) return cudaErrorInvalidConfiguration;
  }
  g.stages = stages;
  int64_t grid = std::min<int64_t>(tiles, int64_t(per_sm) * sms);
  if (cap > 0) grid = std::min<int64_t>(grid, cap);
  return launch_pdl(gemv_bulk_kernel<F, NT>, dim3(unsigned(grid)), size_t(stages) * g.stage_bytes, stream, g);
}

// ---------------------------------------------------------------------------
// The persistent streaming kernel (GemvKind::kPersist; bench/flash/NOTES.md section 19).
//
// Why: at n = 1 the former kernel's time fits ~6 us + bytes / 3.2 TB/s (NOTES 12). Its
// threads issue one 16-byte load per row (4 rows), wait a DRAM round trip, compute, and
// only then issue the next: each warp has one step of loads in flight and a bubble of a
// full round trip per step, the blocks live for 2-3 such steps and the grid ramps up
// and drains once per wave. The TMA ring (above) kept bytes in flight but through too
// few, too large copies per SM. Here: one wave of blocks (SMs x resident blocks), each
// owning a contiguous range of the tiles the former kernel's blocks covered, and each
// thread keeps the loads of its next steps (a step: one 16-byte vector of each of its
// four rows) in flight while it computes the current one, across tile boundaries (a
// ring in registers, or in shared memory filled by cp.async: see the kernel), so no
// warp waits on a cold round trip after its first, and the first steps' weights are
// requested before griddepcontrol.wait (they do not depend on the kernel before).
//
// Bits: the tile, warp (group, slice), lane and vector assignment is the former
// kernel's; gemv_vector / gemv_scales do the arithmetic; a slice's 32 lanes meet in
// warp_sum and the slices are added in slice order from 0.0f (ks = 1: 0.0f + the
// warp's sum, in the warp itself, no shared memory or barrier). So each output has the
// former kernel's bits (tests/ops_cuda/cases_linear_gemv.cpp, family "former").
// Several weights (jobs) share one launch as in the bulk kernel; a block's range may
// cross from one job to the next (each tile uses its own job's ks, scales, x and y).
//
// Measured (H200, bench/results/2026-11-30-gemv1.md): the prediction (3.4 TB/s on the
// 42 MB weights) failed. At n = 1 no ring beat the former kernel (wq_b 21.6 us former,
// 23.5 register ring, 24.9 / 26.6 shared ring depth 4 / 6), and more bytes in flight
// was slower, not faster: the per-launch ramps and bytes in flight are not what bounds
// the former kernel (its time also grows ~40% from n = 1 to 2 at the same bytes: the
// per-byte work on the SM is a large part). Kept for several FP8 weights at 3-4 tokens
// (0.86x the bulk kernel's time there: GemvKind::kAuto) and as kPersist for A/B.
// ---------------------------------------------------------------------------

// One warp's position in its block's range: the tile, the step j of the tile's
// ceil(per / 32) steps (uniform over the block: every warp of a tile has the same job,
// hence the same count, so the barriers of ks > 1 are reached by all), and this lane's
// vector and row pointers at that step.
struct PersistPos {
  int tile = 0, j = 0, steps = 0, job = 0, v = 0, v_end = 0;
  int64_t lr0 = 0;     // the warp's first row in its job's slice
  bool live = false;   // lr0 < num_rows (a warp past the last row group computes nothing)
  const uint8_t* w = nullptr;  // row 0's 16-byte vector v; row r's at w + off[r - 1]
  int off[kGemvRows - 1] = {};  // rows past num_rows read the last row (never stored)
};

__device__ __forceinline__ void persist_setup(const GemvBulkArgs& a, int tile, int warp, int lane, PersistPos& p) {
  int j = 0;
  while (j + 1 < a.jobs && tile >= a.job[j + 1].tile0) ++j;
  const GemvJob& jb = a.job[j];
  const int ks = jb.ks, slice = warp % ks, group = warp / ks;
  const int nvec = int(jb.nvec), per = (nvec + ks - 1) / ks;
  p.tile = tile;
  p.job = j;
  p.j = 0;
  p.steps = (per + 31) / 32;
  p.v = slice * per + lane;
  p.v_end = min(nvec, (slice + 1) * per);
  p.lr0 = int64_t(tile - jb.tile0) * jb.tile_rows + group * kGemvRows;
  p.live = p.lr0 < jb.num_rows;
  const int64_t r0 = min(p.lr0, jb.num_rows - 1);
  p.w = jb.data + r0 * jb.row_bytes + int64_t(p.v) * 16;
#pragma unroll
  for (int r = 1; r < kGemvRows; ++r) p.off[r - 1] = int((min(p.lr0 + r, jb.num_rows - 1) - r0) * jb.row_bytes);
}

// The next step (t_end: the block's range end; past it the position stays off).
__device__ __forceinline__ void persist_next(const GemvBulkArgs& a, int t_end, int warp, int lane, PersistPos& p) {
  ++p.j;
  p.v += 32;
  p.w += 32 * 16;
  if (p.j == p.steps) {
    ++p.tile;
    if (p.tile < t_end) persist_setup(a, p.tile, warp, lane, p);
  }
}

__device__ __forceinline__ void persist_load(const PersistPos& p, uint4 (&wv)[kGemvRows]) {
  wv[0] = load_stream(p.w);
#pragma unroll
  for (int r = 1; r < kGemvRows; ++r) wv[r] = load_stream(p.w + p.off[r - 1]);
}

__device__ __forceinline__ bool persist_on(const PersistPos& p, int t_end) {
  return p.tile < t_end && p.live && p.v < p.v_end;
}

__device__ __forceinline__ void cp_async16(uint4* dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// The ring of a thread's steps in flight. kSmem false: D steps of kGemvRows 16-byte
// vectors in registers (the loads issued D steps ahead; 2 x 16 + 16 registers of weights
// at D = 2). kSmem true: D slots in shared memory, filled with cp.async (16 bytes per row,
// L1 bypassed), D - 1 steps ahead; each thread reads back only what it copied itself, so
// its own wait_group is the only synchronization, and the bytes in flight cost no
// registers (D = 4 at 3 blocks per SM: ~144 KB per SM in flight, ~4.5x what 4.27 TB/s
// needs at ~1 us; the register ring reaches ~64 KB).
template <WFormat F, int NT, int D, bool kSmem>
__global__ void __launch_bounds__(kGemvWarps * 32, kSmem && NT == 1 && D <= 4 ? 3 : 2)
    gemv_persist_kernel(const __grid_constant__ GemvBulkArgs a) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  constexpr int kPerWord = Fmt<F>::kPerWord, kPerVec = 4 * kPerWord;
  constexpr int kThreads = kGemvWarps * 32;
  __shared__ float red[2][kGemvWarps][kGemvRows][NT];
  extern __shared__ __align__(128) uint8_t pring[];  // kSmem: uint4 [D][kGemvRows][kThreads]
  uint4* const ring = reinterpret_cast<uint4*>(pring);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  // This block's tiles: a contiguous share of the launch's (the host launches at most
  // a.tiles blocks, so every block has one or more).
  const int t_begin = int(int64_t(a.tiles) * blockIdx.x / gridDim.x);
  const int t_end = int(int64_t(a.tiles) * (blockIdx.x + 1) / gridDim.x);

  // The loads run ahead of the arithmetic (ld: the loading position, c: the computing
  // one). The first steps read weights only: issued before pdl_wait.
  PersistPos ld, c;
  persist_setup(a, t_begin, warp, lane, ld);
  constexpr int kAhead = kSmem ? D - 1 : D;
  uint4 buf[kSmem ? 1 : D][kGemvRows];
  auto slot = [&](int k, int r) -> uint4* { return ring + (k * kGemvRows + r) * kThreads + threadIdx.x; };
  auto issue = [&](int k) {  // the step at ld into ring slot / register buffer k
    if constexpr (kSmem) {
      if (persist_on(ld, t_end)) {
        cp_async16(slot(k, 0), ld.w);
#pragma unroll
        for (int r = 1; r < kGemvRows; ++r) cp_async16(slot(k, r), ld.w + ld.off[r - 1]);
      }
      cp_async_commit();  // one group per step, empty or not: wait_group counts steps
    } else {
      if (persist_on(ld, t_end)) persist_load(ld, buf[k]);
    }
    persist_next(a, t_end, warp, lane, ld);
  };
#pragma unroll
  for (int d = 0; d < kAhead; ++d) issue(d);
  pdl_wait();  // x (gemv_vector) and y come after

  persist_setup(a, t_begin, warp, lane, c);
  float acc[kGemvRows][NT];
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
    for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
  int parity = 0;
  // The current tile's scale rows (row r's at sbase + sdelta[r - 1], bytes) and x.
  const uint8_t* sbase = nullptr;
  int sdelta[kGemvRows - 1] = {};
  const float* xg = nullptr;
  int ks_slot = 0;  // kSmem: the slot of step c (the slot of step c + D - 1 is the one before it)
  while (c.tile < t_end) {
#pragma unroll
    for (int d = 0; d < (kSmem ? 1 : D); ++d) {
      if (c.tile < t_end) {  // uniform over the block
        uint4 wv[kGemvRows];
        if constexpr (kSmem) {
          issue(ks_slot == 0 ? D - 1 : ks_slot - 1);  // the slot step c - 1 used (read already)
          cp_async_wait<D - 1>();                      // step c's group has landed
#pragma unroll
          for (int r = 0; r < kGemvRows; ++r) wv[r] = *slot(ks_slot, r);
          ks_slot = ks_slot + 1 == D ? 0 : ks_slot + 1;
        } else {
#pragma unroll
          for (int r = 0; r < kGemvRows; ++r) wv[r] = buf[d][r];
          issue(d);
        }

        const GemvJob& jb = a.job[c.job];
        if (c.j == 0) {  // a new tile: its scale rows and x (once per tile, not per step)
          const bool scaled = jb.scale_format != SFormat::kNone;
          const int esz = jb.scale_format == SFormat::kF32 ? 4 : 1;
          int64_t so[kGemvRows];
#pragma unroll
          for (int r = 0; r < kGemvRows; ++r) {
            const int64_t row = jb.row0 + min(c.lr0 + r, jb.num_rows - 1);
            so[r] = scaled ? (row / jb.block_rows) * jb.scale_cols * esz : 0;
          }
          sbase = jb.scale + so[0];
#pragma unroll
          for (int r = 1; r < kGemvRows; ++r) sdelta[r - 1] = int(so[r] - so[0]);
          xg = jb.x + (jb.x_group_rows > 0 ? (min(c.lr0, jb.num_rows - 1) / jb.x_group_rows) * jb.x_group_step : 0);
        }
        if (c.live && c.v < c.v_end) {
          float s[kGemvRows];
          if (sdelta[kGemvRows - 2] == 0) {
            // The four rows share a scale row (rows only grow): one load, the same value.
            const uint8_t* const one[kGemvRows] = {sbase, sbase, sbase, sbase};
            float s1[kGemvRows];
            gemv_scales<F>(jb.scale_format, one, c.v, jb.vec_shift, s1);
#pragma unroll
            for (int r = 0; r < kGemvRows; ++r) s[r] = s1[0];
          } else {
            const uint8_t* const rows[kGemvRows] = {sbase, sbase + sdelta[0], sbase + sdelta[1], sbase + sdelta[2]};
            gemv_scales<F>(jb.scale_format, rows, c.v, jb.vec_shift, s);
          }
          gemv_vector<F, NT>(wv, s, xg, jb.x_stride, int64_t(c.v) * kPerVec, a.n, a.bf16_x, acc);
        }
        if (c.j + 1 == c.steps) {  // the tile's last step: its outputs
          const int ks = jb.ks;
          if (ks == 1) {
            // The warp holds its rows' whole sums: 0.0f + sum, as the former kernel's
            // slice loop gives for one slice. Lane r * NT + t stores (r, t).
#pragma unroll
            for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
              for (int t = 0; t < NT; ++t) {
                const float sum = 0.0f + warp_sum(acc[r][t]);
                if (lane == r * NT + t && t < a.n && c.live && c.lr0 + r < jb.num_rows)
                  jb.y[t * jb.num_rows + c.lr0 + r] = sum;
              }
          } else {
            float (&rb)[kGemvWarps][kGemvRows][NT] = red[parity];
#pragma unroll
            for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
              for (int t = 0; t < NT; ++t) {
                const float sum = warp_sum(acc[r][t]);
                if (lane == 0) rb[warp][r][t] = sum;
              }
            // red alternates: the next tile's writes never meet this tile's reads
            // (every thread passes the next tile's barrier after its reads here).
            __syncthreads();
            const int groups = kGemvWarps / ks, e = threadIdx.x;
            if (e < groups * kGemvRows * NT) {
              const int g = e / (kGemvRows * NT), r = (e / NT) % kGemvRows, t = e % NT;
              const int64_t lr = int64_t(c.tile - jb.tile0) * jb.tile_rows + g * kGemvRows + r;
              if (t < a.n && lr < jb.num_rows) {
                float sum = 0.0f;
                for (int k = 0; k < ks; ++k) sum += rb[g * ks + k][r][t];
                jb.y[t * jb.num_rows + lr] = sum;
              }
            }
            parity ^= 1;
          }
#pragma unroll
          for (int r = 0; r < kGemvRows; ++r)
#pragma unroll
            for (int t = 0; t < NT; ++t) acc[r][t] = 0.0f;
        }
        persist_next(a, t_end, warp, lane, c);
      }
    }
  }
}

// Host side: the launch's jobs and tiles as for the bulk kernel (no stage limit: nothing
// is staged), a grid of one wave (resident blocks x SMs, at most gemv_persist_blocks()
// per SM when set, at most the bulk grid cap when set), D = gemv_persist_depth().
template <WFormat F, int NT, int D, bool kSmem>
cudaError_t launch_persist_d(const LinearArgs* calls, int count, cudaStream_t stream) {
  GemvBulkArgs g;
  g.jobs = count;
  g.n = int(calls[0].n);
  g.bf16_x = calls[0].bf16_x;
  int64_t tiles = 0;
  for (int k = 0; k < count; ++k) {
    GemvJob j = bulk_job(calls[k]);
    j.tile0 = int(tiles);
    tiles += (j.num_rows + j.tile_rows - 1) / j.tile_rows;
    g.job[k] = j;
  }
  g.tiles = int(tiles);
  const int smem = kSmem ? D * kGemvRows * kGemvWarps * 32 * 16 : 0;
  if (kSmem) {
    static const cudaError_t attr =
        cudaFuncSetAttribute(gemv_persist_kernel<F, NT, D, kSmem>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (attr != cudaSuccess) return attr;
  }
  const void* kernel = reinterpret_cast<const void*>(gemv_persist_kernel<F, NT, D, kSmem>);
  int per_sm = bulk_blocks_per_sm(kernel, smem);
  if (per_sm <= 0) return cudaErrorInvalidConfiguration;
  if (gemv_persist_blocks() > 0) per_sm = std::min(per_sm, gemv_persist_blocks());
  if (gemv_bulk_blocks_per_sm() > 0) per_sm = std::min(per_sm, gemv_bulk_blocks_per_sm());  // a branch's cap
  int64_t grid = std::min<int64_t>(tiles, int64_t(per_sm) * device_sm_count());
  const int cap = gemv_bulk_grid_cap();  // tests: a small grid gives each block many tiles
  if (cap > 0) grid = std::min<int64_t>(grid, cap);
  return launch_pdl(gemv_persist_kernel<F, NT, D, kSmem>, dim3(unsigned(grid)), size_t(smem), stream, g);
}

// Whether the persistent kernel takes these calls: its 32-bit row offsets within a warp's
// four rows, and tile and vector counts within int.
inline bool persist_fits(const LinearArgs* calls, int count) {
  int64_t tiles = 0;
  for (int k = 0; k < count; ++k) {
    const GemvJob j = bulk_job(calls[k]);
    if (j.row_bytes * kGemvRows >= (int64_t(1) << 31) || j.nvec >= (int64_t(1) << 30)) return false;
    tiles += (j.num_rows + j.tile_rows - 1) / j.tile_rows;
  }
  return tiles < (int64_t(1) << 30);
}

// gemv_persist_depth(): 2 the register ring (D = 2); 4 (the default) and 6 the shared-
// memory ring (D = 4 at up to 3 blocks per SM at one token, 2 at more; D = 6 at 2, one
// token only).
template <WFormat F, int NT>
cudaError_t launch_persist(const LinearArgs* calls, int count, cudaStream_t stream) {
  const int depth = gemv_persist_depth();
  if constexpr (NT == 1) {
    if (depth >= 6) return launch_persist_d<F, NT, 6, true>(calls, count, stream);
  }
  if (depth >= 4) return launch_persist_d<F, NT, 4, true>(calls, count, stream);
  return launch_persist_d<F, NT, 2, false>(calls, count, stream);
}

template <WFormat F, int NT>
cudaError_t launch_n(const LinearArgs* calls, int count, cudaStream_t stream) {
  // kAuto0 (the policy before the persistent kernel, bench/results/2026-11-30-b1-linears.md):
  // the bulk kernel for several weights in one launch (one launch's fixed ~5 us saved) and
  // for one weight at 5 .. 8 tokens (16 warps per SM for the FMAs instead of 8: wq_b / wo_a
  // / wo_b 1.23-1.34x at n = 8); the former kernel for one weight at n <= 4.
  // kAuto (H200, NOTES 19): kAuto0, except several FP8 weights at 3 .. 4 tokens, where the
  // persistent kernel measured 0.86x the bulk one (wq_a + wkv 20.5 -> 17.7 us, shared w1 +
  // w3 37.0 -> 31.7 at n = 4). At n = 1 it was no faster than the former kernel on any
  // weight (wq_b 24.9 vs 21.6 us) nor than the bulk one on the pairs, so it stays out there.
  GemvKind kind = gemv_kind();
  if (kind == GemvKind::kTmap) kind = GemvKind::kAuto;  // the calls the tensor-map kernel does not take
  if constexpr (NT == 1 && F == WFormat::kE4M3) {
    // kAuto at one token (H200, bench/results/2026-11-30-gemvdec.md): a single FP8 call takes
    // gemv_xs_kernel (same bits) where it measured faster than the former kernel: x rows of
    // at most 4096 columns (16 KB staged per block) and blocks of >= 8 rows (ks <= 4), i.e.
    // wq_b 1.12 / 1.21x (f32 / bf16 x), wo_a 1.09 / 1.14x, idx wq_b 1.04 / 1.10x, shared w2
    // 1.01 / 1.11x. Where the block stages more x per weight byte (wq_a, wkv, shared w1 at
    // 5120 columns, 4 .. 8 rows per block; wo_b at 8192) it measured 0.89-1.04x: the former
    // kernel stays, as does the bulk kernel for several calls per launch (1.17x two xs launches).
    if (kind == GemvKind::kAuto && count == 1) {
      const LinearArgs& c = calls[0];
      const int ks = gemv_ks(F, c.num_rows, c.w.cols);
      if (c.w.cols <= 4096 && ks <= 4 && xs_fits(c, ks)) return launch_xs<>(c, stream);
    }
    // kXs (A/B): when gemv_xs_kernel takes every call, it runs them (one launch per call);
    // otherwise kAuto0's kernels do.
    if (kind == GemvKind::kXs) {
      bool all = true;
      for (int k = 0; k < count; ++k) all = all && xs_fits(calls[k], gemv_ks(F, calls[k].num_rows, calls[k].w.cols));
      if (all) {
        for (int k = 0; k < count; ++k) {
          const cudaError_t e = launch_xs<>(calls[k], stream);
          if (e != cudaSuccess) return e;
        }
        return cudaSuccess;
      }
    }
  }
  if constexpr (NT <= 4) {
    const bool auto_persist = kind == GemvKind::kAuto && NT == 4 && count > 1 && F == WFormat::kE4M3;
    if ((kind == GemvKind::kPersist || auto_persist) && persist_fits(calls, count))
      return launch_persist<F, NT>(calls, count, stream);
  }
  // kTensor: the calls the tensor-core kernel does not take (smxx_linear.cu) run kAuto0.
  if (kind == GemvKind::kAuto || kind == GemvKind::kPersist || kind == GemvKind::kTensor || kind == GemvKind::kXs)
    kind = GemvKind::kAuto0;
  bool bulk = kind == GemvKind::kBulk || (kind == GemvKind::kAuto0 && (count > 1 || NT == 8));
  for (int k = 0; bulk && k < count; ++k) bulk = bulk_fits(calls[k]);
  if (bulk) return launch_bulk<F, NT>(calls, count, stream);
  if (kind == GemvKind::kBulk) return cudaErrorInvalidValue;  // forced, and it cannot take the call
  for (int k = 0; k < count; ++k) {
    const cudaError_t e = launch_gemv<F, NT>(calls[k], stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

// count calls of format F with the same n (<= 8) and bf16_x, each gemv-eligible.
template <WFormat F>
cudaError_t launch(const LinearArgs* calls, int count, cudaStream_t stream) {
  const int64_t n = calls[0].n;
  if (n <= 1) return launch_n<F, 1>(calls, count, stream);
  if (n <= 2) return launch_n<F, 2>(calls, count, stream);
  if (n <= 4) return launch_n<F, 4>(calls, count, stream);
  return launch_n<F, 8>(calls, count, stream);
}

}  // namespace deepinfer::kernels::gemv
