#include <algorithm>
#include <atomic>
#include <type_traits>

#include <cuda_bf16.h>

#include "common/env.h"
#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_launch.h"
#include "kernels/cuda/smxx_linear_gemv.cuh"
#include "kernels/cuda/smxx_moe.cuh"
#include "kernels/cuda/smxx_moe_terms.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kLogitTokens = 8;  // tokens per warp: one weight read feeds eight dots
constexpr int kLogitWarps = 8;

// Grid (ceil(experts / 8), ceil(n / 8)): warp = one expert row, eight tokens.
__global__ void __launch_bounds__(kLogitWarps * 32) router_logits_kernel(RouterLogitsArgs a) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t e = int64_t(blockIdx.x) * kLogitWarps + warp;
  const int64_t t0 = int64_t(blockIdx.y) * kLogitTokens;
  if (e >= a.gate.rows) return;
  const int64_t dim = a.gate.cols;
  double acc[kLogitTokens] = {};
  for (int64_t c = lane; c < dim; c += 32) {
    const double w = double(weight_at(a.gate, e, c));
#pragma unroll
    for (int t = 0; t < kLogitTokens; ++t)
      if (t0 + t < a.n) acc[t] += w * double(a.x[(t0 + t) * dim + c]);
  }
#pragma unroll
  for (int t = 0; t < kLogitTokens; ++t) {
    const double s = warp_sum(acc[t]);
    if (lane == 0 && t0 + t < a.n) a.logits[(t0 + t) * a.gate.rows + e] = float(s);
  }
}

// The bandwidth version for unscaled F32 / BF16 / F16 gates (the checkpoint's router
// is BF16): a warp streams its expert row in 16-byte vectors, lane-strided, with four
// rows per block so that a batch-1 call has enough blocks (96 at 384 experts) to keep
// loads in flight; x comes through L1 (shared by the block's warps). A token's sum is
// lane-strided products in double, then the warp tree: the same order for any n.
// The first version read the weight element by element through weight_at (a format
// switch and 64-bit index arithmetic per element): 128 us per call at batch 1 for 3.9 MB.
constexpr int kVecWarps = 4;
constexpr int kVecBatch = 8;  // 16-byte weight vectors in flight per lane
template <WFormat F>
__global__ void __launch_bounds__(kVecWarps * 32) router_logits_vec_kernel(RouterLogitsArgs a) {
  constexpr int kPerWord = gemv::Fmt<F>::kPerWord, kPerVec = 4 * kPerWord;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t e = int64_t(blockIdx.x) * kVecWarps + warp;
  const int64_t t0 = int64_t(blockIdx.y) * kLogitTokens;
  if (e >= a.gate.rows) return;
  const int64_t dim = a.gate.cols;
  const int nvec = int(dim / kPerVec);
  const int nt = int(a.n - t0 < kLogitTokens ? a.n - t0 : kLogitTokens);
  const uint8_t* wrow = a.gate.data + e * (dim * (F == WFormat::kF32 ? 4 : 2));
  double acc[kLogitTokens];
#pragma unroll
  for (int t = 0; t < kLogitTokens; ++t) acc[t] = 0.0;
  // The lane's vectors in batches of kVecBatch, all loads of a batch issued before any
  // product (was 2 in flight: at batch 1, 96 blocks x 128 lanes x 32 bytes in flight made
  // the 3.9 MB gate a chain of 10 HBM round trips, ~14 us a call). The products and their
  // order are unchanged (v = lane, lane + 32, ...), so are the bits.
  for (int v0 = lane; v0 < nvec; v0 += 32 * kVecBatch) {
    uint4 wb[kVecBatch];
#pragma unroll
    for (int u = 0; u < kVecBatch; ++u)
      if (v0 + 32 * u < nvec) wb[u] = gemv::load_stream(wrow + int64_t(v0 + 32 * u) * 16);
#pragma unroll
    for (int u = 0; u < kVecBatch; ++u) {
      const int v = v0 + 32 * u;
      if (v >= nvec) break;
      const uint4 wv = wb[u];
      float wf[kPerVec];
      gemv::decode_word<F>(wv.x, wf);
      gemv::decode_word<F>(wv.y, wf + kPerWord);
      gemv::decode_word<F>(wv.z, wf + 2 * kPerWord);
      gemv::decode_word<F>(wv.w, wf + 3 * kPerWord);
#pragma unroll
      for (int t = 0; t < kLogitTokens; ++t) {
        if (t >= nt) break;
        const float4* xp = reinterpret_cast<const float4*>(a.x + (t0 + t) * dim + int64_t(v) * kPerVec);
#pragma unroll
        for (int i = 0; i < kPerVec / 4; ++i) {
          const float4 xv = xp[i];
          acc[t] += double(wf[4 * i]) * double(xv.x);
          acc[t] += double(wf[4 * i + 1]) * double(xv.y);
          acc[t] += double(wf[4 * i + 2]) * double(xv.z);
          acc[t] += double(wf[4 * i + 3]) * double(xv.w);
        }
      }
    }
  }
#pragma unroll
  for (int t = 0; t < kLogitTokens; ++t) {
    const double s = warp_sum(acc[t]);
    if (lane == 0 && t < nt) a.logits[(t0 + t) * a.gate.rows + e] = float(s);
  }
}

// The same sums with kWideExperts expert rows per warp (RouterLogitsPath::kWide): at
// prefill sizes the vector kernel converts every x value to double once per expert row
// (8192 tokens x 5120 x 384 conversions per call, ~4x the DFMA work on a pipe a quarter as
// wide: ~7 ms per call at 8K tokens, run 15). Here a lane converts its x values once for
// kWideExperts rows and each weight value once for the eight tokens. Per (token, expert)
// the lane's products and their order are the vector kernel's (vectors v = lane, lane +
// 32, ...; elements 0..7 of each, one fused multiply-add each) and the warp tree is the
// same warp_sum, so the logits are the vector kernel's bits (ops case router_logits_wide_*).
constexpr int kWideExperts = 4;
template <WFormat F>
__global__ void __launch_bounds__(kVecWarps * 32) router_logits_wide_kernel(RouterLogitsArgs a) {
  constexpr int kPerWord = gemv::Fmt<F>::kPerWord, kPerVec = 4 * kPerWord;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t e0 = (int64_t(blockIdx.x) * kVecWarps + warp) * kWideExperts;
  const int64_t t0 = int64_t(blockIdx.y) * kLogitTokens;
  if (e0 >= a.gate.rows) return;
  const int ne = int(a.gate.rows - e0 < kWideExperts ? a.gate.rows - e0 : kWideExperts);
  const int64_t dim = a.gate.cols;
  const int nvec = int(dim / kPerVec);
  const int nt = int(a.n - t0 < kLogitTokens ? a.n - t0 : kLogitTokens);
  const int64_t row_bytes = dim * (F == WFormat::kF32 ? 4 : 2);
  double acc[kWideExperts][kLogitTokens];
#pragma unroll
  for (int r = 0; r < kWideExperts; ++r)
#pragma unroll
    for (int t = 0; t < kLogitTokens; ++t) acc[r][t] = 0.0;
  for (int v = lane; v < nvec; v += 32) {
    float wf[kWideExperts][kPerVec];
#pragma unroll
    for (int r = 0; r < kWideExperts; ++r) {
      uint4 wv = make_uint4(0u, 0u, 0u, 0u);  // rows past the last expert: zeros, never stored
      if (r < ne) wv = gemv::load_stream(a.gate.data + (e0 + r) * row_bytes + int64_t(v) * 16);
      gemv::decode_word<F>(wv.x, wf[r]);
      gemv::decode_word<F>(wv.y, wf[r] + kPerWord);
      gemv::decode_word<F>(wv.z, wf[r] + 2 * kPerWord);
      gemv::decode_word<F>(wv.w, wf[r] + 3 * kPerWord);
    }
#pragma unroll
    for (int i = 0; i < kPerVec / 4; ++i) {
      double xd[kLogitTokens][4];
#pragma unroll
      for (int t = 0; t < kLogitTokens; ++t) {
        float4 xv = make_float4(0.f, 0.f, 0.f, 0.f);  // tokens past the last: never stored
        if (t < nt) xv = reinterpret_cast<const float4*>(a.x + (t0 + t) * dim + int64_t(v) * kPerVec)[i];
        xd[t][0] = double(xv.x);
        xd[t][1] = double(xv.y);
        xd[t][2] = double(xv.z);
        xd[t][3] = double(xv.w);
      }
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int r = 0; r < kWideExperts; ++r) {
          const double wd = double(wf[r][4 * i + j]);
#pragma unroll
          for (int t = 0; t < kLogitTokens; ++t) acc[r][t] = __fma_rn(wd, xd[t][j], acc[r][t]);
        }
    }
  }
#pragma unroll
  for (int r = 0; r < kWideExperts; ++r)
#pragma unroll
    for (int t = 0; t < kLogitTokens; ++t) {
      const double s = warp_sum(acc[r][t]);
      if (lane == 0 && t < nt && r < ne) a.logits[(t0 + t) * a.gate.rows + e0 + r] = float(s);
    }
}

// The same logits on the FP64 tensor cores (mma.sync m8n8k4 f64, RouterLogitsPath::kDmma).
// At prefill sizes the DFMA kernels are bound by the FP64 pipe plus one f32 -> f64
// conversion per x value per expert row group (~7 ms per call at 8K tokens for the vector
// kernel, run 15); DMMA doubles the FP64 rate and feeds each converted value to four (or
// TM / 8) products. Products of bf16 / f32 operands are exact in double, so the logits
// differ from the vector kernel's only by the order of the double sums (at most one f32
// ulp after rounding; equal rows still give equal logits, so ties stay ties).
// The order, fixed for every n and every tile shape (batch-invariant):
//   - K is cut into 4 contiguous quarters; warp q of a block sums quarter q;
//   - within a quarter, groups of 32 channels in order; in group j, lane slot t holds
//     channels 32j + 8t .. 32j + 8t + 7, and step s (0..7) is one DMMA over the four
//     slots' channel 32j + 8t + s (the MMA's own k = 4 sum, then the accumulate);
//   - logit = float(((q0 + q1) + q2) + q3).
// A block = 4 warps (the quarters) x a tile of TM tokens x TE experts: 8 x 8 for n <= 64
// (48 blocks at n = 1, loads of four groups in flight per warp), 32 x 32 otherwise (each
// converted value feeds four DMMAs); the tile shape does not enter the order above.
constexpr int kDmmaQuarters = 4;

