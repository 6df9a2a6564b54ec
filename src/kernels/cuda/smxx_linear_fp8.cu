// Activations::kFP8: the activation quantizer and the mma.sync FP8 GEMM
// (smxx_linear_fp8.cuh).
#include <cuda_fp8.h>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear_fp8.cuh"
#include "kernels/cuda/smxx_linear_fp8_common.cuh"

namespace deepinfer::kernels {

namespace {

// code * scale as bf16 bits. Exact by truncation: an e4m3 code has at most 4 significant
// bits and the ue8m0 scale only moves the exponent (amax >= 1e-4 keeps the smallest
// nonzero value, 2^-9 * 2^-21, far inside bf16's normal range, as fp32's), so the fp32
// value's low 16 bits are zero; NaN stays NaN.
__device__ __forceinline__ uint16_t bf16_of_exact(float v) { return uint16_t(__float_as_uint(v) >> 16); }

// One thread per (token, block, lane): lane i of a warp holds element 32 b + i of its
// token, so a block's amax is five shuffles. Lanes past k (the ragged tail) hold 0,
// which leaves the amax unchanged and writes nothing.
__global__ void quant_act_fp8_kernel(const float* __restrict__ x, int64_t n, int64_t k, int64_t nb,
                                     uint8_t* __restrict__ codes, float* __restrict__ scales,
                                     float* __restrict__ deq, uint16_t* __restrict__ deq16) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t t = i / (nb * 32), rem = i % (nb * 32);
  const int64_t col = rem;  // (b * 32 + lane) = rem
  const bool live = t < n && col < k;
  const float v = live ? x[t * k + col] : 0.0f;
  float amax = fabsf(v);
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float s = fp8_block_scale(amax);
  if (t < n && (threadIdx.x & 31) == 0 && scales != nullptr) scales[t * nb + rem / 32] = s;
  if (!live) return;
  const float q = fp8_block_code(v, s);  // on the e4m3 grid: the conversion below is exact
  if (codes != nullptr) codes[t * k + col] = uint8_t(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3));
  if (deq != nullptr) deq[t * k + col] = q * s;
  if (deq16 != nullptr) deq16[t * k + col] = bf16_of_exact(q * s);
}

// ---------------------------------------------------------------------------
// mma.sync m16n8k32 e4m3 GEMM. Block: 128 tokens x 128 weight rows, 8 warps as 2 (tokens)
// x 4 (rows), each warp 64 x 32 = 4 x 4 MMA tiles; K in stages of 128 bytes (four
// 32-blocks) through a 3-deep cp.async ring. Per 32-block each warp runs its 16 MMAs
// from zero and promotes each into the fp32 accumulators with s_x(token) * s_w (one
// weight scale per warp: its 32 rows lie in one 32-row scale block).
// ---------------------------------------------------------------------------
// The vectorized quantizer (k % 4 == 0, 16-byte aligned x / deq, 4-byte aligned codes):
// eight threads per 32-block, four elements each (one float4 load, one 4-byte code store),
// so a block's amax is three shuffles within the aligned group of eight. The same scale
// and code functions as above, so the same bits; the first kernel reached ~770 GB/s
// (NOTES.md, helper fp8), a fifth of HBM, with five shuffles and a byte store per element.
__global__ void quant_act_fp8_vec_kernel(const float* __restrict__ x, int64_t n, int64_t k, int64_t nb,
                                         uint8_t* __restrict__ codes, float* __restrict__ scales,
                                         float* __restrict__ deq, uint16_t* __restrict__ deq16) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t t = i / (nb * 8), rem = i % (nb * 8);
  const int64_t col = rem * 4;  // (b * 8 + sub) * 4
  const bool live = t < n && col < k;
  const float4 v = live ? *reinterpret_cast<const float4*>(x + t * k + col) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float amax = fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w)));
  for (int o = 4; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float s = fp8_block_scale(amax);
  if (t < n && (threadIdx.x & 7) == 0 && scales != nullptr) scales[t * nb + rem / 8] = s;
  if (!live) return;
  const float q0 = fp8_block_code(v.x, s), q1 = fp8_block_code(v.y, s), q2 = fp8_block_code(v.z, s),
              q3 = fp8_block_code(v.w, s);
  if (codes != nullptr) {
    auto c = [](float q) { return uint32_t(__nv_cvt_float_to_fp8(q, __NV_SATFINITE, __NV_E4M3)); };
    *reinterpret_cast<uint32_t*>(codes + t * k + col) = c(q0) | (c(q1) << 8) | (c(q2) << 16) | (c(q3) << 24);
  }
  if (deq != nullptr) *reinterpret_cast<float4*>(deq + t * k + col) = make_float4(q0 * s, q1 * s, q2 * s, q3 * s);
  if (deq16 != nullptr)
    *reinterpret_cast<uint2*>(deq16 + t * k + col) =
        make_uint2(bf16_of_exact(q0 * s) | (uint32_t(bf16_of_exact(q1 * s)) << 16),
                   bf16_of_exact(q2 * s) | (uint32_t(bf16_of_exact(q3 * s)) << 16));
}

