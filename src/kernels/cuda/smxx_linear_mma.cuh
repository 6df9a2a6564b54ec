// The tensor-core path of linear (smxx_linear.cuh) for batches above the gemv
// range, still with fp32 activations and fp32-level accuracy:
//   - weights (FP8 / FP4 with power-of-two e8m0 scales, or BF16) dequantize
//     EXACTLY to bf16: e4m3 and e2m1 carry at most 4 significant bits and a
//     power-of-two scale only moves the exponent, which bf16 shares with fp32;
//   - x is split into three bf16 terms, x = hi + mid + lo (24 significant bits,
//     as fp32), and each term goes through mma.sync m16n8k16 with fp32
//     accumulation, smallest term first.
// So the products are exact and only the accumulation order differs from an fp32
// GEMM. Three MMAs per tile instead of one: the cost of matching the fp32 oracle.
// Under bf16 activations (LinearArgs::bf16_x, kTerms = 1) only hi is kept: hi is x
// rounded to nearest-even bf16, exactly what Activations::kBF16 asks for, so one
// MMA per tile gives the exact products of the rounded x.
//
// Block: 64 weight rows x 64 tokens, 4 warps (one m16 row tile each, all eight
// n8 token tiles), K in steps of 32, double-buffered shared memory with the next
// step's global loads issued before the current step's MMAs.
// Internal to the kernels directory; instantiated in smxx_linear_mma_<format>.cu.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear.cuh"

namespace deepinfer::kernels::mma {

constexpr int kBM = 64;        // weight rows per block
constexpr int kBN = 64;        // tokens per block
constexpr int kBK = 32;        // K per pipeline step
constexpr int kLd = kBK + 8;   // bf16 per smem row: 80 B, so 8 ldmatrix rows hit distinct banks
constexpr int kThreads = 128;  // each thread stages 16 elements of one weight row and one token

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return uint32_t(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(p)));
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // bf16 mma needs sm_80+; builds for older targets compile but must not take this path
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);  // .x = lo = lower address
  return *reinterpret_cast<const uint32_t*>(&v);
}

// One thread's share of a K step: 16 consecutive weights of one row (raw bytes)
// and 16 consecutive x values of one token.
template <WFormat F>
struct Stage {
  uint4 w[F == WFormat::kBF16 ? 2 : 1];
  float scale;
  float4 x[4];
};

template <WFormat F>
__device__ __forceinline__ void load_stage(Stage<F>& s, const LinearArgs& a, const uint8_t* wrow,
                                           const uint8_t* srow, const float* xrow, int64_t k, int scale_shift) {
  const WeightArgs& w = a.w;
  if (wrow != nullptr) {
    if constexpr (F == WFormat::kE4M3) {
      s.w[0] = *reinterpret_cast<const uint4*>(wrow + k);
    } else if constexpr (F == WFormat::kE2M1) {
      const uint2 v = *reinterpret_cast<const uint2*>(wrow + k / 2);
      s.w[0] = make_uint4(v.x, v.y, 0, 0);
    } else {
      s.w[0] = *reinterpret_cast<const uint4*>(wrow + 2 * k);
      s.w[1] = *reinterpret_cast<const uint4*>(wrow + 2 * k + 16);
    }
    s.scale = w.scale_format == SFormat::kE8M0 ? e8m0_to_float(srow[k >> scale_shift]) : 1.0f;
  } else {
#pragma unroll
    for (auto& v : s.w) v = make_uint4(0, 0, 0, 0);
    s.scale = 0.0f;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
    s.x[i] = xrow != nullptr ? *reinterpret_cast<const float4*>(xrow + k + 4 * i) : make_float4(0, 0, 0, 0);
}

// Dequantize to bf16 (exact, see above) and split x into kTerms bf16 terms (3: hi, mid,
// lo; 1: hi alone = x rounded to bf16).
template <WFormat F, int kTerms = 3>
__device__ __forceinline__ void store_stage(const Stage<F>& s, __nv_bfloat16* ws, __nv_bfloat16* xs0, int xs_part) {
  float f[16];
  if constexpr (F == WFormat::kE4M3) {
    const uint32_t words[4] = {s.w[0].x, s.w[0].y, s.w[0].z, s.w[0].w};
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
      for (int p = 0; p < 2; ++p) {
        const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(words[q] >> (16 * p)), __NV_E4M3);
        const float2 v = __half22float2(__half2(r));
        f[4 * q + 2 * p] = v.x * s.scale;
        f[4 * q + 2 * p + 1] = v.y * s.scale;
      }
  } else if constexpr (F == WFormat::kE2M1) {
    const uint32_t words[2] = {s.w[0].x, s.w[0].y};
    const float sc = s.scale * 16384.0f;  // e2m1 codes decode to value * 2^-14
#pragma unroll
    for (int q = 0; q < 2; ++q)
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const uint32_t byte = (words[q] >> (8 * b)) & 0xffu;
        const uint32_t pair = (byte & 0xfu) | ((byte >> 4) << 16);
        const uint32_t bits = ((pair & 0x00070007u) << 9) | ((pair & 0x00080008u) << 12);
        __half2_raw r;
        r.x = uint16_t(bits);
        r.y = uint16_t(bits >> 16);
        const float2 v = __half22float2(__half2(r));
        f[8 * q + 2 * b] = v.x * sc;
        f[8 * q + 2 * b + 1] = v.y * sc;
      }
  }
  if constexpr (F == WFormat::kBF16) {
    reinterpret_cast<uint4*>(ws)[0] = s.w[0];
    reinterpret_cast<uint4*>(ws)[1] = s.w[1];
  } else {
    uint32_t packed[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) packed[i] = pack_bf16(f[2 * i], f[2 * i + 1]);
    reinterpret_cast<uint4*>(ws)[0] = make_uint4(packed[0], packed[1], packed[2], packed[3]);
    reinterpret_cast<uint4*>(ws)[1] = make_uint4(packed[4], packed[5], packed[6], packed[7]);
  }
  uint32_t parts[kTerms][8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float4 q = s.x[i / 2];
    const float v0 = (i & 1) ? q.z : q.x, v1 = (i & 1) ? q.w : q.y;
    const __nv_bfloat162 h = __floats2bfloat162_rn(v0, v1);
    parts[0][i] = *reinterpret_cast<const uint32_t*>(&h);
    if constexpr (kTerms == 3) {
      const float r0 = v0 - __low2float(h), r1 = v1 - __high2float(h);  // exact in fp32
      const __nv_bfloat162 m = __floats2bfloat162_rn(r0, r1);
      const __nv_bfloat162 l = __floats2bfloat162_rn(r0 - __low2float(m), r1 - __high2float(m));
      parts[1][i] = *reinterpret_cast<const uint32_t*>(&m);
      parts[2][i] = *reinterpret_cast<const uint32_t*>(&l);
    }
  }