__device__ __forceinline__ void dmma_8x8x4(double (&c)[2], double a, double b) {
  asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
               : "+d"(c[0]), "+d"(c[1])
               : "d"(a), "d"(b));
}

// One warp's operands of a DMMA tile (TM tokens x TE experts) from one lane channel base
// k0 (a piece's first channel + 8 t): raw 16-byte loads of one 32-channel group straight into
// fragments, and the group's eight DMMA steps (step s: channel 8 t + s of the group).
template <WFormat F, int TM, int TE>
struct DmmaOperands {
  static constexpr int kMt = TM / 8, kNt = TE / 8;
  static constexpr int kElem = F == WFormat::kF32 ? 4 : 2;
  static constexpr int kWVec = F == WFormat::kF32 ? 2 : 1;
  struct Raw {
    float4 x[kMt][2];
    uint4 w[kNt][kWVec];
  };
  using Acc = double[kMt][kNt][2];
  const float* xr[kMt];
  bool xok[kMt];
  const uint8_t* wr[kNt];
  bool wok[kNt];
  __device__ __forceinline__ DmmaOperands(const RouterLogitsArgs& a, int64_t t0, int64_t e0, int64_t k0, int g) {
    const int64_t dim = a.gate.cols;
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      const int64_t tok = t0 + 8 * i + g;
      xok[i] = tok < a.n;
      xr[i] = a.x + (xok[i] ? tok : 0) * dim + k0;
    }
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
      const int64_t e = e0 + 8 * j + g;
      wok[j] = e < a.gate.rows;
      wr[j] = a.gate.data + ((wok[j] ? e : 0) * dim + k0) * kElem;
    }
  }
  __device__ __forceinline__ void load(int64_t k, Raw& r) const {
#pragma unroll
    for (int i = 0; i < kMt; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h)  // tokens past n: zeros, never stored
        r.x[i][h] = xok[i] ? *reinterpret_cast<const float4*>(xr[i] + k + 4 * h) : make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int j = 0; j < kNt; ++j)
#pragma unroll
      for (int h = 0; h < kWVec; ++h)
        r.w[j][h] = wok[j] ? *reinterpret_cast<const uint4*>(wr[j] + k * kElem + 16 * h) : make_uint4(0u, 0u, 0u, 0u);
  }
  __device__ __forceinline__ static void multiply(const Raw& r, Acc& acc) {
    float xf[kMt][8], wf[kNt][8];
#pragma unroll
    for (int i = 0; i < kMt; ++i) {
      const float4 u = r.x[i][0], v = r.x[i][1];
      xf[i][0] = u.x, xf[i][1] = u.y, xf[i][2] = u.z, xf[i][3] = u.w;
      xf[i][4] = v.x, xf[i][5] = v.y, xf[i][6] = v.z, xf[i][7] = v.w;
    }
#pragma unroll
    for (int j = 0; j < kNt; ++j) {
      if constexpr (F == WFormat::kF32) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const uint4 u = r.w[j][h];
          wf[j][4 * h] = __uint_as_float(u.x), wf[j][4 * h + 1] = __uint_as_float(u.y);
          wf[j][4 * h + 2] = __uint_as_float(u.z), wf[j][4 * h + 3] = __uint_as_float(u.w);
        }
      } else {
        gemv::decode_word<F>(r.w[j][0].x, wf[j]);
        gemv::decode_word<F>(r.w[j][0].y, wf[j] + 2);
        gemv::decode_word<F>(r.w[j][0].z, wf[j] + 4);
        gemv::decode_word<F>(r.w[j][0].w, wf[j] + 6);
      }
    }
#pragma unroll
    for (int s = 0; s < 8; ++s) {
      double xd[kMt], wd[kNt];
#pragma unroll
      for (int i = 0; i < kMt; ++i) xd[i] = double(xf[i][s]);
#pragma unroll
      for (int j = 0; j < kNt; ++j) wd[j] = double(wf[j][s]);
#pragma unroll
      for (int i = 0; i < kMt; ++i)
#pragma unroll
        for (int j = 0; j < kNt; ++j) dmma_8x8x4(acc[i][j], xd[i], wd[j]);
    }
  }
  // The DMMA chain over channels [kb, kb + len) past k0 (len a multiple of 32), in group
  // order. kAhead > 0: that many groups of loads in flight (the small tile: at n = 1 a warp's
  // groups would otherwise wait on serial L2 / HBM round trips); 0: one group at a time (the
  // big tile has 16 independent DMMAs per step instead).
  template <int kAhead>
  __device__ __forceinline__ void chain(int64_t kb, int64_t len, Acc& acc) const {
    if constexpr (kAhead > 0) {
      Raw buf[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; ++u)
        if (32 * u < len) load(kb + 32 * u, buf[u]);
      for (int64_t k = 0; k < len; k += 32 * kAhead) {
#pragma unroll
        for (int u = 0; u < kAhead; ++u) {
          if (k + 32 * u >= len) break;
          multiply(buf[u], acc);
          const int64_t kn = k + 32 * (u + kAhead);
          if (kn < len) load(kb + kn, buf[u]);
        }
      }
    } else {
      for (int64_t k = 0; k < len; k += 32) {
        Raw r;
        load(kb + k, r);
        multiply(r, acc);
      }
    }
  }
};

// kAhead: 32-channel groups a small-tile warp keeps in flight (registers). 4 (kDmma); 10
// (kDmmaDeep, n <= 8): run 25's ncu put the n = 1 kernel at 14.2 us for 3.9 MB (0.28 TB/s):
// 192 warps x 4 groups x 512 B is ~0.4 MB in flight, so each warp's 40 groups still wait
// ~10 load round trips; 10 ahead leaves ~4, and the 320-step DMMA chain per warp (~4 us)
// becomes the floor. The order of the sums is the same for every kAhead (bitwise kDmma).
// Run r1 measured 27 us per call at n = 1 with one group in flight, run 25 14.2 us with four.
template <WFormat F, int TM, int TE, int kAhead = 4>
__global__ void __launch_bounds__(kDmmaQuarters * 32) router_logits_dmma_kernel(RouterLogitsArgs a) {
  using Ops = DmmaOperands<F, TM, TE>;
  constexpr int kMt = Ops::kMt, kNt = Ops::kNt;
  __shared__ double part[kDmmaQuarters - 1][TM * TE];
  const int q = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int64_t e0 = int64_t(blockIdx.x) * TE, t0 = int64_t(blockIdx.y) * TM;
  const int64_t quarter = a.gate.cols / kDmmaQuarters;
  const Ops ops(a, t0, e0, q * quarter + 8 * t, g);
  double acc[kMt][kNt][2];
#pragma unroll
  for (int i = 0; i < kMt; ++i)
#pragma unroll
    for (int j = 0; j < kNt; ++j) acc[i][j][0] = acc[i][j][1] = 0.0;
  ops.template chain<TM == 8 ? kAhead : 0>(0, quarter, acc);
  // Accumulator (i, j, c) of a lane: token 8i + g, expert 8j + 2t + c of the tile.
  if (q > 0) {
#pragma unroll
    for (int i = 0; i < kMt; ++i)
#pragma unroll
      for (int j = 0; j < kNt; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) part[q - 1][(8 * i + g) * TE + 8 * j + 2 * t + c] = acc[i][j][c];
  }
  __syncthreads();
  if (q != 0) return;
#pragma unroll
  for (int i = 0; i < kMt; ++i)
#pragma unroll
    for (int j = 0; j < kNt; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int r = (8 * i + g) * TE + 8 * j + 2 * t + c;
        const int64_t tok = t0 + 8 * i + g, e = e0 + 8 * j + 2 * t + c;
        const double v = ((acc[i][j][c] + part[0][r]) + part[1][r]) + part[2][r];
        if (tok < a.n && e < a.gate.rows) a.logits[tok * a.gate.rows + e] = float(v);
      }
}

// RouterLogitsPath::kDmmaSplit: a second fixed order with a 4x shorter dependent chain, the
// same for every n and both tile shapes (batch-invariant; other low bits than kDmma):
//   - K is cut into 16 contiguous pieces (dim % 512 == 0); piece p is summed as a kDmma
//     quarter is (32-channel groups in order; step s of group j: channel 32j + 8t + s);
//   - quarter q = ((p[4q] + p[4q + 1]) + p[4q + 2]) + p[4q + 3];
//   - logit = float(((q0 + q1) + q2) + q3).
// Why: NOTES 28's ncu of kDmmaDeep at n = 1 (11.4 us; issue 4.9%, DRAM 6.9%) is each warp's
// 320-DMMA chain (40 groups x 8 steps, ~3000 dependent instructions) on 48 SMs of one warp
// per scheduler. Here the small tile (n <= 64) gives each piece its own warp: 16 warps per
// block, an 80-step chain each, four warps per scheduler to hide each other's latency. The big
// tile (n > 64) keeps 4 warps (16 DMMAs per step already) and walks its quarter's 4 pieces in
// order, folding each into a running total kept in shared memory (its lane's own slots: no
// barrier; registers stay those of kDmma's big tile).
// kWarpsPerQuarter: 4 (small tile, one piece per warp) or 1 (big tile, four in a row).
constexpr int kSplitPieces = 4;  // pieces per quarter
template <WFormat F, int TM, int TE, int kWarpsPerQuarter, int kAhead>
__global__ void __launch_bounds__(kDmmaQuarters * kWarpsPerQuarter * 32)
    router_logits_split_kernel(RouterLogitsArgs a) {
  pdl_trigger();  // the lean plan (moe_plan_set_lean) may start; it reads the logits after pdl_wait
  using Ops = DmmaOperands<F, TM, TE>;
  constexpr int kMt = Ops::kMt, kNt = Ops::kNt;
  constexpr int kWarps = kDmmaQuarters * kWarpsPerQuarter, kSeq = kSplitPieces / kWarpsPerQuarter;
  static_assert(kSplitPieces % kWarpsPerQuarter == 0, "pieces split evenly over a quarter's warps");
  __shared__ double part[kWarps][TM * TE];  // warp w's piece sum (kSeq = 1) or quarter total (kSeq = 4)
  const int w = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int q = w / kWarpsPerQuarter;
  const int64_t e0 = int64_t(blockIdx.x) * TE, t0 = int64_t(blockIdx.y) * TM;
  const int64_t piece = a.gate.cols / (kDmmaQuarters * kSplitPieces);
  const int p0 = q * kSplitPieces + (w % kWarpsPerQuarter) * kSeq;  // this warp's first piece
  const Ops ops(a, t0, e0, p0 * piece + 8 * t, g);
  double acc[kMt][kNt][2];
#pragma unroll 1  // the big tile's pieces one after another (unrolled: 252 registers, 2 blocks per SM)
  for (int u = 0; u < kSeq; ++u) {
#pragma unroll
    for (int i = 0; i < kMt; ++i)
#pragma unroll
      for (int j = 0; j < kNt; ++j) acc[i][j][0] = acc[i][j][1] = 0.0;
    ops.template chain<kAhead>(u * piece, piece, acc);
    // Accumulator (i, j, c) of a lane: token 8i + g, expert 8j + 2t + c of the tile.
#pragma unroll
    for (int i = 0; i < kMt; ++i)
#pragma unroll
      for (int j = 0; j < kNt; ++j)
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          double& s = part[w][(8 * i + g) * TE + 8 * j + 2 * t + c];
          s = u == 0 ? acc[i][j][c] : s + acc[i][j][c];  // ((p0 + p1) + p2) + p3 in order
        }
  }
  __syncthreads();
  if (w != 0) return;