namespace mma8 {

constexpr int kBM = 128, kBN = 128, kBK = 128, kStages = 3, kThreads = 256;
constexpr int kLd = kBK + 16;  // 144-byte rows: 8 rows x 4 words of a fragment load hit 32 banks
constexpr int kTileBytes = kBM * kLd;                  // one operand tile
constexpr int kStageBytes = 2 * kTileBytes + kBM * 4 * 4;  // A, B, x scales [128][4]


__device__ __forceinline__ uint32_t lds32(const uint8_t* p) { return *reinterpret_cast<const uint32_t*>(p); }

__global__ void __launch_bounds__(kThreads) gemm_kernel(Fp8GemmArgs a) {
  extern __shared__ __align__(16) uint8_t smem[];
  const int64_t k = a.w.cols, nb = k / 32;
  const int64_t m0 = int64_t(blockIdx.y) * kBM;  // tokens
  const int64_t n0 = int64_t(blockIdx.x) * kBN;  // weight rows (of the slice)
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int wm = warp / 4, wn = warp % 4;  // warp's 64-token and 32-row slot
  const int g = lane / 4, tq = lane % 4;
  // Weight scales of this tile: [4 row groups of 32][nb], loaded once.
  float* wsc = reinterpret_cast<float*>(smem + kStages * kStageBytes);
  for (int64_t i = tid; i < 4 * nb; i += kThreads) {
    const int64_t grp = i / nb, b = i % nb;
    const int64_t row = a.row0 + min64(n0 + grp * 32, a.num_rows - 1);
    wsc[i] = fp8_weight_scale(a.w, row, b);
  }
  const int64_t stages_total = (nb + 3) / 4;
  auto load_stage = [&](int64_t st, int slot) {
    uint8_t* As = smem + slot * kStageBytes;
    uint8_t* Bs = As + kTileBytes;
    float* Ss = reinterpret_cast<float*>(Bs + kTileBytes);
    const int64_t kb0 = st * 4;
    // 128 rows x 8 chunks of 16 bytes per operand: 4 chunks each per thread.
    for (int c = tid; c < kBM * 8; c += kThreads) {
      const int r = c / 8, ch = c % 8;
      const int64_t kcol = kb0 * 32 + ch * 16;
      const bool kin = kcol < k;
      const int64_t tok = m0 + r;
      const bool ain = kin && tok < a.n;
      cp_async16_zfill(As + r * kLd + ch * 16, a.x_codes + (ain ? tok * k + kcol : 0), ain);
      const int64_t wr = n0 + r;
      const bool bin = kin && wr < a.num_rows;
      cp_async16_zfill(Bs + r * kLd + ch * 16, a.w.data + (bin ? (a.row0 + wr) * k + kcol : 0), bin);
    }
    for (int c = tid; c < kBM * 4; c += kThreads) {
      const int r = c / 4, j = c % 4;
      const int64_t tok = m0 + r, b = kb0 + j;
      const bool in = tok < a.n && b < nb;
      cp_async4_zfill(Ss + c, a.x_scales + (in ? tok * nb + b : 0), in);
    }
  };
  float acc[4][4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < stages_total) load_stage(s, s);
    cp_async_commit();
  }
  for (int64_t st = 0; st < stages_total; ++st) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // stage st landed for every thread; slot (st - 1) % kStages is free
    if (st + kStages - 1 < stages_total) load_stage(st + kStages - 1, int((st + kStages - 1) % kStages));
    cp_async_commit();
    const uint8_t* As = smem + int(st % kStages) * kStageBytes;
    const uint8_t* Bs = As + kTileBytes;
    const float* Ss = reinterpret_cast<const float*>(Bs + kTileBytes);
    const int jmax = int(min64(4, nb - st * 4));
    for (int j = 0; j < jmax; ++j) {
      const float sw = wsc[wn * nb + st * 4 + j];
      uint32_t af[4][4], bf[4][2];
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        const uint8_t* p = As + (wm * 64 + mt * 16 + g) * kLd + j * 32 + tq * 4;
        af[mt][0] = lds32(p);
        af[mt][1] = lds32(p + 8 * kLd);
        af[mt][2] = lds32(p + 16);
        af[mt][3] = lds32(p + 8 * kLd + 16);
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const uint8_t* p = Bs + (wn * 32 + nt * 8 + g) * kLd + j * 32 + tq * 4;
        bf[nt][0] = lds32(p);
        bf[nt][1] = lds32(p + 16);
      }
#pragma unroll
      for (int mt = 0; mt < 4; ++mt) {
        const float s0 = Ss[(wm * 64 + mt * 16 + g) * 4 + j] * sw;
        const float s1 = Ss[(wm * 64 + mt * 16 + g + 8) * 4 + j] * sw;
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          float d[4];
          mma_e4m3(d, af[mt][0], af[mt][1], af[mt][2], af[mt][3], bf[nt][0], bf[nt][1]);
          acc[mt][nt][0] = __fmaf_rn(d[0], s0, acc[mt][nt][0]);
          acc[mt][nt][1] = __fmaf_rn(d[1], s0, acc[mt][nt][1]);
          acc[mt][nt][2] = __fmaf_rn(d[2], s1, acc[mt][nt][2]);
          acc[mt][nt][3] = __fmaf_rn(d[3], s1, acc[mt][nt][3]);
        }
      }
    }
  }
  cp_async_wait<0>();
  // Fragment (row g / g + 8 = token, columns 2 tq, 2 tq + 1 = weight rows).