#pragma unroll
  for (int p = 0; p < kTerms; ++p) {
    uint4* dst = reinterpret_cast<uint4*>(xs0 + p * xs_part);
    dst[0] = make_uint4(parts[p][0], parts[p][1], parts[p][2], parts[p][3]);
    dst[1] = make_uint4(parts[p][4], parts[p][5], parts[p][6], parts[p][7]);
  }
}

// The MMAs of one K step (two k16 halves x kTerms x terms x the live token pairs) into d.
template <int kTerms = 3>
__device__ __forceinline__ void mma_kstep(float (&d)[8][4], const __nv_bfloat16* ws, const __nv_bfloat16 (*xs)[kBN * kLd],
                                          int a_row, int a_k, int b_tok, int b_k, int64_t live) {
#pragma unroll
  for (int kk = 0; kk < kBK; kk += 16) {
    uint32_t af[4];
    ldmatrix_x4(af, &ws[a_row * kLd + kk + a_k]);
#pragma unroll
    for (int p = kTerms - 1; p >= 0; --p) {  // lo, mid, hi: small terms first
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        if (np * 16 >= live) break;
        uint32_t bf[4];
        ldmatrix_x4(bf, &xs[p][(np * 16 + b_tok) * kLd + kk + b_k]);
        mma_bf16(d[2 * np], af, bf[0], bf[1]);
        mma_bf16(d[2 * np + 1], af, bf[2], bf[3]);
      }
    }
  }
}