#pragma unroll
  for (int i = 0; i < kMt; ++i)
#pragma unroll
    for (int j = 0; j < kNt; ++j)
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int r = (8 * i + g) * TE + 8 * j + 2 * t + c;
        double qs[kDmmaQuarters];
#pragma unroll
        for (int qq = 0; qq < kDmmaQuarters; ++qq) {
          if constexpr (kSeq == 1) {
            const int b = qq * kSplitPieces;
            qs[qq] = ((part[b][r] + part[b + 1][r]) + part[b + 2][r]) + part[b + 3][r];
          } else {
            qs[qq] = part[qq][r];
          }
        }
        const int64_t tok = t0 + 8 * i + g, e = e0 + 8 * j + 2 * t + c;
        const double v = ((qs[0] + qs[1]) + qs[2]) + qs[3];
        if (tok < a.n && e < a.gate.rows) a.logits[tok * a.gate.rows + e] = float(v);
      }
}

// kDmma by default: run r1 of session 6 (NOTES 17), per call vs kVec: 6.6 -> 1.1 ms at 8192
// tokens, 0.19 -> 0.08 ms at 256, 0.055 -> 0.028 ms at 8.
// kDmmaDeep since NOTES 28 (the same bits; at n <= 8 ncu 14.2 -> 11.4 us per call, op -3 us).
// kDmmaSplit since session 13 (NOTES 48, run 45: its 4x shorter DMMA chain, with the pair kernel on
// the shared expert, the 7 layers at batch 1 1.668 -> 1.631 ms; alone -7 us; other low bits, within
// one f32 ulp of kVec like kDmma). DEEPINFER_ROUTER_SPLIT=0 (read once, where no setter has chosen
// a path) keeps kDmmaDeep's order.
std::atomic<int> g_router_path{-1};  // -1: not resolved yet
RouterLogitsPath current_router_path() {
  return RouterLogitsPath(resolve_env_switch(g_router_path, "DEEPINFER_ROUTER_SPLIT", 0, 1, [](const EnvDigit& e) {
    return int(e.valid && e.value == 0 ? RouterLogitsPath::kDmmaDeep : RouterLogitsPath::kDmmaSplit);
  }));
}

// One block of kSelectWarps warps per token; scores and biased scores live in shared
// memory, computed by all the block's threads (each element as before: a double
// log1p(exp) per expert, which on one warp was 12 in a row per lane at 384 experts),
// then warp 0 selects. Each of the top_k rounds is a warp argmax (larger value, then
// lower id), after which the winner is marked taken. The picks come out in the
// oracle's order (descending, ties by id), so the weight sum is formed in the same
// order too.
// kSelectWarps warps a block from 64 tokens; below, one thread per expert (up to
// kSelectMaxThreads): at batch 1 the block's three double log1p(exp) in a row per thread
// were most of the ~11 us launch. The block size changes no value (each element is
// computed alone, warp 0 selects).
constexpr int kSelectWarps = 4;
constexpr int kSelectMaxThreads = 512;
// Token t's score and biased score of expert e (each element computed alone).
__device__ __forceinline__ void select_score(const RouterSelectArgs& a, int64_t t, int e, float* score, float* biased) {
  const float z = a.logits[t * a.num_experts + e] / a.temp;
  const float sp = z > 20.0f ? z : float(log1p(exp(double(z))));
  score[e] = sqrtf(sp);
  biased[e] = score[e] + (a.bias ? a.bias[e] : 0.0f);
}

// One warp picks token t's top_k from its scores (router_select_kernel's warp 0; the
// fused plan's warp t): ids, weights to a.expert_ids / a.expert_weights.
__device__ __forceinline__ void select_pick(const RouterSelectArgs& a, int64_t t, const float* score, float* biased,
                                            int* picked, int lane) {
  const int E = int(a.num_experts);
  int64_t* ids = a.expert_ids + t * a.top_k;
  float* wts = a.expert_weights + t * a.top_k;
  for (int64_t k = 0; k < a.top_k; ++k) {
    float best = -INFINITY;
    int best_id = -1;
    for (int e = lane; e < E; e += 32) {
      const float b = biased[e];
      if (b == -INFINITY && best_id >= 0) continue;
      if (best_id < 0 || b > best) {  // ascending e per lane: '>' keeps the lower id on ties
        best = b;
        best_id = e;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ob = __shfl_xor_sync(0xffffffffu, best, o);
      const int oid = __shfl_xor_sync(0xffffffffu, best_id, o);
      const bool take = oid >= 0 && (best_id < 0 || ob > best || (ob == best && oid < best_id));
      if (take) {
        best = ob;
        best_id = oid;
      }
    }
    if (lane == 0) {
      ids[k] = best_id;
      picked[k] = best_id;
      biased[best_id] = -INFINITY;  // taken; remaining ties still resolve by id
    }
    __syncwarp();
  }
  if (lane != 0) return;
  // Taken experts were overwritten in `biased`, but their ids are in `picked`.
  float sum = 0.0f;
  for (int64_t k = 0; k < a.top_k; ++k) sum += score[picked[k]];
  for (int64_t k = 0; k < a.top_k; ++k) {
    float w = score[picked[k]];
    if (a.norm_topk_prob && a.top_k > 1) w = w / (sum + 1e-20f);
    wts[k] = w * a.routed_scaling_factor;
  }
}

// The lean plan's pick (moe_plan_set_lean, NOTES 48): token t's top_k exactly as select_pick
// picks them (larger biased score, then lower id; the weight sum in the same order, the same
// float operations), with the lane's kPer = E / 32 biased scores held in registers as
// order-preserving keys. A round is a lane-local max over registers, one warp max of the key
// (redux.sync) and one warp min of the ids that hold it, where select_pick sweeps shared
// memory and runs a 5-step shuffle tree per round (~850 clocks a round by count; six rounds
// at batch 1). The weights are formed by lanes 0..top_k-1 at once. The picks' ids and weights
// also go to shared memory (picked, wsm) for the plan's placement. Differs from select_pick
// only when fewer than top_k experts have a biased score above -inf or a score is NaN
// (select_pick may then pick a taken expert again). E <= 32 kPer, top_k <= 32.
template <int kPer>
__device__ __forceinline__ void select_pick_regs(const RouterSelectArgs& a, int64_t t, const float* score,
                                                 const float* biased, int* picked, float* wsm, int lane) {
  const int E = int(a.num_experts), K = int(a.top_k);
  uint32_t key[kPer];  // 0: no expert / taken; -0 keyed as +0 (select_pick's '>' ties them)
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    const int e = lane + 32 * j;
    key[j] = 0u;
    if (e < E) {
      const uint32_t b = __float_as_uint(biased[e] + 0.0f);
      key[j] = max(1u, (b & 0x80000000u) ? ~b : (b | 0x80000000u));
    }
  }
  for (int k = 0; k < K; ++k) {
    uint32_t bk = 0u;
    int bj = 0;
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      if (key[j] > bk) bk = key[j], bj = j;  // ascending id per lane: '>' keeps the lower id on ties
    const uint32_t wk = __reduce_max_sync(0xffffffffu, bk);
    const uint32_t win = __reduce_min_sync(0xffffffffu, bk == wk ? uint32_t(lane + 32 * bj) : 0xffffffffu);
#pragma unroll
    for (int j = 0; j < kPer; ++j)
      if (uint32_t(lane + 32 * j) == win) key[j] = 0u;  // taken
    if (lane == 0) picked[k] = int(win);
  }
  __syncwarp();
  const float s = lane < K ? score[picked[lane]] : 0.0f;
  float sum = 0.0f;
  for (int k = 0; k < K; ++k) sum += __shfl_sync(0xffffffffu, s, k);  // select_pick's order
  if (lane < K) {
    float w = s;
    if (a.norm_topk_prob && K > 1) w = w / (sum + 1e-20f);
    w = w * a.routed_scaling_factor;
    a.expert_ids[t * K + lane] = picked[lane];
    a.expert_weights[t * K + lane] = w;
    wsm[lane] = w;
  }
}
constexpr int kLeanPickPer = 12;  // select_pick_regs at E <= 384 (V4.1: 384 experts)

__global__ void __launch_bounds__(kSelectMaxThreads) router_select_kernel(RouterSelectArgs a) {
  extern __shared__ float sm[];
  const int64_t t = blockIdx.x;
  const int E = int(a.num_experts);
  float* score = sm;
  float* biased = sm + E;
  int* picked = reinterpret_cast<int*>(sm + 2 * E);  // [top_k]: lane 0 reads them back, not from HBM
  for (int e = threadIdx.x; e < E; e += blockDim.x) select_score(a, t, e, score, biased);
  __syncthreads();
  if (threadIdx.x >= 32) return;
  select_pick(a, t, score, biased, picked, threadIdx.x);
}

__global__ void swiglu_act_kernel(SwigluActArgs a) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.n * a.inter) return;
  a.gate[idx] = moe_terms::swiglu(a.gate[idx], a.up[idx], a.limit, a.route_weight ? a.route_weight[idx / a.inter] : 0.0f,
                                  a.route_weight != nullptr);
}

}  // namespace