#pragma unroll
  for (int mt = 0; mt < 4; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t tok = m0 + wm * 64 + mt * 16 + g + h * 8;
      if (tok >= a.n) continue;
      float* yr = a.y + tok * a.num_rows;
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) {
        const int64_t col = n0 + wn * 32 + nt * 8 + tq * 2;
        if (col < a.num_rows) yr[col] = acc[mt][nt][2 * h];
        if (col + 1 < a.num_rows) yr[col + 1] = acc[mt][nt][2 * h + 1];
      }
    }
}

size_t smem_bytes(int64_t k) { return size_t(kStages) * kStageBytes + size_t(4 * (k / 32)) * 4; }

}  // namespace mma8

bool aligned16_fp8(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

namespace {

cudaError_t quant_act_fp8_any(const float* x, int64_t n, int64_t k, uint8_t* codes, float* scales, float* deq,
                              uint16_t* deq16, cudaStream_t stream) {
  if (n < 0 || k <= 0 || x == nullptr || (codes == nullptr && deq == nullptr && deq16 == nullptr))
    return cudaErrorInvalidValue;
  if (n == 0) return cudaSuccess;
  const int64_t nb = (k + 31) / 32, total = n * nb * 32;
  const int threads = 256;
  const auto aligned = [](const void* p, uintptr_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; };
  if (k % 4 == 0 && aligned(x, 16) && aligned(codes, 4) && aligned(deq, 16) && aligned(deq16, 8)) {
    const int64_t vt = n * nb * 8;
    quant_act_fp8_vec_kernel<<<unsigned((vt + threads - 1) / threads), threads, 0, stream>>>(x, n, k, nb, codes,
                                                                                           scales, deq, deq16);
    return cudaGetLastError();
  }
  quant_act_fp8_kernel<<<unsigned((total + threads - 1) / threads), threads, 0, stream>>>(x, n, k, nb, codes, scales,
                                                                                        deq, deq16);
  return cudaGetLastError();
}

}  // namespace

cudaError_t quant_act_fp8(const float* x, int64_t n, int64_t k, uint8_t* codes, float* scales, float* deq,
                          cudaStream_t stream) {
  if (codes == nullptr && deq == nullptr) return cudaErrorInvalidValue;
  return quant_act_fp8_any(x, n, k, codes, scales, deq, nullptr, stream);
}

cudaError_t quant_act_fp8_bf16(const float* x, int64_t n, int64_t k, uint16_t* out, cudaStream_t stream) {
  if (out == nullptr) return cudaErrorInvalidValue;
  return quant_act_fp8_any(x, n, k, nullptr, nullptr, nullptr, out, stream);
}

bool fp8_gemm_weight_ok(const WeightArgs& w) {
  if (w.format != WFormat::kE4M3 || w.cols % 32 != 0 || !aligned16_fp8(w.data)) return false;
  if (w.scale_format == SFormat::kNone) return true;
  return w.scale_format == SFormat::kE8M0 && w.block_cols % 32 == 0 && w.block_rows % 32 == 0;
}

bool linear_fp8_gemm_eligible(const Fp8GemmArgs& a) {
  if (!weight_args_valid(a.w) || !fp8_gemm_weight_ok(a.w)) return false;
  if (a.row0 < 0 || a.num_rows < 0 || a.row0 + a.num_rows > a.w.rows || a.n < 0) return false;
  if (!aligned16_fp8(a.x_codes) || a.x_scales == nullptr || a.y == nullptr) return false;
  // A row slice must start on a 32-row scale block (the warps' scale groups).
  if (a.w.scale_format != SFormat::kNone && a.row0 % 32 != 0) return false;
  return true;
}

cudaError_t linear_fp8_gemm(const Fp8GemmArgs& a, cudaStream_t stream) {
  if (!linear_fp8_gemm_eligible(a)) return cudaErrorInvalidValue;
  if (a.n == 0 || a.num_rows == 0) return cudaSuccess;
  const size_t smem = mma8::smem_bytes(a.w.cols);
  // Set on every call (a host-side attribute, cheap, allowed during graph capture): the
  // opt-in size depends on K.
  const cudaError_t e = cudaFuncSetAttribute(mma8::gemm_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (e != cudaSuccess) return e;
  const dim3 grid(unsigned((a.num_rows + mma8::kBN - 1) / mma8::kBN), unsigned((a.n + mma8::kBM - 1) / mma8::kBM));
  mma8::gemm_kernel<<<grid, mma8::kThreads, smem, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