// One block's tile: weight rows r0 .. r0 + 63 x tokens t0 .. t0 + 63 of a. x_rows, when
// set, maps token t to its row of a.x (the grouped MoE reads tokens in place through
// its permuted row list); else token t is row t. Every thread of the block calls it.
// Token pairs of n8 tiles past a.n are skipped (their outputs are never stored), so a
// tile with few tokens issues few MMAs. kPromote: each K step's MMAs go into a fresh
// fragment that is then added to an fp32 register sum with ordinary rounding; without
// it the tensor-core accumulator's truncation biases long sums toward zero (6.4e-5 of
// the output RMS at K = 5120). Linear and the grouped MoE both promote: the bias was
// enough to flip one FP8 rounding of the quant fixture's full prefill (4e-3 vs the CPU).
template <WFormat F, bool kPromote = false, int kTerms = 3>
__device__ __forceinline__ void mma_block(const LinearArgs& a, const int32_t* x_rows, int64_t r0, int64_t t0,
                                          int scale_shift) {
  __shared__ __align__(16) __nv_bfloat16 ws[2][kBM * kLd];
  __shared__ __align__(16) __nv_bfloat16 xs[2][kTerms][kBN * kLd];
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const WeightArgs& w = a.w;
  const int64_t K = w.cols;

  // Staging roles: weight row / token tid / 2, elements (tid % 2) * 16 .. + 15.
  const int srow_i = tid >> 1, seg = (tid & 1) * 16;
  const int64_t lr = r0 + srow_i, tok = t0 + srow_i;
  const int64_t row_bytes = F == WFormat::kE2M1 ? K / 2 : F == WFormat::kE4M3 ? K : 2 * K;
  const uint8_t* wrow = lr < a.num_rows ? w.data + (a.row0 + lr) * row_bytes : nullptr;
  const uint8_t* srow = w.scale_format == SFormat::kE8M0 && wrow ? w.scale + ((a.row0 + lr) / w.block_rows) * w.scale_cols
                                                                 : nullptr;
  const float* xrow = tok < a.n ? a.x + (x_rows ? int64_t(x_rows[tok]) : tok) * K : nullptr;
  // This thread's staging slots in buffer 0; buffer 1 sits a fixed distance on
  // (pointer arithmetic, not a two-entry array: a run-time index would spill it).
  __nv_bfloat16* const ws_dst = &ws[0][srow_i * kLd + seg];
  __nv_bfloat16* const xs_dst = &xs[0][0][srow_i * kLd + seg];
  constexpr int kWsBuf = kBM * kLd, kXsBuf = kTerms * kBN * kLd;

  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int c = 0; c < 4; ++c) acc[j][c] = 0.0f;

  Stage<F> st;
  load_stage<F>(st, a, wrow, srow, xrow, seg, scale_shift);
  store_stage<F, kTerms>(st, ws_dst, xs_dst, kBN * kLd);
  __syncthreads();

  // ldmatrix roles: A (weights, 16 x 16) rows lane % 16, k half lane / 16;
  // B (tokens, two n8 tiles x k16) tokens (lane % 8) + (lane / 16) * 8, k half (lane / 8) % 2.
  const int a_row = warp * 16 + (lane & 15), a_k = (lane >> 4) * 8;
  const int b_tok = (lane & 7) + (lane >> 4) * 8, b_k = ((lane >> 3) & 1) * 8;
  const int steps = int(K / kBK);
  const int64_t live = a.n - t0;  // tokens of this block (uniform across it)
  for (int s = 0; s < steps; ++s) {
    const int buf = s & 1;
    const bool more = s + 1 < steps;
    if (more) load_stage<F>(st, a, wrow, srow, xrow, int64_t(s + 1) * kBK + seg, scale_shift);
    if constexpr (kPromote) {
      float step[8][4];
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) step[j][c] = 0.0f;
      mma_kstep<kTerms>(step, ws[buf], xs[buf], a_row, a_k, b_tok, b_k, live);
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[j][c] += step[j][c];
    } else {
      mma_kstep<kTerms>(acc, ws[buf], xs[buf], a_row, a_k, b_tok, b_k, live);
    }
    if (more) store_stage<F, kTerms>(st, ws_dst + (buf ^ 1) * kWsBuf, xs_dst + (buf ^ 1) * kXsBuf, kBN * kLd);
    __syncthreads();
  }

  // C fragment: c0, c1 = (row g, tokens 2q, 2q + 1), c2, c3 = (row g + 8, same tokens).
  const int g = lane >> 2, q = lane & 3;
#pragma unroll
  for (int j = 0; j < 8; ++j)
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int64_t row = r0 + warp * 16 + g + (c >> 1) * 8;
      const int64_t t = t0 + j * 8 + 2 * q + (c & 1);
      if (row < a.num_rows && t < a.n) a.y[t * a.num_rows + row] = acc[j][c];
    }
}

template <WFormat F, int kTerms>
__global__ void __launch_bounds__(kThreads) mma_kernel(LinearArgs a, int scale_shift) {
  mma_block<F, /*kPromote=*/true, kTerms>(a, nullptr, int64_t(blockIdx.x) * kBM, int64_t(blockIdx.y) * kBN,
                                          scale_shift);
}

template <WFormat F>
cudaError_t launch(const LinearArgs& a, cudaStream_t stream) {
  int scale_shift = 0;
  if (a.w.scale_format == SFormat::kE8M0)
    while ((int64_t(1) << scale_shift) < a.w.block_cols) ++scale_shift;
  const int64_t gx = (a.num_rows + kBM - 1) / kBM, gy = (a.n + kBN - 1) / kBN;
  if (gx > INT32_MAX || gy > 65535 || a.w.cols / kBK > INT32_MAX) return cudaErrorInvalidValue;
  if (a.bf16_x)
    mma_kernel<F, 1><<<dim3(unsigned(gx), unsigned(gy)), kThreads, 0, stream>>>(a, scale_shift);
  else
    mma_kernel<F, 3><<<dim3(unsigned(gx), unsigned(gy)), kThreads, 0, stream>>>(a, scale_shift);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels::mma