cudaError_t router_logits(const RouterLogitsArgs& a, cudaStream_t stream) {
  if (!weight_args_valid(a.gate) || a.n < 0) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.x || !a.logits) return cudaErrorInvalidValue;
  const int64_t gy = (a.n + kLogitTokens - 1) / kLogitTokens;
  if (gy > 65535) return cudaErrorInvalidValue;
  const WeightArgs& w = a.gate;
  const RouterLogitsPath path = current_router_path();
  const int per_vec = w.format == WFormat::kF32 ? 4 : 8;
  const bool vec = w.scale_format == SFormat::kNone &&
                   (w.format == WFormat::kF32 || w.format == WFormat::kBF16 || w.format == WFormat::kF16) &&
                   w.cols % per_vec == 0 && reinterpret_cast<uintptr_t>(w.data) % 16 == 0 &&
                   reinterpret_cast<uintptr_t>(a.x) % 16 == 0;
  // DMMA: K quarters of whole 32-channel groups; 16-byte row starts for the vector loads.
  const bool dmma = vec && w.cols % (kDmmaQuarters * 32) == 0 && (w.cols * (w.format == WFormat::kF32 ? 4 : 2)) % 16 == 0;
  if (dmma && path == RouterLogitsPath::kDmmaSplit && w.cols % (kDmmaQuarters * kSplitPieces * 32) == 0) {
    // kDmmaSplit (dims it takes; others: kDmma's order at every n): 16 warps per 8 x 8 tile
    // up to 64 tokens (five groups in flight per warp: 128 registers at 512 threads), the
    // 32 x 32 tile of 4 warps above.
    if (a.n <= 64) {
      const dim3 grid(unsigned((w.rows + 7) / 8), unsigned((a.n + 7) / 8));
      const int threads = kDmmaQuarters * kSplitPieces * 32;
      if (w.format == WFormat::kF32) router_logits_split_kernel<WFormat::kF32, 8, 8, 4, 5><<<grid, threads, 0, stream>>>(a);
      else if (w.format == WFormat::kBF16)
        router_logits_split_kernel<WFormat::kBF16, 8, 8, 4, 5><<<grid, threads, 0, stream>>>(a);
      else router_logits_split_kernel<WFormat::kF16, 8, 8, 4, 5><<<grid, threads, 0, stream>>>(a);
    } else {
      const dim3 grid(unsigned((w.rows + 31) / 32), unsigned((a.n + 31) / 32));
      const int threads = kDmmaQuarters * 32;
      if (w.format == WFormat::kF32) router_logits_split_kernel<WFormat::kF32, 32, 32, 1, 0><<<grid, threads, 0, stream>>>(a);
      else if (w.format == WFormat::kBF16)
        router_logits_split_kernel<WFormat::kBF16, 32, 32, 1, 0><<<grid, threads, 0, stream>>>(a);
      else router_logits_split_kernel<WFormat::kF16, 32, 32, 1, 0><<<grid, threads, 0, stream>>>(a);
    }
    return cudaGetLastError();
  }
  if (dmma && path == RouterLogitsPath::kDmmaDeep && a.n <= 8) {
    // One 8-token row of blocks; ten groups in flight per warp (same order as kDmma).
    const dim3 grid(unsigned((w.rows + 7) / 8), 1u);
    const int threads = kDmmaQuarters * 32;
    if (w.format == WFormat::kF32) router_logits_dmma_kernel<WFormat::kF32, 8, 8, 10><<<grid, threads, 0, stream>>>(a);
    else if (w.format == WFormat::kBF16)
      router_logits_dmma_kernel<WFormat::kBF16, 8, 8, 10><<<grid, threads, 0, stream>>>(a);
    else router_logits_dmma_kernel<WFormat::kF16, 8, 8, 10><<<grid, threads, 0, stream>>>(a);
    return cudaGetLastError();
  }
  if (dmma && (path == RouterLogitsPath::kDmma || path == RouterLogitsPath::kDmmaDeep ||
               path == RouterLogitsPath::kDmmaSplit)) {
    const bool small = a.n <= 64;
    const int64_t tile = small ? 8 : 32;  // tokens and experts per block
    const dim3 grid(unsigned((w.rows + tile - 1) / tile), unsigned((a.n + tile - 1) / tile));
    const int threads = kDmmaQuarters * 32;
    if (w.format == WFormat::kF32) {
      if (small) router_logits_dmma_kernel<WFormat::kF32, 8, 8><<<grid, threads, 0, stream>>>(a);
      else router_logits_dmma_kernel<WFormat::kF32, 32, 32><<<grid, threads, 0, stream>>>(a);
    } else if (w.format == WFormat::kBF16) {
      if (small) router_logits_dmma_kernel<WFormat::kBF16, 8, 8><<<grid, threads, 0, stream>>>(a);
      else router_logits_dmma_kernel<WFormat::kBF16, 32, 32><<<grid, threads, 0, stream>>>(a);
    } else {
      if (small) router_logits_dmma_kernel<WFormat::kF16, 8, 8><<<grid, threads, 0, stream>>>(a);
      else router_logits_dmma_kernel<WFormat::kF16, 32, 32><<<grid, threads, 0, stream>>>(a);
    }
    return cudaGetLastError();
  }
  if (vec && path == RouterLogitsPath::kWide) {
    const int64_t per_block = int64_t(kVecWarps) * kWideExperts;
    const dim3 grid(unsigned((w.rows + per_block - 1) / per_block), unsigned(gy));
    if (w.format == WFormat::kF32) router_logits_wide_kernel<WFormat::kF32><<<grid, kVecWarps * 32, 0, stream>>>(a);
    else if (w.format == WFormat::kBF16) router_logits_wide_kernel<WFormat::kBF16><<<grid, kVecWarps * 32, 0, stream>>>(a);
    else router_logits_wide_kernel<WFormat::kF16><<<grid, kVecWarps * 32, 0, stream>>>(a);
    return cudaGetLastError();
  }
  if (vec) {
    const dim3 grid(unsigned((w.rows + kVecWarps - 1) / kVecWarps), unsigned(gy));
    if (w.format == WFormat::kF32) router_logits_vec_kernel<WFormat::kF32><<<grid, kVecWarps * 32, 0, stream>>>(a);
    else if (w.format == WFormat::kBF16) router_logits_vec_kernel<WFormat::kBF16><<<grid, kVecWarps * 32, 0, stream>>>(a);
    else router_logits_vec_kernel<WFormat::kF16><<<grid, kVecWarps * 32, 0, stream>>>(a);
    return cudaGetLastError();
  }
  const dim3 grid(unsigned((a.gate.rows + kLogitWarps - 1) / kLogitWarps), unsigned(gy));
  router_logits_kernel<<<grid, kLogitWarps * 32, 0, stream>>>(a);
  return cudaGetLastError();
}

void router_logits_set_path(RouterLogitsPath p) { g_router_path = int(p); }
RouterLogitsPath router_logits_path() { return current_router_path(); }

cudaError_t router_select(const RouterSelectArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.num_experts <= 0 || a.num_experts > 4096 || a.top_k < 1 || a.top_k > a.num_experts ||
      a.n > INT32_MAX)
    return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.logits || !a.expert_ids || !a.expert_weights) return cudaErrorInvalidValue;
  const int threads =
      a.n <= 64 ? int(std::min<int64_t>(kSelectMaxThreads, (a.num_experts + 31) / 32 * 32)) : kSelectWarps * 32;
  router_select_kernel<<<unsigned(a.n), unsigned(std::max(threads, kSelectWarps * 32)),
                         2 * sizeof(float) * size_t(a.num_experts) + sizeof(int) * size_t(a.top_k), stream>>>(a);
  return cudaGetLastError();
}

cudaError_t swiglu_act(const SwigluActArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.inter <= 0) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.gate || !a.up) return cudaErrorInvalidValue;
  swiglu_act_kernel<<<grid_1d(a.n * a.inter, 256), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

// ---------------------------------------------------------------------------
// Device-routed grouped MoE (smxx_moe.cuh).
// ---------------------------------------------------------------------------
namespace {

constexpr int kPlanChunk = 256;    // assignments per histogram / placement block
constexpr int kScanThreads = 1024;
constexpr int kMoeWarps = 8;
constexpr int kMoeWRows = 4;       // weight rows per warp (stage 1: two w1 + two w3 rows)

// Chunk c's per-expert histogram into chunk_base[c, :]. Counting with shared atomics
// is order-free; positions come from the placement kernel.
// Blocks past the histogram's chunks (the grid is the larger of the two counts) only
// split: x -> bf16 planes for moe_tc (a.split_x, optional), four values per thread,
// the same function as moe_split_terms.
__global__ void __launch_bounds__(kPlanChunk) moe_hist_kernel(MoePlanArgs a, int64_t chunks) {
  extern __shared__ int32_t hist[];
  if (a.split_x) {
    const int64_t i = (int64_t(blockIdx.x) * kPlanChunk + threadIdx.x) * 4;
    if (i < a.split_count) {
      if (a.split_terms == 1) moe_terms::split4<1>(a.split_x, a.split_out, a.split_count, i);
      else moe_terms::split4<3>(a.split_x, a.split_out, a.split_count, i);
    }
  }
  if (int64_t(blockIdx.x) >= chunks) return;  // block-uniform
  const int E = a.num_experts;
  for (int e = threadIdx.x; e < E; e += blockDim.x) hist[e] = 0;
  __syncthreads();
  const int64_t total = int64_t(a.n) * a.k;
  const int64_t i = int64_t(blockIdx.x) * kPlanChunk + threadIdx.x;
  if (i < total) {
    const int64_t e = a.expert_ids[i];
    if (e >= 0 && e < E) atomicAdd(&hist[e], 1);
  }
  __syncthreads();
  int32_t* out = a.chunk_base + int64_t(blockIdx.x) * E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) out[e] = hist[e];
}

// In-place exclusive scan of s[0, E) by a block of kScanThreads (E <= 4 x that);
// returns the total. part: kScanThreads ints of shared scratch.
__device__ int32_t block_exclusive_scan(int32_t* s, int E, int32_t* part) {
  const int tid = threadIdx.x, per = (E + kScanThreads - 1) / kScanThreads, b = tid * per;
  int32_t sum = 0;
  for (int i = 0; i < per; ++i)
    if (b + i < E) sum += s[b + i];
  part[tid] = sum;
  __syncthreads();
  for (int o = 1; o < kScanThreads; o <<= 1) {
    const int32_t v = tid >= o ? part[tid - o] : 0;
    __syncthreads();
    part[tid] += v;
    __syncthreads();
  }
  int32_t run = part[tid] - sum;
  const int32_t total = part[kScanThreads - 1];
  for (int i = 0; i < per; ++i)
    if (b + i < E) {
      const int32_t v = s[b + i];
      s[b + i] = run;
      run += v;
    }
  __syncthreads();
  return total;
}

