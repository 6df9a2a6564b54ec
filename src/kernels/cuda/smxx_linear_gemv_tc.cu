// The gemv path's tensor-core kernel (GemvKind::kTensor, opt-in; bench/flash/NOTES.md
// section 26): e4m3 weights (e8m0 or no scales) times x rounded to bf16
// (LinearArgs::bf16_x), n <= 8 tokens, on mma.sync m16n8k16 bf16 with fp32 accumulation.
//
// Why: the SIMT gemv kernels spend per weight an e4m3 -> f16 -> f32 conversion and one
// fp32 FMA per token; at the Flash shapes that SM work, not the loads, bounds them (NOTES
// 19: more loads in flight did not help, time grows with n at equal bytes). Here the
// products run on the tensor core (the weight rows are the M = 16 operand, the tokens the
// N = 8 operand, zero-padded), so the SM work per weight pair is the decode alone
// (cvt e4m3x2 -> f16x2, two integer ops to f16 -> bf16 bits, one bf16x2 multiply that
// applies the block scale) and does not grow with n.
//
// Exactness: every e4m3 value is a normal f16 (the smallest, 2^-9, lies above f16's 2^-14),
// so its f16 bits shifted right by 3 are the bf16 bits of value * 2^-112 (same 3-bit
// mantissa, the f16 exponent field read with bf16's bias), never a bf16 subnormal; the
// multiply by 2^112 * scale (a power of two) is exact, so the MMA sees the exactly
// dequantized weight, and bf16 x bf16 products are exact in fp32. Only the fp32 sums
// differ from the SIMT kernels (and from the CPU oracle): the MMA adds each 64-column
// chunk's 64 products in its own order, and those chunk sums are added in fp32 registers
// (promotion: the tensor core's accumulation is not round-to-nearest; long chains in it
// drifted in the mma path, smxx_linear.cuh). So this kernel is NOT bitwise the other gemv
// kernels; it is checked against the CPU oracle (tests/ops_cuda/cases_linear_gemv.cpp).
//
// Batch invariance: each output element of an MMA is a function of its A row and B column
// only, the K split (ks) and chunk order follow the weight's shape only, and one code
// path serves every n: a token's outputs do not depend on n or on the other tokens
// (tested bitwise: n = 8 against each token alone).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear.cuh"
#include "kernels/cuda/smxx_linear_gemv.cuh"
#include "kernels/cuda/smxx_linear_gemv_bf16x.cuh"

