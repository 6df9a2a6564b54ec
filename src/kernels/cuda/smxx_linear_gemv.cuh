// The gemv path of linear (smxx_linear.cuh): kernel template and launcher,
// instantiated once per weight format in smxx_linear_gemv_<format>.cu so the
// variants compile in parallel. Internal to the kernels directory.
#pragma once

#include <cuda_fp8.h>

#include "kernels/cuda/smxx_common.cuh"
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

// Block: 8 warps = (8 / ks) row groups x ks slices of K. Warp (group g, slice s)
// owns rows 4 * (block * (8 / ks) + g) + {0..3} and the s-th slice of the row's
// 16-byte vectors; the ks partial sums meet in shared memory.
// vec_shift: log2(16-byte vectors per scale block along K), so the scale column of
// vector v is v >> vec_shift (no integer division in the loop; the first version
// divided 64-bit indices per vector and ran at 5-10% of bandwidth).
template <WFormat F, int NT>
__global__ void __launch_bounds__(kGemvWarps * 32) gemv_kernel(LinearArgs a, int ks, int vec_shift) {
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

  for (int v = slice * per + lane; v < v_end; v += 32) {
    uint4 wv[kGemvRows];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) wv[r] = load_stream(wrow[r] + int64_t(v) * 16);
    float s[kGemvRows];
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      float sv = 1.0f;
      if (scaled) {
        const int sc = v >> vec_shift;
        sv = w.scale_format == SFormat::kE8M0 ? e8m0_to_float(srow[r][sc])
                                              : reinterpret_cast<const float*>(srow[r])[sc];
      }
      s[r] = sv * Fmt<F>::kFactor;
    }
    const int64_t c0 = int64_t(v) * kPerVec;
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
        if (t >= a.n) break;
        float xf[kPerWord];
        load_x<kPerWord>(xg + t * x_stride + c0 + q * kPerWord, xf);
        if (a.bf16_x) {
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

template <WFormat F, int NT>
cudaError_t launch_gemv(const LinearArgs& a, cudaStream_t stream) {
  constexpr int kPerVec = 4 * Fmt<F>::kPerWord;
  const int64_t nvec = a.w.cols / kPerVec;
  // Split K across warps until each warp has about two vectors per lane: short
  // rows then still put enough loads in flight per block.
  int ks = 1;
  while (ks < kGemvWarps && nvec / (2 * ks) >= 64) ks *= 2;
  // FP8 weights with few rows (V4.1: wq_a 1280 x 5120, wkv 512 x 5120, indexer wq_b
  // 4096 x 1280): fewer than ~2 blocks per SM left most SMs idle or one wave ragged
  // (wq_a: 160 blocks, ~7 us for 6.5 MB). Split K further, down to one 16-byte vector
  // per lane, until ~256 blocks. The split follows the weight's shape only (rows and
  // columns), never n: a row's sum order is the same at every batch size.
  if constexpr (F == WFormat::kE4M3) {
    auto blocks_at = [&](int k) { return (a.num_rows + int64_t(kGemvWarps / k) * kGemvRows - 1) / (int64_t(kGemvWarps / k) * kGemvRows); };
    while (ks < kGemvWarps && blocks_at(ks) < 256 && nvec / (2 * ks) >= 32) ks *= 2;
  }
  int vec_shift = 0;
  if (a.w.scale_format != SFormat::kNone)
    while ((int64_t(kPerVec) << vec_shift) < a.w.block_cols) ++vec_shift;
  const int64_t rows_per_block = int64_t(kGemvWarps / ks) * kGemvRows;
  const int64_t blocks = (a.num_rows + rows_per_block - 1) / rows_per_block;
  if (blocks > INT32_MAX || nvec > INT32_MAX) return cudaErrorInvalidValue;
  gemv_kernel<F, NT><<<unsigned(blocks), kGemvWarps * 32, 0, stream>>>(a, ks, vec_shift);
  return cudaGetLastError();
}

template <WFormat F>
cudaError_t launch(const LinearArgs& a, cudaStream_t stream) {
  if (a.n <= 1) return launch_gemv<F, 1>(a, stream);
  if (a.n <= 2) return launch_gemv<F, 2>(a, stream);
  if (a.n <= 4) return launch_gemv<F, 4>(a, stream);
  return launch_gemv<F, 8>(a, stream);
}

}  // namespace deepinfer::kernels::gemv