// Expert e's tiles for its `run` rows: big tiles above the big threshold, else small ones.
__device__ __forceinline__ void tile_counts(const MoePlanArgs& a, int32_t run, int32_t& nsmall, int32_t& nbig) {
  const bool big = run > a.big_threshold;
  nsmall = big ? 0 : (run + a.small_rows - 1) / a.small_rows;
  nbig = big ? (run + a.big_rows - 1) / a.big_rows : 0;
}

// The plan's second half, shared by the scan kernel and the one-launch plan: with cnt,
// nsmall and nbig holding every expert's rows and tile counts (a.counts[e] written by the
// thread that handles e here), the three block scans (cnt becomes the experts' row
// offsets), the offsets, both tile lists in expert order and the totals.
__device__ __forceinline__ void plan_tiles(const MoePlanArgs& a, int32_t* cnt, int32_t* nsmall, int32_t* nbig,
                                           int32_t* part) {
  const int E = a.num_experts;
  const int32_t rows_total = block_exclusive_scan(cnt, E, part);
  const int32_t small_total = block_exclusive_scan(nsmall, E, part);
  const int32_t big_total = block_exclusive_scan(nbig, E, part);
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    const int32_t c = a.counts[e], off = cnt[e];  // counts[e]: written by this thread before
    a.offsets[e] = off;
    if (c > a.big_threshold) {
      for (int32_t r = 0; r < c; r += a.big_rows)
        a.big_tiles[nbig[e] + r / a.big_rows] = {e, off + r, min(a.big_rows, c - r), 0};
    } else {
      for (int32_t r = 0; r < c; r += a.small_rows)
        a.small_tiles[nsmall[e] + r / a.small_rows] = {e, off + r, min(a.small_rows, c - r), 0};
    }
  }
  if (threadIdx.x == 0) {
    a.offsets[E] = rows_total;
    a.num_tiles[0] = small_total;
    a.num_tiles[1] = big_total;
  }
}

// One block: chunk histograms -> each chunk's base inside its expert's run (a column
// scan over chunks), counts, offsets, and the two tile lists in expert order.
__global__ void __launch_bounds__(kScanThreads) moe_scan_kernel(MoePlanArgs a, int chunks) {
  extern __shared__ int32_t scan_sm[];
  const int E = a.num_experts;
  // moe_tc_fused's counters start at zero (stream order: this launch finishes first).
  for (int64_t i = threadIdx.x; i < a.sync_count; i += blockDim.x) a.sync[i] = 0;
  int32_t* cnt = scan_sm;
  int32_t* nsmall = scan_sm + E;
  int32_t* nbig = scan_sm + 2 * E;
  int32_t* part = scan_sm + 3 * E;
  for (int e = threadIdx.x; e < E; e += blockDim.x) {
    int32_t run = 0;
#pragma unroll 4
    for (int c = 0; c < chunks; ++c) {
      int32_t* p = a.chunk_base + int64_t(c) * E + e;
      const int32_t v = *p;
      *p = run;
      run += v;
    }
    cnt[e] = run;
    a.counts[e] = run;
    tile_counts(a, run, nsmall[e], nbig[e]);
  }
  __syncthreads();
  plan_tiles(a, cnt, nsmall, nbig, part);
}

// Assignment i = (token i / k, slot i % k) goes to row offsets[e] + (rows of e in
// earlier chunks) + (earlier assignments of e in this chunk): ascending (token, slot)
// inside each expert's run, independent of scheduling.
__global__ void __launch_bounds__(kPlanChunk) moe_place_kernel(MoePlanArgs a) {
  __shared__ int32_t ids[kPlanChunk];
  const int E = a.num_experts;
  const int64_t total = int64_t(a.n) * a.k;
  const int64_t i = int64_t(blockIdx.x) * kPlanChunk + threadIdx.x;
  int32_t e = -1;
  if (i < total) {
    const int64_t v = a.expert_ids[i];
    e = v >= 0 && v < E ? int32_t(v) : -1;
  }
  ids[threadIdx.x] = e;
  __syncthreads();
  if (i >= total) return;
  if (e < 0) {
    a.slot_row[i] = -1;
    return;
  }
  int32_t rank = 0;
  for (int j = 0; j < int(threadIdx.x); ++j) rank += ids[j] == e;
  const int32_t p = a.offsets[e] + a.chunk_base[int64_t(blockIdx.x) * E + e] + rank;
  a.row_token[p] = int32_t(i / a.k);
  a.row_weight[p] = a.expert_weights[i];
  a.slot_row[i] = p;
}

// Batches of at most kPlanOneMax assignments: the whole plan in one launch. Block 0
// counts with shared atomics (order-free), runs the scan kernel's three block scans and
// writes the same counts, offsets and tile lists, then places assignment i at row
// offsets[e] + #{j < i : ids[j] = e}: the row hist + scan + place give it (rows of e in
// earlier chunks + its rank in its chunk), so every output is the same. Blocks 1.. only
// split x (as moe_hist_kernel's extra blocks). Three launches -> one at decode sizes,
// where each launch is a few us of a ~50 us op (NOTES "MoE decode tiles").
constexpr int kPlanOneMax = kMoePlanOneMax;
__global__ void __launch_bounds__(kScanThreads) moe_plan_one_kernel(MoePlanArgs a) {
  if (blockIdx.x > 0) {
    const int64_t i = (int64_t(blockIdx.x - 1) * kScanThreads + threadIdx.x) * 4;
    if (i < a.split_count) {
      if (a.split_terms == 1) moe_terms::split4<1>(a.split_x, a.split_out, a.split_count, i);
      else moe_terms::split4<3>(a.split_x, a.split_out, a.split_count, i);
    }
    return;
  }
  extern __shared__ int32_t one_sm[];
  const int E = a.num_experts, total = a.n * a.k, tid = threadIdx.x;
  for (int64_t i = tid; i < a.sync_count; i += blockDim.x) a.sync[i] = 0;
  int32_t* cnt = one_sm;
  int32_t* nsmall = one_sm + E;
  int32_t* nbig = one_sm + 2 * E;
  int32_t* part = one_sm + 3 * E;
  int32_t* ids = part + kScanThreads;  // [kPlanOneMax]
  if (a.select.logits) {
    // The router's selection first (moe_plan_select): every (token, expert) score as
    // router_select_kernel computes it, then warp t picks token t (n <= 32 warps), writing
    // a.select's ids / weights, which are this plan's expert_ids / expert_weights: the
    // block's barrier makes those global writes visible to the reads below.
    float* sel = reinterpret_cast<float*>(ids + kPlanOneMax);  // [n][2 E] scores | biased, then [n][top_k] picks
    const int64_t n = a.select.n;
    for (int64_t i = tid; i < n * E; i += blockDim.x) {
      const int64_t t = i / E;
      select_score(a.select, t, int(i % E), sel + t * 2 * E, sel + t * 2 * E + E);
    }
    __syncthreads();
    const int w = tid >> 5;
    if (w < n)
      select_pick(a.select, w, sel + int64_t(w) * 2 * E, sel + int64_t(w) * 2 * E + E,
                  reinterpret_cast<int*>(sel + n * 2 * E) + int64_t(w) * a.select.top_k, tid & 31);
    __syncthreads();
  }
  for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0;
  for (int i = tid; i < total; i += blockDim.x) {
    const int64_t v = a.expert_ids[i];
    ids[i] = v >= 0 && v < E ? int32_t(v) : -1;
  }
  __syncthreads();
  for (int i = tid; i < total; i += blockDim.x)
    if (ids[i] >= 0) atomicAdd(&cnt[ids[i]], 1);
  __syncthreads();
  for (int e = tid; e < E; e += blockDim.x) {
    const int32_t run = cnt[e];
    a.counts[e] = run;
    tile_counts(a, run, nsmall[e], nbig[e]);
  }
  __syncthreads();
  plan_tiles(a, cnt, nsmall, nbig, part);
  for (int i = tid; i < total; i += blockDim.x) {
    const int32_t e = ids[i];
    if (e < 0) {
      a.slot_row[i] = -1;
      continue;
    }
    int32_t rank = 0;
    for (int j = 0; j < i; ++j) rank += ids[j] == e;
    const int32_t p = cnt[e] + rank;
    a.row_token[p] = int32_t(i / a.k);
    a.row_weight[p] = a.expert_weights[i];
    a.slot_row[i] = p;
  }
}