namespace deepinfer::kernels::gemv_tc {
namespace {

constexpr int kWarps = gemv::kGemvWarps;  // 8 (launch_pdl's block size)
constexpr int kTileRows = 16;             // a warp's rows: the MMA's M
constexpr int kChunk = 64;                // columns per step: 16 bytes per row per lane of a quad
constexpr int kUnroll = 4;                // steps whose loads are issued together

using gemv::e4m3x2_to_bf16x2_scaled;  // smxx_linear_gemv_bf16x.cuh
using gemv::mma_bf16;
using gemv::mul_bf16x2;
using gemv::pack_bf16x2;
using gemv::scale_factors;

// Block: kWarps warps = (kWarps / ks) tiles of 16 rows x ks slices of the 64-column chunks.
// Lane (g = lane / 4, q = lane % 4) holds, per chunk, the 16 bytes of rows g and g + 8 at
// columns 16 q .. 16 q + 15 and x of token g at the same columns. The MMA's K order is a
// permutation of those columns: MMA j's k = 2q, 2q + 1 (A a0 / a1, B b0) are columns
// 16 q + 4 j + {0, 1}, its k = 2q + 8, 2q + 9 (a2 / a3, b1) columns 16 q + 4 j + {2, 3};
// A and B use the same permutation, so the dot products are those of the weight rows.
__global__ void __launch_bounds__(kWarps * 32, 2) gemv_tc_kernel(LinearArgs a, int ks, int scale_shift) {
  pdl_trigger();
  __shared__ float red[kWarps][kTileRows][8];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
  const int slice = warp % ks, group = warp / ks, groups = kWarps / ks;
  const int64_t lr0 = (int64_t(blockIdx.x) * groups + group) * kTileRows;
  const WeightArgs& w = a.w;
  const int64_t cols = w.cols;
  const int nchunk = int((cols + kChunk - 1) / kChunk);
  const int per = (nchunk + ks - 1) / ks;
  const int c_begin = slice * per, c_end = min(nchunk, c_begin + per);
  // Rows past num_rows read the last row (computed, never stored).
  const int64_t rlo = a.row0 + min(lr0 + g, a.num_rows - 1), rhi = a.row0 + min(lr0 + g + 8, a.num_rows - 1);
  const uint8_t* wlo = w.data + rlo * cols + 16 * q;
  const uint8_t* whi = w.data + rhi * cols + 16 * q;
  const bool scaled = w.scale_format == SFormat::kE8M0;
  const uint8_t* slo = scaled ? w.scale + (rlo / w.block_rows) * w.scale_cols : nullptr;
  const uint8_t* shi = scaled ? w.scale + (rhi / w.block_rows) * w.scale_cols : nullptr;
  // x of token g (a tile's 16 rows lie in one input group: x_group_rows % 16 == 0).
  const int64_t x_stride = a.x_stride > 0 ? a.x_stride : cols;
  const bool has_x = g < a.n;
  const float* xg = a.x + (a.x_group_rows > 0 ? (min(lr0, a.num_rows - 1) / a.x_group_rows) * a.x_group_step : 0) +
                    (has_x ? g : 0) * x_stride + 16 * q;
  pdl_wait();  // x may be written by the kernel before (PDL launches)

  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int c0 = c_begin; c0 < c_end; c0 += kUnroll) {
    uint4 vlo[kUnroll], vhi[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t col = int64_t(c0 + u) * kChunk + 16 * q;
      if (c0 + u < c_end && col < cols) {
        vlo[u] = gemv::load_stream(wlo + int64_t(c0 + u) * kChunk);
        vhi[u] = gemv::load_stream(whi + int64_t(c0 + u) * kChunk);
      } else {
        vlo[u] = make_uint4(0, 0, 0, 0);
        vhi[u] = make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (c0 + u >= c_end) break;  // uniform over the warp
      const int64_t col = int64_t(c0 + u) * kChunk + 16 * q;
      const bool live = col < cols;  // the last chunk of cols % 64 != 0: lanes past the end add 0
      float xv[16];
      if (has_x && live) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const float4 v = __ldg(reinterpret_cast<const float4*>(xg + int64_t(c0 + u) * kChunk) + i);
          xv[4 * i] = v.x;
          xv[4 * i + 1] = v.y;
          xv[4 * i + 2] = v.z;
          xv[4 * i + 3] = v.w;
        }
      } else {
#pragma unroll
        for (int i = 0; i < 16; ++i) xv[i] = 0.0f;
      }
      uint32_t flo1 = 0x3f803f80u, flo2 = 0x3f803f80u, fhi1, fhi2;
      scale_factors(127u, flo1, flo2);  // no scales: 2^112 * 1
      fhi1 = flo1;
      fhi2 = flo2;
      if (scaled && live) {
        const int sc = int(col >> scale_shift);  // block_cols >= 16: one scale per lane's 16 columns
        scale_factors(slo[sc], flo1, flo2);
        scale_factors(shi[sc], fhi1, fhi2);
      }
      const bool two = flo2 != 0x3f803f80u || fhi2 != 0x3f803f80u;  // scale codes above 142 (rare)
      const uint32_t wl[4] = {vlo[u].x, vlo[u].y, vlo[u].z, vlo[u].w};
      const uint32_t wh[4] = {vhi[u].x, vhi[u].y, vhi[u].z, vhi[u].w};
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        uint32_t a0 = mul_bf16x2(e4m3x2_to_bf16x2_scaled(wl[j]), flo1);
        uint32_t a2 = mul_bf16x2(e4m3x2_to_bf16x2_scaled(wl[j] >> 16), flo1);
        uint32_t a1 = mul_bf16x2(e4m3x2_to_bf16x2_scaled(wh[j]), fhi1);
        uint32_t a3 = mul_bf16x2(e4m3x2_to_bf16x2_scaled(wh[j] >> 16), fhi1);
        if (two) {
          a0 = mul_bf16x2(a0, flo2);
          a2 = mul_bf16x2(a2, flo2);
          a1 = mul_bf16x2(a1, fhi2);
          a3 = mul_bf16x2(a3, fhi2);
        }
        const uint32_t b0 = pack_bf16x2(xv[4 * j], xv[4 * j + 1]);
        const uint32_t b1 = pack_bf16x2(xv[4 * j + 2], xv[4 * j + 3]);
        mma_bf16(c, a0, a1, a2, a3, b0, b1);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[i] += c[i];
    }
  }
  // C fragment: acc[0], acc[1] = (row g, tokens 2q, 2q + 1); acc[2], acc[3] = row g + 8.
  red[warp][g][2 * q] = acc[0];
  red[warp][g][2 * q + 1] = acc[1];
  red[warp][g + 8][2 * q] = acc[2];
  red[warp][g + 8][2 * q + 1] = acc[3];
  __syncthreads();
  // Output (tile, row, token) = unravel(i) (up to 8 x 16 x 8 per block, so threads loop):
  // its ks slices added in slice order.
  for (int i = threadIdx.x; i < groups * kTileRows * 8; i += kWarps * 32) {
    const int tg = i / (kTileRows * 8), r = (i / 8) % kTileRows, t = i % 8;
    const int64_t lr = (int64_t(blockIdx.x) * groups + tg) * kTileRows + r;
    if (t >= a.n || lr >= a.num_rows) continue;
    float sum = 0.0f;
    for (int k = 0; k < ks; ++k) sum += red[tg * ks + k][r][t];
    a.y[t * a.num_rows + lr] = sum;
  }
}