// The one-launch plan with one expert per thread (moe_plan_set_fast; E <= blockDim.x <=
// 1024). Why: run 25's ncu timed moe_plan_one_kernel (with the selection) at 13.9 us for
// 6 assignments; its three block scans are Hillis-Steele passes over 1024 slots with two
// block barriers per step (66 barriers of 32 warps), plus the barriers around them. Here
// thread e holds expert e's rows and tile counts, and the three exclusive scans run at once
// as warp shuffles plus one pass over the <= 32 warp totals: 2 barriers instead of ~70, and a
// block of only max(E, 32 n) threads. Integer sums in any order are exact, so counts,
// offsets, tile lists, totals and the placement are moe_plan_one_kernel's (the selection
// is the same select_score / select_pick). Blocks 1.. split x as there.
// kLean (moe_plan_set_lean, NOTES 48; the fused selection with E <= 384, top_k <= 32 only):
// select_pick_regs instead of select_pick, the assignments' ids and weights read back from
// shared memory rather than from global (two L2 round trips of block 0's serial chain), and the
// launch with PDL after the router (kDmmaSplit's kernel lets it start at once; block 0 waits
// for the logits in pdl_wait; blocks 1.. split x, which the kernels before the router wrote).
// The same outputs.
template <bool kLean>
__global__ void __launch_bounds__(kScanThreads) moe_plan_fast_kernel(MoePlanArgs a) {
  if (blockIdx.x > 0) {
    const int64_t i = (int64_t(blockIdx.x - 1) * blockDim.x + threadIdx.x) * 4;
    if (i < a.split_count) {
      if (a.split_terms == 1) moe_terms::split4<1>(a.split_x, a.split_out, a.split_count, i);
      else moe_terms::split4<3>(a.split_x, a.split_out, a.split_count, i);
    }
    return;
  }
  extern __shared__ int32_t fast_sm[];
  const int E = a.num_experts, total = a.n * a.k, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int warps = int(blockDim.x >> 5);
  for (int64_t i = tid; i < a.sync_count; i += blockDim.x) a.sync[i] = 0;
  int32_t* cnt = fast_sm;                // [E]: rows, then row offsets
  int32_t* ids = cnt + E;                // [kPlanOneMax]
  int32_t* wsum = ids + kPlanOneMax;     // [3][32] warp totals (then their exclusive scans), [3] totals
  const int* picks = nullptr;            // kLean: [n][top_k] picked ids, then [n][top_k] weights
  const float* pick_w = nullptr;
  if constexpr (kLean) pdl_wait();       // the router's logits
  if (a.select.logits) {  // as moe_plan_one_kernel
    float* sel = reinterpret_cast<float*>(wsum + 3 * 32 + 4);
    const int64_t n = a.select.n;
    for (int64_t i = tid; i < n * E; i += blockDim.x) {
      const int64_t t = i / E;
      select_score(a.select, t, int(i % E), sel + t * 2 * E, sel + t * 2 * E + E);
    }
    __syncthreads();
    int* pk = reinterpret_cast<int*>(sel + n * 2 * E);
    if (warp < n) {
      if constexpr (kLean) {
        select_pick_regs<kLeanPickPer>(a.select, warp, sel + int64_t(warp) * 2 * E, sel + int64_t(warp) * 2 * E + E,
                                       pk + int64_t(warp) * a.select.top_k,
                                       reinterpret_cast<float*>(pk + n * a.select.top_k) + int64_t(warp) * a.select.top_k,
                                       lane);
      } else {
        select_pick(a.select, warp, sel + int64_t(warp) * 2 * E, sel + int64_t(warp) * 2 * E + E,
                    pk + int64_t(warp) * a.select.top_k, lane);
      }
    }
    if constexpr (kLean) picks = pk, pick_w = reinterpret_cast<const float*>(pk + n * a.select.top_k);
    __syncthreads();
  }
  for (int e = tid; e < E; e += blockDim.x) cnt[e] = 0;
  for (int i = tid; i < total; i += blockDim.x) {
    const int64_t v = kLean ? int64_t(picks[i]) : a.expert_ids[i];
    ids[i] = v >= 0 && v < E ? int32_t(v) : -1;
  }
  __syncthreads();
  for (int i = tid; i < total; i += blockDim.x)
    if (ids[i] >= 0) atomicAdd(&cnt[ids[i]], 1);
  __syncthreads();
  int32_t c = 0, ns = 0, nb = 0;
  if (tid < E) {
    c = cnt[tid];
    a.counts[tid] = c;
    tile_counts(a, c, ns, nb);
  }
  int32_t ic = c, is = ns, ib = nb;  // inclusive warp scans
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t uc = __shfl_up_sync(0xffffffffu, ic, o), us = __shfl_up_sync(0xffffffffu, is, o),
                  ub = __shfl_up_sync(0xffffffffu, ib, o);
    if (lane >= o) ic += uc, is += us, ib += ub;
  }
  if (lane == 31) wsum[warp] = ic, wsum[32 + warp] = is, wsum[64 + warp] = ib;
  __syncthreads();
  if (warp == 0) {
    const int32_t vc = lane < warps ? wsum[lane] : 0, vs = lane < warps ? wsum[32 + lane] : 0,
                  vb = lane < warps ? wsum[64 + lane] : 0;
    int32_t jc = vc, js = vs, jb = vb;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t uc = __shfl_up_sync(0xffffffffu, jc, o), us = __shfl_up_sync(0xffffffffu, js, o),
                    ub = __shfl_up_sync(0xffffffffu, jb, o);
      if (lane >= o) jc += uc, js += us, jb += ub;
    }
    if (lane < warps) wsum[lane] = jc - vc, wsum[32 + lane] = js - vs, wsum[64 + lane] = jb - vb;
    if (lane == 31) wsum[96] = jc, wsum[97] = js, wsum[98] = jb;
  }
  __syncthreads();
  if (tid < E) {
    const int32_t off = ic - c + wsum[warp], soff = is - ns + wsum[32 + warp], boff = ib - nb + wsum[64 + warp];
    a.offsets[tid] = off;
    cnt[tid] = off;
    if (c > a.big_threshold) {
      for (int32_t r = 0; r < c; r += a.big_rows)
        a.big_tiles[boff + r / a.big_rows] = {tid, off + r, min(a.big_rows, c - r), 0};
    } else {
      for (int32_t r = 0; r < c; r += a.small_rows)
        a.small_tiles[soff + r / a.small_rows] = {tid, off + r, min(a.small_rows, c - r), 0};
    }
  }
  if (tid == 0) {
    a.offsets[E] = wsum[96];
    a.num_tiles[0] = wsum[97];
    a.num_tiles[1] = wsum[98];
  }
  __syncthreads();
  for (int i = tid; i < total; i += blockDim.x) {
    const int32_t e = ids[i];
    if (e < 0) {
      a.slot_row[i] = -1;
      continue;
    }
    int32_t rank = 0;
    for (int j = 0; j < i; ++j) rank += ids[j] == e;
    const int32_t p = cnt[e] + rank;
    a.row_token[p] = int32_t(i / a.k);
    a.row_weight[p] = kLean ? pick_w[i] : a.expert_weights[i];
    a.slot_row[i] = p;
  }
}

bool g_moe_plan_lean = true;  // moe_plan_set_lean (NOTES 48; default since session 13, same outputs)
bool g_moe_plan_fast = true;  // moe_plan_set_fast (NOTES 28: ncu 13.9 -> 10.2 us at batch 1, the same outputs)
int g_moe_plan_one_max = 64;  // moe_plan_set_single_launch_max
bool g_moe_plan_select = true;  // moe_plan_set_select
// The fused selection gives each token one warp of the one-launch plan's block.
constexpr int kPlanSelectMaxTokens = kScanThreads / 32;

using moe_terms::swiglu;

// The grouped gemv. Grid (tile, block of output rows); block = 8 warps = (8 / ks)
// row groups x ks slices of K, as linear's gemv_kernel. A warp streams 4 weight rows
// in 16-byte vectors (stage 1: w1 and w3 rows o, o + 1, so the SwiGLU happens in the
// finishing threads; stage 2: w2 rows o .. o + 3) against the tile's <= 8 x rows,
// which it reads through L1 (they are shared by every warp of every row block of the
// tile). A row's products, K order, slice split (from K alone) and final sum are the
// same in every tile, so its result does not depend on how many rows the tile has.
// kNT (1, 2, 4, 8) = the plan's small-tile height, from min(n, 8) on the host: batch-1
// tiles have one row, and the kernel then holds 4 accumulators, not 32 (occupancy).
template <WFormat F, int kStage, int kNT>
__global__ void __launch_bounds__(kMoeWarps * 32, 2) moe_gemv_kernel(MoeGroupedArgs a, int ks, int vec_shift) {
  constexpr int kPerWord = gemv::Fmt<F>::kPerWord, kPerVec = 4 * kPerWord;
  constexpr int kOut = kStage == 1 ? 2 : 4;  // output rows per warp
  __shared__ float red[kMoeWarps][kMoeWRows][kNT];
  if (int64_t(blockIdx.x) >= *a.num_tiles) return;
  const MoeTile tile = a.tiles[blockIdx.x];
  const MoeExpertPtrs& ex = a.experts[tile.expert];
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  const int64_t K = L.cols, out_rows = L.rows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int slice = warp % ks, group = warp / ks, groups = kMoeWarps / ks;
  const int64_t o0 = (int64_t(blockIdx.y) * groups + group) * kOut;
  const int64_t row_bytes = K * gemv::bytes_per_element_x2(F) / 2;
  const int nvec = int(K / kPerVec);
  const int per = (nvec + ks - 1) / ks;
  const int v_end = min(nvec, (slice + 1) * per);
  const bool scaled = L.scale_format != SFormat::kNone;

  const uint8_t* wrow[kMoeWRows];
  const uint8_t* srow[kMoeWRows];
#pragma unroll
  for (int r = 0; r < kMoeWRows; ++r) {
    const int mat = kStage == 1 ? (r < 2 ? 0 : 1) : 2;
    const int64_t orow = min(o0 + (kStage == 1 ? (r & 1) : r), out_rows - 1);  // clamped rows: never stored
    wrow[r] = ex.w[mat] + orow * row_bytes;
    const int64_t so = scaled ? (orow / L.block_rows) * L.scale_cols : 0;
    srow[r] = scaled ? ex.s[mat] + so * (L.scale_format == SFormat::kF32 ? 4 : 1) : nullptr;
  }
  const int nt = tile.rows;
  const float* xr[kNT];
#pragma unroll
  for (int t = 0; t < kNT; ++t) {
    const int64_t p = tile.row0 + min(t, nt - 1);
    xr[t] = a.x + (kStage == 1 ? int64_t(a.row_token[p]) : p) * K;
  }
  float acc[kMoeWRows][kNT];
#pragma unroll
  for (int r = 0; r < kMoeWRows; ++r)
#pragma unroll
    for (int t = 0; t < kNT; ++t) acc[r][t] = 0.0f;

  for (int v = slice * per + lane; v < v_end; v += 32) {
    uint4 wv[kMoeWRows];
#pragma unroll
    for (int r = 0; r < kMoeWRows; ++r) wv[r] = gemv::load_stream(wrow[r] + int64_t(v) * 16);
    float s[kMoeWRows];
#pragma unroll
    for (int r = 0; r < kMoeWRows; ++r) {
      float sv = 1.0f;
      if (scaled) {
        const int sc = v >> vec_shift;
        sv = L.scale_format == SFormat::kE8M0 ? e8m0_to_float(srow[r][sc]) : reinterpret_cast<const float*>(srow[r])[sc];
      }
      s[r] = sv * gemv::Fmt<F>::kFactor;
    }
    const int64_t c0 = int64_t(v) * kPerVec;
    float part[kMoeWRows][kNT];
#pragma unroll
    for (int r = 0; r < kMoeWRows; ++r)
#pragma unroll
      for (int t = 0; t < kNT; ++t) part[r][t] = 0.0f;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float wf[kMoeWRows][kPerWord];
#pragma unroll
      for (int r = 0; r < kMoeWRows; ++r) {
        const uint32_t word = q == 0 ? wv[r].x : q == 1 ? wv[r].y : q == 2 ? wv[r].z : wv[r].w;
        gemv::decode_word<F>(word, wf[r]);
      }
#pragma unroll
      for (int t = 0; t < kNT; ++t) {
        if (t >= nt) break;
        float xf[kPerWord];
        gemv::load_x<kPerWord>(xr[t] + c0 + q * kPerWord, xf);
#pragma unroll
        for (int r = 0; r < kMoeWRows; ++r)
#pragma unroll
          for (int e = 0; e < kPerWord; ++e) part[r][t] += wf[r][e] * xf[e];
      }
    }
#pragma unroll
    for (int r = 0; r < kMoeWRows; ++r)
#pragma unroll
      for (int t = 0; t < kNT; ++t) acc[r][t] += part[r][t] * s[r];
  }
#pragma unroll
  for (int r = 0; r < kMoeWRows; ++r)
#pragma unroll
    for (int t = 0; t < kNT; ++t) {
      const float sum = warp_sum(acc[r][t]);
      if (lane == 0) red[warp][r][t] = sum;
    }
  __syncthreads();
  // Thread i finishes output (group, row j, token t) over its ks slices.
  const int i = threadIdx.x;
  if (i >= groups * kOut * kNT) return;
  const int g = i / (kOut * kNT), j = (i / kNT) % kOut, t = i % kNT;
  const int64_t o = (int64_t(blockIdx.y) * groups + g) * kOut + j;
  if (t >= nt || o >= out_rows) return;
  const int64_t p = tile.row0 + t;
  if constexpr (kStage == 1) {
    float gate = 0.0f, up = 0.0f;
    for (int k = 0; k < ks; ++k) gate += red[g * ks + k][j][t];
    for (int k = 0; k < ks; ++k) up += red[g * ks + k][2 + j][t];
    const float h = swiglu(gate, up, a.limit, a.row_weight ? a.row_weight[p] : 0.0f, a.row_weight != nullptr);
    a.y[p * out_rows + o] = a.round_h ? __bfloat162float(__float2bfloat16_rn(h)) : h;
  } else {
    float sum = 0.0f;
    for (int k = 0; k < ks; ++k) sum += red[g * ks + k][j][t];
    a.y[p * out_rows + o] = sum;
  }
}

template <WFormat F, int kStage, int kNT>
cudaError_t launch_moe_gemv(const MoeGroupedArgs& a, cudaStream_t stream) {
  constexpr int kPerVec = 4 * gemv::Fmt<F>::kPerWord;
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  const int64_t nvec = L.cols / kPerVec;
  int ks = 1;
  while (ks < kMoeWarps && nvec / (2 * ks) >= 64) ks *= 2;
  int vec_shift = 0;
  if (L.scale_format != SFormat::kNone)
    while ((int64_t(kPerVec) << vec_shift) < L.block_cols) ++vec_shift;
  const int64_t rows_per_block = int64_t(kMoeWarps / ks) * (kStage == 1 ? 2 : 4);
  const int64_t gy = (L.rows + rows_per_block - 1) / rows_per_block;
  if (gy > 65535 || a.max_tiles > INT32_MAX || nvec > INT32_MAX) return cudaErrorInvalidValue;
  moe_gemv_kernel<F, kStage, kNT><<<dim3(unsigned(a.max_tiles), unsigned(gy)), kMoeWarps * 32, 0, stream>>>(a, ks, vec_shift);
  return cudaGetLastError();
}

template <int kStage, int kNT>
cudaError_t dispatch_moe_gemv(const MoeGroupedArgs& a, cudaStream_t stream) {
  switch ((kStage == 1 ? a.w13 : a.w2).format) {
    case WFormat::kF32: return launch_moe_gemv<WFormat::kF32, kStage, kNT>(a, stream);
    case WFormat::kBF16: return launch_moe_gemv<WFormat::kBF16, kStage, kNT>(a, stream);
    case WFormat::kF16: return launch_moe_gemv<WFormat::kF16, kStage, kNT>(a, stream);
    case WFormat::kE4M3: return launch_moe_gemv<WFormat::kE4M3, kStage, kNT>(a, stream);
    case WFormat::kE2M1: return launch_moe_gemv<WFormat::kE2M1, kStage, kNT>(a, stream);
  }
  return cudaErrorInvalidValue;
}

template <int kStage>
cudaError_t dispatch_moe_gemv_rows(const MoeGroupedArgs& a, cudaStream_t stream) {
  switch (a.tile_rows) {
    case 1: return dispatch_moe_gemv<kStage, 1>(a, stream);
    case 2: return dispatch_moe_gemv<kStage, 2>(a, stream);
    case 4: return dispatch_moe_gemv<kStage, 4>(a, stream);
    case 8: return dispatch_moe_gemv<kStage, 8>(a, stream);
  }
  return cudaErrorInvalidValue;
}

// Grid (big tile, row chunk): h = act(h, up) over the tile's rows.
__global__ void moe_act_kernel(MoeGroupedArgs a) {
  if (int64_t(blockIdx.x) >= *a.num_tiles) return;
  const MoeTile tile = a.tiles[blockIdx.x];
  const int64_t inter = a.w13.rows, count = int64_t(tile.rows) * inter;
  for (int64_t idx = int64_t(blockIdx.y) * blockDim.x + threadIdx.x; idx < count; idx += int64_t(gridDim.y) * blockDim.x) {
    const int64_t p = tile.row0 + idx / inter, o = p * inter + idx % inter;
    const float h = swiglu(a.y[o], a.up[o], a.limit, a.row_weight ? a.row_weight[p] : 0.0f, a.row_weight != nullptr);
    a.y[o] = a.round_h ? __bfloat162float(__float2bfloat16_rn(h)) : h;
  }
}

// Block (token, column chunk): the token's slots sorted by (expert id, slot), then each
// column summed from 0 in that order, then + residual: the CPU model's order, fixed per
// token. The former kernel (one block of 256 threads per token, each looping over 20
// columns with the slots' loads one after another) was a chain of ~120 L2 round trips
// at batch 1: 40 us per call. Now a thread issues a column's (at most kMaxTopK) loads
// together, and a small batch gets a block per 256 columns (20 per token at 5120).
// Larger batches take fewer, wider chunks (see moe_combine): every thread sorts the
// token's slots, so a chunk per 256 columns multiplied the sorting by 20.
// V = 4: each thread sums four adjacent columns with 16-byte loads (dim % 4 == 0 and
// aligned rows), so a thread has up to 4 kMaxTopK-wide rows of loads in flight per step
// instead of one; each column's sum is the same chain in the same order (same bits).
// The scalar version ran the 8K-prefill combine (1.3 GB of traffic) at ~1.8 TB/s (ncu
// run 15: 0.75 ms per call).
constexpr int kMaxTopK = 16;
constexpr int kCombineThreads = 256;
template <int V>
__global__ void __launch_bounds__(kCombineThreads) moe_combine_kernel(MoeCombineArgs a) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  using Vec = std::conditional_t<V == 4, float4, float>;
  const int64_t t = blockIdx.x;
  const int64_t c0 = (int64_t(blockIdx.y) * kCombineThreads + threadIdx.x) * V;
  int32_t rows[kMaxTopK];
  int64_t ids[kMaxTopK];
  int m = 0;
  for (int j = 0; j < a.k; ++j) {
    const int32_t p = a.slot_row[t * a.k + j];
    if (p < 0) continue;
    const int64_t id = a.expert_ids[t * a.k + j];
    int q = m++;
    while (q > 0 && ids[q - 1] > id) {  // stable: equal ids keep slot order
      ids[q] = ids[q - 1];
      rows[q] = rows[q - 1];
      --q;
    }
    ids[q] = id;
    rows[q] = p;
  }
  auto at = [](const float* base, int64_t off) { return *reinterpret_cast<const Vec*>(base + off); };
  for (int64_t c = c0; c < a.dim; c += int64_t(gridDim.y) * kCombineThreads * V) {
    Vec v[kMaxTopK];
#pragma unroll
    for (int i = 0; i < kMaxTopK; ++i)
      if (i < m) v[i] = at(a.y, int64_t(rows[i]) * a.dim + c);
    Vec r{};
    if (a.residual) r = at(a.residual, t * a.dim + c);
    float acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e) acc[e] = 0.0f;
#pragma unroll
    for (int i = 0; i < kMaxTopK; ++i)
      if (i < m) {
        const float* vi = reinterpret_cast<const float*>(&v[i]);
#pragma unroll
        for (int e = 0; e < V; ++e) acc[e] += vi[e];
      }
    if (a.residual) {
      const float* re = reinterpret_cast<const float*>(&r);
#pragma unroll
      for (int e = 0; e < V; ++e) acc[e] = acc[e] + re[e];
    }
    Vec o;
    float* oe = reinterpret_cast<float*>(&o);
#pragma unroll
    for (int e = 0; e < V; ++e) oe[e] = acc[e];
    *reinterpret_cast<Vec*>(a.out + t * a.dim + c) = o;
  }
}

int per_vec_of(WFormat f) {
  return f == WFormat::kF32 ? 4 : (f == WFormat::kBF16 || f == WFormat::kF16) ? 8 : f == WFormat::kE4M3 ? 16 : 32;
}
bool is_pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

void moe_plan_set_single_launch_max(int assignments) {
  g_moe_plan_one_max = std::clamp(assignments, 0, kPlanOneMax);
}
int moe_plan_single_launch_max() { return g_moe_plan_one_max; }
void moe_plan_set_select(bool on) { g_moe_plan_select = on; }
void moe_plan_set_fast(bool on) { g_moe_plan_fast = on; }
void moe_plan_set_lean(bool on) { g_moe_plan_lean = on; }
bool moe_plan_lean() { return g_moe_plan_lean; }
bool moe_plan_fast() { return g_moe_plan_fast; }
bool moe_plan_select() { return g_moe_plan_select; }