// The K split: a function of the weight's shape only (never n), so a row's sums are the
// same at every batch size. Halve each warp's chunks while it keeps >= 8 (loads in
// flight per warp: kUnroll chunks), then further, down to >= 2, while the launch has fewer
// than ~2 blocks per SM (V4.1 wo_b 5120 x 8192: 320 tiles of 16 rows).
int tc_ks(int64_t rows, int64_t cols) {
  const int64_t nchunk = (cols + kChunk - 1) / kChunk;
  const int64_t tiles = (rows + kTileRows - 1) / kTileRows;
  auto blocks_at = [&](int k) { return (tiles + (kWarps / k) - 1) / (kWarps / k); };
  int ks = 1;
  while (ks < kWarps && nchunk / (2 * ks) >= 8) ks *= 2;
  while (ks < kWarps && blocks_at(ks) < 264 && nchunk / (2 * ks) >= 2) ks *= 2;
  return ks;
}

}  // namespace

cudaError_t launch(const LinearArgs& a, cudaStream_t stream);

}  // namespace deepinfer::kernels::gemv_tc

namespace deepinfer::kernels {
bool linear_gemv_tc_eligible(const LinearArgs& a) {
  const WeightArgs& w = a.w;
  return a.bf16_x && a.n >= 1 && a.n <= 8 && w.format == WFormat::kE4M3 &&
         (w.scale_format == SFormat::kNone ||
          (w.scale_format == SFormat::kE8M0 && w.block_cols >= 16 && (w.block_cols & (w.block_cols - 1)) == 0)) &&
         w.cols % 16 == 0 && (a.x_group_rows == 0 || a.x_group_rows % gemv_tc::kTileRows == 0) &&
         linear_gemv_eligible(a);
}
}  // namespace deepinfer::kernels

namespace deepinfer::kernels::gemv_tc {
cudaError_t launch(const LinearArgs& a, cudaStream_t stream) {
  if (!linear_gemv_tc_eligible(a)) return cudaErrorInvalidValue;
  const int ks = tc_ks(a.num_rows, a.w.cols);
  int shift = 0;
  if (a.w.scale_format == SFormat::kE8M0)
    while ((int64_t(1) << shift) < a.w.block_cols) ++shift;
  const int64_t rows_per_block = int64_t(kWarps / ks) * kTileRows;
  const int64_t blocks = (a.num_rows + rows_per_block - 1) / rows_per_block;
  if (blocks > INT32_MAX || (a.w.cols + kChunk - 1) / kChunk > INT32_MAX) return cudaErrorInvalidValue;
  return gemv::launch_pdl(gemv_tc_kernel, dim3(unsigned(blocks)), 0, stream, a, ks, shift);
}

}  // namespace deepinfer::kernels::gemv_tc