int64_t moe_plan_chunks(int64_t assignments) { return (assignments + kPlanChunk - 1) / kPlanChunk; }
int64_t moe_small_tile_rows(int64_t n) { return n <= 1 ? 1 : n <= 2 ? 2 : n <= 4 ? 4 : kMoeSmallRows; }
int64_t moe_small_tile_bound(int64_t assignments, int64_t num_experts, int64_t tile_rows) {
  // sum_e ceil(c_e / h) <= sum_e (c_e / h + 1) over the (at most min(E, nk)) experts with rows.
  return assignments / tile_rows + std::min(num_experts, assignments) + 1;
}
int64_t moe_big_tile_bound(int64_t assignments, int64_t num_experts) {
  // Counted at kMoeBigRows, the smallest big-tile height: also a bound for kMoeTcWideRows and kMoeTcWgmmaRows.
  return assignments / kMoeBigRows + std::min(num_experts, assignments / (kMoeSmallRows + 1)) + 1;
}

cudaError_t moe_plan(const MoePlanArgs& a, cudaStream_t stream) {
  const int64_t total = int64_t(a.n) * a.k;
  if (a.n < 0 || a.k < 1 || a.num_experts < 1 || a.num_experts > 4 * kScanThreads || total > INT32_MAX ||
      (a.small_rows != 1 && a.small_rows != 2 && a.small_rows != 4 && a.small_rows != kMoeSmallRows) ||
      (a.big_rows != kMoeBigRows && a.big_rows != kMoeTcWideRows && a.big_rows != kMoeTcWgmmaRows))
    return cudaErrorInvalidValue;
  if (total == 0) return cudaSuccess;
  if (!a.expert_ids || !a.expert_weights || !a.counts || !a.offsets || !a.chunk_base || !a.row_token ||
      !a.row_weight || !a.slot_row || !a.small_tiles || !a.num_tiles || (a.big_threshold != INT32_MAX && !a.big_tiles))
    return cudaErrorInvalidValue;
  const int64_t chunks = moe_plan_chunks(total);
  const size_t E = size_t(a.num_experts);
  if ((a.sync_count > 0 && !a.sync) ||
      (a.split_x && (!a.split_out || a.split_count <= 0 || a.split_count % 4 != 0 ||
                     (a.split_terms != 1 && a.split_terms != 3) || reinterpret_cast<uintptr_t>(a.split_x) % 16 != 0)))
    return cudaErrorInvalidValue;
  if (a.select.logits) {
    const RouterSelectArgs& r = a.select;
    if (r.n != a.n || r.top_k != a.k || r.num_experts != a.num_experts || r.expert_ids != a.expert_ids ||
        r.expert_weights != a.expert_weights)
      return cudaErrorInvalidValue;
    const size_t sel_smem = size_t(a.n) * (2 * E * sizeof(float) + a.k * sizeof(int));
    if (!(g_moe_plan_select && total <= g_moe_plan_one_max && a.n <= kPlanSelectMaxTokens &&
          sel_smem <= 128 * 1024)) {
      // Not fusable here: the router's own launch, then the plan as usual.
      const cudaError_t e = router_select(r, stream);
      if (e != cudaSuccess) return e;
      MoePlanArgs b = a;
      b.select = RouterSelectArgs{};
      return moe_plan(b, stream);
    }
  }
  if (total <= g_moe_plan_one_max && g_moe_plan_fast && a.num_experts <= kScanThreads) {
    // One expert per thread; with the selection, one thread per (token, expert) score up to
    // 1024 (each a double exp + log1p: at 8 tokens and 384 threads 8 in a row per thread)
    // and a warp per token (n <= 32 here).
    const int64_t per_score = a.select.logits ? int64_t(a.n) * a.num_experts : 0;
    const int64_t want = std::max<int64_t>({a.num_experts, per_score, a.select.logits ? 32 * int64_t(a.n) : 0});
    const int threads = int(std::min<int64_t>(kScanThreads, (want + 31) / 32 * 32));
    const int64_t blocks = 1 + (a.split_x ? (a.split_count / 4 + threads - 1) / threads : 0);
    // The lean kind (NOTES 48) where its pick applies: the fused selection, E <= 384, top_k <= 32.
    const bool lean = g_moe_plan_lean && a.select.logits && a.num_experts <= 32 * kLeanPickPer && a.k <= 32;
    const size_t smem = (E + kPlanOneMax + 3 * 32 + 4) * sizeof(int32_t) +
                        (a.select.logits ? size_t(a.n) * (2 * E * sizeof(float) + a.k * sizeof(int)) : 0) +
                        (lean ? size_t(a.n) * a.k * sizeof(float) : 0);  // the picks' weights
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    if (smem > 48 * 1024) {
      const cudaError_t err = cudaFuncSetAttribute(lean ? moe_plan_fast_kernel<true> : moe_plan_fast_kernel<false>,
                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      if (err != cudaSuccess) return err;
    }
    if (!lean) {
      moe_plan_fast_kernel<false><<<unsigned(blocks), threads, smem, stream>>>(a);
      return cudaGetLastError();
    }
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(unsigned(blocks));
    cfg.blockDim = dim3(unsigned(threads));
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    LaunchAttrs attrs;
    attrs.pdl(true).apply(cfg);
    return cudaLaunchKernelEx(&cfg, moe_plan_fast_kernel<true>, a);
  }
  if (total <= g_moe_plan_one_max) {
    const int64_t blocks = 1 + (a.split_x ? (a.split_count / 4 + kScanThreads - 1) / kScanThreads : 0);
    const size_t smem = (3 * E + kScanThreads + kPlanOneMax) * sizeof(int32_t) +
                        (a.select.logits ? size_t(a.n) * (2 * E * sizeof(float) + a.k * sizeof(int)) : 0);
    if (blocks > INT32_MAX) return cudaErrorInvalidValue;
    if (smem > 48 * 1024) {
      const cudaError_t err =
          cudaFuncSetAttribute(moe_plan_one_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
      if (err != cudaSuccess) return err;
    }
    moe_plan_one_kernel<<<unsigned(blocks), kScanThreads, smem, stream>>>(a);
    return cudaGetLastError();
  }
  const int64_t split_blocks = a.split_x ? (a.split_count / 4 + kPlanChunk - 1) / kPlanChunk : 0;
  const int64_t hist_blocks = std::max(chunks, split_blocks);
  if (hist_blocks > INT32_MAX) return cudaErrorInvalidValue;
  moe_hist_kernel<<<unsigned(hist_blocks), kPlanChunk, E * sizeof(int32_t), stream>>>(a, chunks);
  const size_t scan_smem = (3 * E + kScanThreads) * sizeof(int32_t);
  if (scan_smem > 48 * 1024) {
    const cudaError_t err =
        cudaFuncSetAttribute(moe_scan_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(scan_smem));
    if (err != cudaSuccess) return err;
  }
  moe_scan_kernel<<<1, kScanThreads, scan_smem, stream>>>(a, int(chunks));
  moe_place_kernel<<<unsigned(chunks), kPlanChunk, 0, stream>>>(a);
  return cudaGetLastError();
}

bool moe_gemv_eligible(const WeightArgs& w) {
  const int pv = per_vec_of(w.format);
  const int64_t row_bytes = w.format == WFormat::kE2M1 ? w.cols / 2
                            : w.cols * (w.format == WFormat::kF32 ? 4 : w.format == WFormat::kE4M3 ? 1 : 2);
  return w.rows > 0 && w.cols > 0 && w.cols % pv == 0 && row_bytes % 16 == 0 &&
         (w.scale_format == SFormat::kNone || (is_pow2(w.block_cols) && w.block_cols >= pv));
}

bool moe_mma_eligible(const WeightArgs& w) {
  const bool quant = w.format == WFormat::kE4M3 || w.format == WFormat::kE2M1;
  return quant && w.cols % 32 == 0 &&
         (w.scale_format == SFormat::kNone ||
          (w.scale_format == SFormat::kE8M0 && is_pow2(w.block_cols) && w.block_cols >= 16));
}

cudaError_t moe_gemv(const MoeGroupedArgs& a, cudaStream_t stream) {
  if (a.max_tiles <= 0) return cudaSuccess;
  if (!a.experts || !a.x || !a.y || !a.tiles || !a.num_tiles || (a.stage == 1 && !a.row_token)) return cudaErrorInvalidValue;
  if (a.stage == 1) {
    if (!moe_gemv_eligible(a.w13)) return cudaErrorInvalidValue;
    return dispatch_moe_gemv_rows<1>(a, stream);
  }
  if (a.stage != 2 || !moe_gemv_eligible(a.w2)) return cudaErrorInvalidValue;
  return dispatch_moe_gemv_rows<2>(a, stream);
}

cudaError_t moe_act(const MoeGroupedArgs& a, cudaStream_t stream) {
  if (a.max_tiles <= 0) return cudaSuccess;
  if (!a.y || !a.up || !a.tiles || !a.num_tiles || a.max_tiles > INT32_MAX) return cudaErrorInvalidValue;
  // 64 rows x inter per tile: enough blocks along y to cover a tile in a few passes.
  const int64_t per_tile = int64_t(kMoeBigRows) * a.w13.rows;
  const unsigned gy = unsigned(std::min<int64_t>(64, (per_tile + 255) / 256));
  moe_act_kernel<<<dim3(unsigned(a.max_tiles), gy), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t moe_combine(const MoeCombineArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.k < 1 || a.k > kMaxTopK || a.dim < 1 || a.dim > 65535 * int64_t(kCombineThreads))
    return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.y || !a.expert_ids || !a.slot_row || !a.out) return cudaErrorInvalidValue;
  // Enough chunks for ~2048 blocks, at most one per 256 columns. Measured (r1 = one block
  // per token, the former kernel; r2 = always a chunk per 256 columns): batch 1 40 ->
  // 5.7 us, batch 256 44 -> 60 us, 8K prefill 0.51 -> 1.78 ms per call; the per-thread
  // sort repeated for each chunk is what the large batches paid. This middle rule (8
  // chunks at 256, 1 from 2048 tokens) is not measured yet.
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const int v = a.dim % 4 == 0 && aligned(a.y) && aligned(a.out) && (!a.residual || aligned(a.residual)) ? 4 : 1;
  const int64_t max_chunks = (a.dim + int64_t(kCombineThreads) * v - 1) / (int64_t(kCombineThreads) * v);
  const int64_t chunks = std::max<int64_t>(1, std::min<int64_t>(max_chunks, (2048 + a.n - 1) / a.n));
  const dim3 grid(unsigned(a.n), unsigned(chunks));
  if (v == 4) moe_combine_kernel<4><<<grid, kCombineThreads, 0, stream>>>(a);
  else moe_combine_kernel<1><<<grid, kCombineThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
