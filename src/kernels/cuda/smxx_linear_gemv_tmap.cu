// The gemv path's one-token FP8 kernel fed by 2-D tensor-map TMA (GemvKind::kTmap, opt-in;
// bench/flash/NOTES.md section 38): e4m3 weights (e8m0 or no scales) times one token of x
// rounded to bf16 (LinearArgs::bf16_x), on mma.sync m16n8k16 bf16 with fp32 accumulation.
//
// Why: three kernels that filled their shared-memory rings with 1-D cp.async.bulk copies
// (NOTES 12, 35, 37) moved 8-11 GB/s per SM; cuBLASLt's one-token FP8 kernel, which streams
// these shapes at 3.1 TB/s (~23.5 GB/s per SM), fills a ring of 32 KB stages with one 2-D
// tensor-map TMA instruction per stage (NOTES 36). So here: one CTA per SM, one producer
// thread issuing one box copy (TR rows x 128 bytes, the 128-byte swizzle) per 32 KB / NB,
// S stages deep (~192 KB in flight per SM), and eight consumer warps whose per-stage work is
// a few instructions per weight word.
//
// Work split (from the shape and the SM count only, never from x): CTA tiles of TR = 64,
// 128 or 256 rows x all columns, split along K over the cs CTAs of a thread-block cluster
// (cs = 1 .. 8); clusters loop over tiles cid, cid + NC, ... (NC clusters in the grid).
// The plan minimizes the busiest CTA's bytes. Each rank's K slice is the contiguous range
// of 128-column steps rank * per .. (rank + 1) * per.
//
// Consumer: warp w owns m16 tiles and boxes of each stage so that every warp does two
// (tile, box) units per stage. A unit is 16 rows x 128 columns: 4 ldmatrix.x4 (the swizzle
// makes the 8 rows of a matrix land on distinct banks), each register holding 4 e4m3 codes
// of one row; each code pair decoded exactly to bf16 (cvt e4m3x2 -> f16x2; the f16 bits >> 3
// with the sign kept are the bf16 bits of value * 2^-112; one bf16x2 multiply by 2^112 *
// scale, a power of two: exact; NOTES 26), 8 MMAs with B = x (bf16, staged once per CTA per
// input group in shared memory). Lane (g, q) holds codes 4q .. 4q + 3 of a row's 16 columns;
// the MMA's k = 2q, 2q + 1 are columns 4q, 4q + 1 and k = 2q + 8, 2q + 9 columns 4q + 2, 4q + 3,
// for A and B alike, so each MMA is a dot product over its 16 columns. Every output column of
// the MMA gets the same x (one token): lanes q = 0 read rows g and g + 8 from c[0], c[2].
//
// Sums (deterministic, no atomics): a unit's 8 MMAs chain from zero (128 columns), the unit
// sums are added into fp32 registers in stage order (promotion: NOTES 26), the two K halves
// of a tile (TR = 64) in warp order, and the cs ranks' partial sums in rank order by rank 0,
// which receives them in its shared memory (st.shared::cluster, an mbarrier per tile parity).
// Not bitwise the SIMT kernels (other sum order): checked against the CPU oracle.
#include <cuda.h>  // CUtensorMap and its enums (types only: libcuda is not linked)
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

#include "common/env.h"
#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_device.h"
#include "kernels/cuda/smxx_launch.h"
#include "kernels/cuda/smxx_linear.cuh"
#include "kernels/cuda/smxx_linear_gemv.cuh"
#include "kernels/cuda/smxx_linear_gemv_bf16x.cuh"
#include "kernels/cuda/smxx_linear_tmap.h"

namespace deepinfer::kernels::gemv_tmap {
namespace {

constexpr int kBoxCols = 128;                        // bytes per box row: the 128-byte swizzle's span
constexpr int kStageBytes = 32 * 1024;
constexpr int kMaxStages = 8;
constexpr int kMaxCluster = 8;
constexpr int kDefaultStages = 6;

struct Params {
  const float* x = nullptr;  // the token's x row (group 0)
  float* y = nullptr;
  const uint8_t* scale = nullptr;  // null: no scales
  int64_t scale_cols = 0, row0 = 0, x_group_rows = 0, x_group_step = 0;
  int block_rows_shift = 0, scale_shift = 0;
  int num_rows = 0, cols = 0;
  int tiles = 0;      // ceil(num_rows / TR)
  int cs = 1;         // CTAs per cluster (K slices)
  int nclusters = 1;  // clusters in the grid
  int per_steps = 0;  // 128-column steps per slice
  int nsteps = 0;     // ceil(cols / 128)
  int stages = 1;
  int x_bytes = 0;  // shared memory for x: per_steps * 128 bf16
  int probe = 0;    // ring only: consumers wait and release, no arithmetic, no output
  // The slim kernel only. order: when its producer issues the first weight copies (0: at once;
  // 1: after the consumers have issued the first tile's scale-code loads; 2: after they have also
  // issued x's; 3 / 4: one / two stages at once, the rest as 2). dbg (timing diagnostics, wrong
  // results): bit 0 no scale codes (factors 1), bit 1 x not staged (the MMAs read whatever shared
  // memory holds); bits 2-4 in the kDiag instantiations.
  int order = 0, dbg = 0;
};

// ---- PTX wrappers --------------------------------------------------------------------------
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t map_rank(uint32_t addr, uint32_t rank) {
  uint32_t d;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(d) : "r"(addr), "r"(rank));
  return d;
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  while (!gemv::mbar_try_wait(bar, parity)) {
  }
}
// Waits for a phase completed by arrivals from other CTAs of the cluster (release.cluster).
__device__ __forceinline__ void mbar_wait_cluster(uint64_t* bar, uint32_t parity) {
  uint32_t ok = 0;
  while (!ok) {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, "
        "p;\n}"
        : "=r"(ok)
        : "r"(gemv::smem_u32(bar)), "r"(parity)
        : "memory");
  }
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(gemv::smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_arrive_remote(uint32_t cluster_addr) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(cluster_addr) : "memory");
}
__device__ __forceinline__ void st_cluster_f32(uint32_t cluster_addr, float v) {
  asm volatile("st.shared::cluster.f32 [%0], %1;" ::"r"(cluster_addr), "f"(v) : "memory");
}
template <int kCount>
__device__ __forceinline__ void named_bar_consumers() {  // the consumer warps only (not the producer)
  asm volatile("bar.sync 1, %0;" ::"n"(kCount) : "memory");
}
__device__ __forceinline__ void tma_box(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(gemv::smem_u32(bar))
      : "memory");
}
__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& d0, uint32_t& d1, uint32_t& d2, uint32_t& d3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d0), "=r"(d1), "=r"(d2), "=r"(d3)
               : "r"(addr));
}
using gemv::e4m3x2_to_bf16x2_scaled;  // smxx_linear_gemv_bf16x.cuh
using gemv::mma_bf16;
using gemv::mul_bf16x2;
using gemv::pack_bf16x2;
using gemv::scale_factors;

// One ldmatrix register (4 codes of one row) -> the MMA's two A registers (columns 4q, 4q + 1
// and 4q + 2, 4q + 3), each times the unit's factors.
__device__ __forceinline__ void decode4(uint32_t d, uint32_t f1, uint32_t f2, bool two, uint32_t& lo, uint32_t& hi) {
  lo = mul_bf16x2(e4m3x2_to_bf16x2_scaled(d), f1);
  hi = mul_bf16x2(e4m3x2_to_bf16x2_scaled(d >> 16), f1);
  if (two) {
    lo = mul_bf16x2(lo, f2);
    hi = mul_bf16x2(hi, f2);
  }
}

// The f16 consumer's factor for a scale code: 2^(code - 127) / 2^sh in fp32 (x was staged times
// 2^sh). Normal results by construction; subnormal, zero or infinite ones through ldexpf; 0xff: NaN.
__device__ __forceinline__ float code_factor(uint32_t code, int sh) {
  const int e = int(code) - sh;  // the biased fp32 exponent
  if (code == 255u) return __uint_as_float(0x7fc00000u);
  if (e >= 1 && e <= 254) return __uint_as_float(uint32_t(e) << 23);
  return ldexpf(1.0f, e - 127);
}
__device__ __forceinline__ void mma_f16(float (&c)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// Two e4m3 codes -> f16x2 (exact: every e4m3 value is a normal f16).
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t pair) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(pair & 0xffffu), __NV_E4M3);
  return uint32_t(h.x) | (uint32_t(h.y) << 16);
}
__device__ __forceinline__ uint32_t pack_f16x2(float lo, float hi) {
  uint32_t d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
}
__device__ __forceinline__ float round_bf16_f(float v) { return __uint_as_float(pack_bf16x2(v, 0.0f) << 16); }

// kCodes: scale codes per 128-column box and unit (0: no scales; 4: block_cols >= 32, one per
// 32 columns; 8: block_cols = 16). CW: consumer warps (8: two units per warp and stage, the
// measured kernel; 16: one unit each, twice the warps to hide a unit's dependent chain). kF16:
// the decode of the f16 consumer (below) instead of the exact-bf16 one.
//
// The f16 consumer (opt-in, not yet measured): A straight from cvt e4m3x2 -> f16x2 (exact; one
// instruction per two weights, no integer fix-up, no per-pair scale multiply), x staged in f16
// after a power-of-two shift 2^sh per CTA and input group (sh puts the slice's largest |x| in
// [2^14, 2^15)), so B is x rounded to bf16 as before, times 2^sh, exactly for every element of at
// least 2^-17 after the shift (2^-32 of the largest; smaller ones round to f16's subnormal grid: an
// error below 2^-25 of the largest x per element); f16 x f16 products are exact in fp32, the MMA
// sums them in fp32, and the scale block's factor 2^(code - 127 - sh) is applied in fp32 per
// 32-column block (per 16 at kCodes = 8): acc += c * factor.
// Row r of tile ti (its first row lr0): y directly at cs == 1; otherwise rank r's partial into rank
// 0's red[b][rank][r] (two buffers b, alternating by tile) and rank 0 adds them in rank order.
// y / num_rows: the tile's weight's output and rows (a pair launch's second weight has its own).
template <int TR>
__device__ __forceinline__ void store_row(float* y, int num_rows, float v, int r, int lr0, int ti, int my_tiles,
                                          int cs, int rank, float* red, uint64_t* red_full, uint64_t* red_free) {
  if (cs == 1) {
    if (lr0 + r < num_rows) y[lr0 + r] = v;
    return;
  }
  const int b = ti & 1;
  if (ti >= 2) mbar_wait_cluster(red_free + b, uint32_t(((ti >> 1) + 1) & 1));
  st_cluster_f32(map_rank(gemv::smem_u32(red + (b * cs + rank) * TR + r), 0), v);
  mbar_arrive_remote(map_rank(gemv::smem_u32(red_full + b), 0));
  if (rank == 0) {
    mbar_wait_cluster(red_full + b, uint32_t((ti >> 1) & 1));
    float sum = red[(b * cs) * TR + r];
    for (int k = 1; k < cs; ++k) sum += red[(b * cs + k) * TR + r];
    if (lr0 + r < num_rows) y[lr0 + r] = sum;
    if (ti + 2 < my_tiles)
      for (int k = 0; k < cs; ++k) mbar_arrive_remote(map_rank(gemv::smem_u32(red_free + b), uint32_t(k)));
  }
}

// Both kernels' barriers: full (one producer arrival per stage) / empty (one per consumer warp) for
// the ring, red_full / red_free for the cluster reduction's two buffers; initialized by thread 0,
// then visible cluster-wide before any peer arrives on them.
__device__ __forceinline__ void init_ring_barriers(uint64_t* full, uint64_t* empty, uint64_t* red_full,
                                                   uint64_t* red_free, int stages, int consumer_warps, int cs,
                                                   int tr) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < stages; ++s) {
      gemv::mbar_init(full + s, 1);
      gemv::mbar_init(empty + s, uint32_t(consumer_warps));
    }
    for (int b = 0; b < 2; ++b) {
      gemv::mbar_init(red_full + b, uint32_t(cs * tr));
      gemv::mbar_init(red_free + b, uint32_t(tr));
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (cs > 1) cluster_sync_all();
  else __syncthreads();
}

template <int TR, int kCodes, int CW, bool kF16>
__global__ void __launch_bounds__((CW + 1) * 32, 1)
    gemv_tmap_kernel(const __grid_constant__ CUtensorMap tmap, const Params p) {
  pdl_trigger();
  constexpr int M = TR / 16;  // m16 tiles per CTA tile
  constexpr int kBoxBytes = TR * kBoxCols;
  constexpr int NB = kStageBytes / kBoxBytes;  // boxes per stage: 1, 2, 4 (M x NB = 16 units)
  constexpr int U = 16 / CW;                   // units per warp and stage
  constexpr int kCT = CW * 32;                 // consumer threads
  static_assert(M * NB == 16 && U * CW == 16, "16 (m16 tile, box) units per stage");
  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle repeats every 1024 bytes: boxes start 1024-aligned.
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* ring = base;
  uint16_t* xs = reinterpret_cast<uint16_t*>(base + p.stages * kStageBytes);
  float* red = reinterpret_cast<float*>(base + p.stages * kStageBytes + p.x_bytes);  // [2][cs][TR]
  __shared__ __align__(8) uint64_t full[kMaxStages], empty[kMaxStages], red_full[2], red_free[2];
  __shared__ float part[NB][TR];  // per box of the stage: the tile's row sums over that box's columns
  __shared__ uint32_t xmax;       // kF16: the slice's largest |x| (fp32 bits)
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int cs = p.cs;
  const int rank = cs > 1 ? int(cluster_rank()) : 0;
  const int cid = int(blockIdx.x) / cs;
  const int my_tiles = (p.tiles - cid + p.nclusters - 1) / p.nclusters;  // >= 1 (nclusters <= tiles)
  const int step0 = rank * p.per_steps;
  const int nst = max(0, min(p.nsteps - step0, p.per_steps));  // this slice's 128-column steps
  const int spt = (nst + NB - 1) / NB;                          // stages per tile
  init_ring_barriers(full, empty, red_full, red_free, p.stages, CW, cs, TR);

  if (warp == CW) {
    // Producer: one thread, one box copy per 128-column step, NB steps per stage. It reads
    // weights only, so it does not wait for the kernel before (PDL).
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(&tmap)) : "memory");
      const int total = my_tiles * spt;
      for (int it = 0; it < total; ++it) {
        const int s = it % p.stages;
        mbar_wait(empty + s, ((it / p.stages) & 1) ^ 1);
        const int ti = it / spt, si = it % spt;
        const int tile = cid + ti * p.nclusters;
        const int k0 = step0 + si * NB;
        const int nb = min(NB, step0 + nst - k0);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(gemv::smem_u32(full + s)),
                     "r"(uint32_t(nb * kBoxBytes))
                     : "memory");
        const uint32_t dst = gemv::smem_u32(ring + s * kStageBytes);
        for (int j = 0; j < nb; ++j) tma_box(dst + j * kBoxBytes, &tmap, (k0 + j) * kBoxCols, tile * TR, full + s);
      }
    }
    __syncwarp();
  } else {
    const int g = lane >> 2, q = lane & 3, mi = lane >> 3, ri = lane & 7;
    // Unit v = warp + CW u of the stage's 16: m16 tile v % M, box v / M.
    int tile_u[U], box_u[U];
    uint32_t lm_row[U];  // this lane's ldmatrix row offset in a box (row * 128)
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int v = warp + CW * u;
      tile_u[u] = v % M;
      box_u[u] = v / M;
      lm_row[u] = uint32_t(tile_u[u] * 16 + ri + 8 * (mi & 1)) * kBoxCols;
    }
    const uint32_t ring_s = gemv::smem_u32(ring);
    int64_t xgroup = -1;
    int sh = 0;  // kF16: x staged times 2^sh
    pdl_wait();  // x (and y) after the kernel before
    int it = 0;
    for (int ti = 0; ti < my_tiles; ++ti) {
      const int tile = cid + ti * p.nclusters;
      const int lr0 = tile * TR;  // the tile's first row (of the slice)
      const int64_t grp = p.x_group_rows > 0 ? int64_t(lr0) / p.x_group_rows : 0;
      if (grp != xgroup && !p.probe) {
        // x of this slice's columns, bf16 (RNE) (kF16: then times 2^sh, in f16), zero past cols;
        // a thread's loads issued together (8 float4 per pass).
        if (ti > 0) named_bar_consumers<kCT>();  // every warp done with the previous group's x
        const float* xrow = p.x + grp * p.x_group_step + int64_t(step0) * kBoxCols;
        const int nch = nst * (kBoxCols / 4), cleft = p.cols - step0 * kBoxCols;
        if constexpr (kF16) {
          if (threadIdx.x == 0) xmax = 0u;
          named_bar_consumers<kCT>();
          uint32_t m = 0;
          for (int b0 = threadIdx.x; b0 < nch; b0 += kCT * 8) {
#pragma unroll
            for (int u = 0; u < 8; ++u) {
              const int i = b0 + u * kCT;
              if (i < nch && 4 * i < cleft) {
                const float4 v = __ldg(reinterpret_cast<const float4*>(xrow) + i);
                // |bf16(x)| as bits: for non-negative floats the integer order is the value order.
                m = max(m, __float_as_uint(fabsf(round_bf16_f(v.x))));
                m = max(m, __float_as_uint(fabsf(round_bf16_f(v.y))));
                m = max(m, __float_as_uint(fabsf(round_bf16_f(v.z))));
                m = max(m, __float_as_uint(fabsf(round_bf16_f(v.w))));
              }
            }
          }
          // The maximum is order-free: the same shift whatever the arrival order.
          for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
          if (lane == 0) atomicMax(&xmax, m);
          named_bar_consumers<kCT>();
          const uint32_t mb = xmax;
          // sh: 14 - floor(log2(max)) (a subnormal max counts as 2^-126); none for 0 or inf / NaN.
          sh = (mb == 0u || mb >= 0x7f800000u) ? 0 : 14 - (max(int(mb >> 23), 1) - 127);
        }
        const float f = kF16 ? ldexpf(1.0f, sh) : 1.0f;
        for (int b0 = threadIdx.x; b0 < nch; b0 += kCT * 8) {
          float4 v[8];
#pragma unroll
          for (int u = 0; u < 8; ++u) {
            const int i = b0 + u * kCT;
            v[u] = i < nch && 4 * i < cleft ? __ldg(reinterpret_cast<const float4*>(xrow) + i)
                                            : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          }
#pragma unroll
          for (int u = 0; u < 8; ++u) {
            const int i = b0 + u * kCT;
            if (i >= nch) continue;
            uint2 o;
            if constexpr (kF16) {
              o = make_uint2(pack_f16x2(round_bf16_f(v[u].x) * f, round_bf16_f(v[u].y) * f),
                             pack_f16x2(round_bf16_f(v[u].z) * f, round_bf16_f(v[u].w) * f));
            } else {
              o = make_uint2(pack_bf16x2(v[u].x, v[u].y), pack_bf16x2(v[u].z, v[u].w));
            }
            *reinterpret_cast<uint2*>(xs + 4 * i) = o;
          }
        }
        named_bar_consumers<kCT>();
        xgroup = grp;
      }
      // Each unit's scale row (rows past num_rows are TMA zeros: any finite factor will do).
      const uint8_t* srow[U];
#pragma unroll
      for (int u = 0; u < U; ++u) {
        srow[u] = nullptr;
        if constexpr (kCodes > 0) {
          const int64_t r = p.row0 + min(lr0 + tile_u[u] * 16, p.num_rows - 1);
          srow[u] = p.scale + (r >> p.block_rows_shift) * p.scale_cols;
        }
      }
      float acc[U][4];
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[u][i] = 0.0f;
      for (int si = 0; si < spt; ++si, ++it) {
        const int s = it % p.stages;
        const int k0 = step0 + si * NB;
        const int nb = min(NB, step0 + nst - k0);
        // The stage's scale codes, loaded before the wait so their latency overlaps it.
        uint32_t codes[U][kCodes > 0 ? kCodes : 1];
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int c = 0; c < (kCodes > 0 ? kCodes : 1); ++c) {
            codes[u][c] = 127u;
            if constexpr (kCodes > 0) {
              if (box_u[u] < nb) {
                const int col = min((k0 + box_u[u]) * kBoxCols + c * (kBoxCols / kCodes), p.cols - 1);
                codes[u][c] = __ldg(srow[u] + (col >> p.scale_shift));
              }
            }
          }
        mbar_wait(full + s, uint32_t((it / p.stages) & 1));
        if (!p.probe) {
#pragma unroll
          for (int u = 0; u < U; ++u) {
            if (box_u[u] >= nb) continue;  // a slice's last, partial stage (uniform)
            const uint32_t box = ring_s + uint32_t(s * kStageBytes + box_u[u] * kBoxBytes) + lm_row[u];
            const uint16_t* xb = xs + (k0 - step0 + box_u[u]) * kBoxCols;
            float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
            for (int pp = 0; pp < 4; ++pp) {
              uint32_t d0, d1, d2, d3;
              ldsm_x4(box + uint32_t((((2 * pp + (mi >> 1)) ^ ri)) << 4), d0, d1, d2, d3);
              const uint2 xa = *reinterpret_cast<const uint2*>(xb + 32 * pp + 4 * q);
              const uint2 xc = *reinterpret_cast<const uint2*>(xb + 32 * pp + 16 + 4 * q);
              const uint32_t ca = kCodes == 8 ? codes[u][kCodes == 8 ? 2 * pp : 0] : codes[u][kCodes == 4 ? pp : 0];
              const uint32_t cb = kCodes == 8 ? codes[u][kCodes == 8 ? 2 * pp + 1 : 0] : ca;
              if constexpr (kF16) {
                // Lane (g, q): d0 / d1 rows g / g + 8 at columns 4q .. 4q + 3 of the first 16,
                // d2 / d3 of the second 16; the low code pair is A's k = 2q, 2q + 1, the high one
                // k = 2q + 8, 2q + 9, as in the bf16 consumer.
                if constexpr (kCodes == 8) {
                  float c1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                  mma_f16(c1, e4m3x2_to_f16x2(d0), e4m3x2_to_f16x2(d1), e4m3x2_to_f16x2(d0 >> 16),
                          e4m3x2_to_f16x2(d1 >> 16), xa.x, xa.y);
                  const float fa = code_factor(ca, sh);
#pragma unroll
                  for (int i = 0; i < 4; ++i) acc[u][i] += c1[i] * fa;
                  float c2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                  mma_f16(c2, e4m3x2_to_f16x2(d2), e4m3x2_to_f16x2(d3), e4m3x2_to_f16x2(d2 >> 16),
                          e4m3x2_to_f16x2(d3 >> 16), xc.x, xc.y);
                  const float fb = code_factor(cb, sh);
#pragma unroll
                  for (int i = 0; i < 4; ++i) acc[u][i] += c2[i] * fb;
                } else {
                  // One factor per 32 columns (kCodes 4) or per box (kCodes 0: applied below).
                  if constexpr (kCodes == 4) {
#pragma unroll
                    for (int i = 0; i < 4; ++i) c[i] = 0.0f;
                  }
                  mma_f16(c, e4m3x2_to_f16x2(d0), e4m3x2_to_f16x2(d1), e4m3x2_to_f16x2(d0 >> 16),
                          e4m3x2_to_f16x2(d1 >> 16), xa.x, xa.y);
                  mma_f16(c, e4m3x2_to_f16x2(d2), e4m3x2_to_f16x2(d3), e4m3x2_to_f16x2(d2 >> 16),
                          e4m3x2_to_f16x2(d3 >> 16), xc.x, xc.y);
                  if constexpr (kCodes == 4) {
                    const float fa = code_factor(ca, sh);
#pragma unroll
                    for (int i = 0; i < 4; ++i) acc[u][i] += c[i] * fa;
                  }
                }
              } else {
                uint32_t fa1, fa2, fb1, fb2;
                scale_factors(ca, fa1, fa2);
                scale_factors(cb, fb1, fb2);
                const bool twoa = ca > 142u, twob = cb > 142u;  // warp-uniform (one row block, one column block)
                uint32_t a0, a2, a1, a3;
                decode4(d0, fa1, fa2, twoa, a0, a2);
                decode4(d1, fa1, fa2, twoa, a1, a3);
                mma_bf16(c, a0, a1, a2, a3, xa.x, xa.y);
                decode4(d2, fb1, fb2, twob, a0, a2);
                decode4(d3, fb1, fb2, twob, a1, a3);
                mma_bf16(c, a0, a1, a2, a3, xc.x, xc.y);
              }
            }
            if constexpr (!kF16) {
#pragma unroll
              for (int i = 0; i < 4; ++i) acc[u][i] += c[i];
            } else if constexpr (kCodes == 0) {
              const float f0 = code_factor(127u, sh);
#pragma unroll
              for (int i = 0; i < 4; ++i) acc[u][i] += c[i] * f0;
            }
          }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(empty + s);
      }
      if (p.probe) continue;
      // The tile's row sums: lanes q = 0 hold rows g (c[0]) and g + 8 (c[2]) of each unit; the
      // boxes of a row are added in box order.
      if (q == 0) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
          part[box_u[u]][tile_u[u] * 16 + g] = acc[u][0];
          part[box_u[u]][tile_u[u] * 16 + g + 8] = acc[u][2];
        }
      }
      named_bar_consumers<kCT>();
      if (int(threadIdx.x) < TR) {
        const int r = threadIdx.x;
        float v = part[0][r];
#pragma unroll
        for (int b = 1; b < NB; ++b) v += part[b][r];
        store_row<TR>(p.y, p.num_rows, v, r, lr0, ti, my_tiles, cs, rank, red, red_full, red_free);
      }
      named_bar_consumers<kCT>();  // part is rewritten by the next tile
    }
  }
  // No CTA leaves while a peer may still write its shared memory or arrive on its barriers.
  if (cs > 1) cluster_sync_all();
}

// ---- the slim consumer (opt-in: gemv_set_tmap_slim; helper gvn1, NOTES 41) -------------------
//
// Why: ncu of the 16-warp f16 consumer at wq_b (run of NOTES 41) counts 257 SASS instructions per
// warp and stage (one 2 KB unit) where the decode and the MMAs need ~60 (32 F2FP, 8 HMMA, 4 LDSM,
// 8 x loads, 8 FFMA): the stage's four scale codes cost ~70 (64-bit address arithmetic from the
// kernel parameters, reloaded with LDC every stage, four byte loads, code_factor's range branches),
// `it % stages` and `it / stages` by a runtime divisor ~25, the high code pair's `>> 16` 16, the
// rest loop and wait. Its issue rate is 0.5 per scheduler and cycle with 4.2 warps per scheduler:
// the consumer, not the ring (which alone beats cuBLASLt under graph timing), sets the time.
// So, with the same ring, split, unit and arithmetic order as gemv_tmap_kernel<TR, C, 16, true>:
//  - the factors of a tile's scale codes are decoded once per tile into a per-warp table in shared
//    memory (one lane per 32-column group: e8m0 -> fp32 exactly, 2^(code - 127)); a stage reads its
//    unit's four with one LDS.128, before its wait;
//  - x's shift 2^sh is taken out once per row at the end (v * 2^-sh, in two halves so each factor is
//    normal) instead of in every factor: scaling by a power of two is exact, so the bits are the
//    16-warp f16 consumer's wherever no partial sum leaves fp32's normal range;
//  - the ring slot and parity advance by increment (no division), in the consumers and the producer;
//  - the high code pair converts straight from the register's upper half (F2FP ... R.H1: one
//    instruction per two weights, no shift), and x is read with ld.shared;
//  - x is read from global memory once (one pass: slices of up to 16384 columns; the host checks);
//  - its start (Params::order, NOTES 44): the first tile's scale codes load before pdl_wait, and the
//    producer can hold its copies after the first stage(s) until every consumer warp has issued its
//    code and x loads, which otherwise queue behind the whole grid's first ring fill.
// Scale blocks of >= 32 columns (kScaled) or none; slices of up to 64 128-column steps (the table:
// 16 warps x 256 floats at most).
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t d, uint32_t& lo, uint32_t& hi) {
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n cvt.rn.f16x2.e4m3x2 %1, h;\n}"
      : "=r"(lo), "=r"(hi)
      : "r"(d));
}
// Global loads that stay where they are written (volatile): issued before the producer gate.
__device__ __forceinline__ uint32_t ldg_u8(const uint8_t* ptr) {
  uint32_t v;
  asm volatile("ld.global.nc.u8 %0, [%1];" : "=r"(v) : "l"(ptr));
  return v;
}
__device__ __forceinline__ float4 ldg_f4(const float* ptr) {
  float4 v;
  asm volatile("ld.global.nc.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(ptr));
  return v;
}
__device__ __forceinline__ uint2 lds_u2(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}
__device__ __forceinline__ float4 lds_f4(uint32_t addr) {
  float4 v;
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr));
  return v;
}
// An e8m0 scale code as fp32: 2^(code - 127) exactly (code 0: the subnormal 2^-127; 0xff: NaN).
__device__ __forceinline__ float e8m0_f32(uint32_t code) {
  return __uint_as_float(code == 255u ? 0x7fc00000u : code == 0u ? 0x00400000u : code << 23);
}

constexpr int kSlimWarps = 16;
constexpr int kSlimTable = 256;  // floats per warp: 64 steps x 4 groups of 32 columns
constexpr int kSlimCodeRegs = kSlimTable / 32;  // a lane's share of a tile's scale codes (registers)

// Timing diagnostics of the stage's arithmetic (kDiag instantiations only; wrong results): Params::dbg
// bit 2 no decode (the MMAs read the raw codes), bit 3 no MMAs (the decoded registers kept live by an
// empty asm), bit 4 an integer decode instead of cvt (Marlin-style: byte permute, mask, shift; timing
// only here: its pairs are (b0, b2), (b1, b3) and its values 2^-8 times the codes').
__device__ __forceinline__ void e4m3x4_int_decode(uint32_t d, uint32_t& lo, uint32_t& hi) {
  const uint32_t t = d << 8;
  lo = (t & 0x80008000u) | ((t & 0x7f007f00u) >> 1);
  hi = (d & 0x80008000u) | ((d & 0x7f007f00u) >> 1);
}

// The second weight of a pair launch (gemv_tmap_pair_kernel; NOTES 47): two projections of one x
// (wq_a + wkv, the shared expert's w1 + w3) in one grid. Its tiles follow the first weight's
// (combined tile t >= p.tiles is its tile t - p.tiles), so no tile spans the two; same columns,
// the same split (TR, cs, per_steps) and the same scale-block shape as the first weight.
struct Params1 {
  float* y = nullptr;
  const uint8_t* scale = nullptr;
  int64_t scale_cols = 0, row0 = 0;
  int num_rows = 0, tiles = 0;
};
// A tile's weight: its output, scale rows, rows and its own tile index lt.
struct TileW {
  float* y;
  const uint8_t* scale;
  int64_t scale_cols, row0;
  int num_rows, lt;
};
template <int kW>
__device__ __forceinline__ TileW tile_weight(int tile, const Params& p, const Params1& p1) {
  if (kW == 2 && tile >= p.tiles) return TileW{p1.y, p1.scale, p1.scale_cols, p1.row0, p1.num_rows, tile - p.tiles};
  return TileW{p.y, p.scale, p.scale_cols, p.row0, p.num_rows, tile};
}

// kW: weights in the launch (1: gemv_tmap_slim_kernel; 2: gemv_tmap_pair_kernel). Every tile's
// arithmetic is the single-weight kernel's, so each weight's y is bitwise what a single launch under
// the same split gives; x is staged once per CTA (pairs have no input groups).
template <int TR, bool kScaled, bool kDiag, int kW>
__device__ __forceinline__ void slim_body(const CUtensorMap* tmap0, const CUtensorMap* tmap1, const Params& p,
                                          const Params1& p1) {
  pdl_trigger();
  constexpr int CW = kSlimWarps;
  constexpr int M = TR / 16;
  constexpr int kBoxBytes = TR * kBoxCols;
  constexpr int NB = kStageBytes / kBoxBytes;
  constexpr int kCT = CW * 32;
  static_assert(M * NB == 16, "16 (m16 tile, box) units per stage, one per warp");
  extern __shared__ uint8_t smem_raw[];
  uint8_t* base = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  uint8_t* ring = base;
  uint16_t* xs = reinterpret_cast<uint16_t*>(base + p.stages * kStageBytes);
  float* red = reinterpret_cast<float*>(base + p.stages * kStageBytes + p.x_bytes);  // [2][cs][TR]
  float* ftab = red + (p.cs > 1 ? 2 * p.cs * TR : 0);                                  // [CW][kSlimTable]
  __shared__ __align__(8) uint64_t full[kMaxStages], empty[kMaxStages], red_full[2], red_free[2];
  __shared__ __align__(8) uint64_t gate;  // the consumers release the producer (Params::order)
  __shared__ float part[NB][TR];
  __shared__ uint32_t xmax;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int cs = p.cs;
  const int rank = cs > 1 ? int(cluster_rank()) : 0;
  const int cid = int(blockIdx.x) / cs;
  const int all_tiles = p.tiles + (kW == 2 ? p1.tiles : 0);
  const int my_tiles = (all_tiles - cid + p.nclusters - 1) / p.nclusters;
  const int step0 = rank * p.per_steps;
  const int nst = max(0, min(p.nsteps - step0, p.per_steps));
  const int spt = (nst + NB - 1) / NB;
  if (threadIdx.x == 0) gemv::mbar_init(&gate, uint32_t(CW));  // (init_ring_barriers fences and syncs)
  init_ring_barriers(full, empty, red_full, red_free, p.stages, CW, cs, TR);

  if (warp == CW) {
    // Producer: as gemv_tmap_kernel's, the slot, parity, tile and step advanced by increment.
    // With p.order > 0 it waits, before its first copy (orders 1, 2) or after one or two stages
    // (3, 4), until the consumers have issued their first loads, so those are not queued behind
    // the whole grid's first ring fill (~17 MB in flight at 4 stages: ~4 us at 4.27 TB/s).
    if (lane == 0) {
      asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(tmap0)) : "memory");
      if (kW == 2) asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(tmap1)) : "memory");
      int s = 0, si = 0, tile = cid;
      uint32_t ph = 0;
      const int total = my_tiles * spt;
      const int gate_at = p.order == 0 ? -1 : p.order <= 2 ? 0 : p.order - 2;
      for (int it = 0; it < total; ++it) {
        if (it == gate_at) mbar_wait(&gate, 0);
        mbar_wait(empty + s, ph ^ 1);
        const int k0 = step0 + si * NB;
        const int nb = min(NB, step0 + nst - k0);
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(gemv::smem_u32(full + s)),
                     "r"(uint32_t(nb * kBoxBytes))
                     : "memory");
        const uint32_t dst = gemv::smem_u32(ring + s * kStageBytes);
        const CUtensorMap* map = tmap0;
        int lt = tile;
        if (kW == 2 && tile >= p.tiles) {
          map = tmap1;
          lt = tile - p.tiles;
        }
        for (int j = 0; j < nb; ++j) tma_box(dst + j * kBoxBytes, map, (k0 + j) * kBoxCols, lt * TR, full + s);
        if (++si == spt) {
          si = 0;
          tile += p.nclusters;
        }
        if (++s == p.stages) {
          s = 0;
          ph ^= 1;
        }
      }
    }
    __syncwarp();
  } else {
    const int g = lane >> 2, q = lane & 3, mi = lane >> 3, ri = lane & 7;
    const int tile_u = warp % M, box_u = warp / M;  // this warp's unit of every stage
    const uint32_t lm_row = uint32_t(tile_u * 16 + ri + 8 * (mi & 1)) * kBoxCols;
    uint32_t lm_off[4];  // this lane's ldmatrix row address in the unit's box, per 32-column quarter
#pragma unroll
    for (int pp = 0; pp < 4; ++pp) lm_off[pp] = lm_row + (uint32_t((2 * pp + (mi >> 1)) ^ ri) << 4);
    const uint32_t unit_ring = gemv::smem_u32(ring) + uint32_t(box_u * kBoxBytes);
    const uint32_t xs_s = gemv::smem_u32(xs) + uint32_t(box_u * kBoxCols + 4 * q) * 2;  // + step * 256
    const uint32_t ftab_s = gemv::smem_u32(ftab + warp * kSlimTable) + uint32_t(box_u) * 16;  // + step * 16
    int64_t xgroup = -1;
    int sh = 0;
    int s = 0;
    uint32_t ph = 0;
    // The scale codes of this unit's rows for a tile's slice, entry j = the 32-column group
    // step0 * 128 + 32 j, into registers (the first tile's before pdl_wait: they are weights).
    const bool codes_on = kScaled && (p.dbg & 1) == 0;
    uint32_t codes[kSlimCodeRegs];
    auto load_codes = [&](int tile) {
      const TileW tw = tile_weight<kW>(tile, p, p1);
      const int64_t r = tw.row0 + min(tw.lt * TR + tile_u * 16, tw.num_rows - 1);
      const uint8_t* srow = tw.scale + (r >> p.block_rows_shift) * tw.scale_cols;
#pragma unroll
      for (int u = 0; u < kSlimCodeRegs; ++u) {
        const int j = lane + 32 * u;
        codes[u] = j < nst * 4 ? ldg_u8(srow + (min(step0 * kBoxCols + 32 * j, p.cols - 1) >> p.scale_shift)) : 0u;
      }
    };
    // The producer gate opens once, at a place known from the parameters (no flag kept live:
    // the kernel sits at its 96-register ceiling): order 1 here, orders 2-4 after tile 0's x loads
    // (or before its stages where x is not staged). A CTA without a tile issues no copy.
    // Each warp's lane 0 arrives after a __syncwarp, so all its lanes' loads are issued.
    const bool x_staged = !p.probe && (p.dbg & 2) == 0;
    auto open_gate = [&] {
      __syncwarp();
      if (lane == 0) mbar_arrive(&gate);
    };
    if (codes_on && my_tiles > 0) load_codes(cid);
    if (p.order == 1) open_gate();
    pdl_wait();
    for (int ti = 0; ti < my_tiles; ++ti) {
      const int tile = cid + ti * p.nclusters;
      const TileW tw = tile_weight<kW>(tile, p, p1);
      const int lr0 = tw.lt * TR;  // the tile's first row (of its weight's slice)
      const int64_t grp = p.x_group_rows > 0 ? int64_t(lr0) / p.x_group_rows : 0;
      if (codes_on) {
        // The warp's own factor table: only its lanes read it (after the __syncwarp), after the
        // last tile. The first tile's codes were loaded at the start; a later tile's load here
        // (holding them a tile ahead in registers spilled: 96 registers is the kernel's ceiling).
        __syncwarp();
        if (ti > 0) load_codes(tile);
#pragma unroll
        for (int u = 0; u < kSlimCodeRegs; ++u)
          if (lane + 32 * u < nst * 4) ftab[warp * kSlimTable + lane + 32 * u] = e8m0_f32(codes[u]);
        __syncwarp();
      }
      if (grp != xgroup && x_staged) {
        // x of this slice's columns in one pass (<= 8 float4 a thread: the host checks), bf16
        // (RNE), the slice's largest |bf16(x)| into [2^14, 2^15) by 2^sh, f16; zero past cols.
        if (ti > 0) named_bar_consumers<kCT>();
        const float* xrow = p.x + grp * p.x_group_step + int64_t(step0) * kBoxCols;
        const int nch = nst * (kBoxCols / 4), cleft = p.cols - step0 * kBoxCols;
        float4 v[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int i = threadIdx.x + u * kCT;
          v[u] = i < nch && 4 * i < cleft ? ldg_f4(xrow + 4 * i) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        if (p.order >= 2 && ti == 0) open_gate();
        if (threadIdx.x == 0) xmax = 0u;
        uint32_t m = 0;
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          m = max(m, __float_as_uint(fabsf(round_bf16_f(v[u].x))));
          m = max(m, __float_as_uint(fabsf(round_bf16_f(v[u].y))));
          m = max(m, __float_as_uint(fabsf(round_bf16_f(v[u].z))));
          m = max(m, __float_as_uint(fabsf(round_bf16_f(v[u].w))));
        }
        for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
        named_bar_consumers<kCT>();
        if (lane == 0) atomicMax(&xmax, m);
        named_bar_consumers<kCT>();
        const uint32_t mb = xmax;
        sh = (mb == 0u || mb >= 0x7f800000u) ? 0 : 14 - (max(int(mb >> 23), 1) - 127);
        const float f = ldexpf(1.0f, sh);
#pragma unroll
        for (int u = 0; u < 8; ++u) {
          const int i = threadIdx.x + u * kCT;
          if (i >= nch) continue;
          *reinterpret_cast<uint2*>(xs + 4 * i) =
              make_uint2(pack_f16x2(round_bf16_f(v[u].x) * f, round_bf16_f(v[u].y) * f),
                         pack_f16x2(round_bf16_f(v[u].z) * f, round_bf16_f(v[u].w) * f));
        }
        named_bar_consumers<kCT>();
        xgroup = grp;
      }
      if (p.order >= 2 && ti == 0 && !x_staged) open_gate();
      float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      // Running shared-memory addresses (kept in registers, not rebuilt from the parameters per
      // stage): the unit's factors and x advance one stage's boxes per stage, the ring slot wraps.
      uint32_t fptr = ftab_s, xptr = xs_s;
      for (int si = 0; si < spt; ++si, fptr += NB * 16, xptr += NB * kBoxCols * 2) {
        const bool mine = si * NB + box_u < nst;  // a slice's last, partial stage (uniform over the warp)
        float4 fac = make_float4(1.0f, 1.0f, 1.0f, 1.0f);
        if (codes_on && mine) fac = lds_f4(fptr);
        mbar_wait(full + s, ph);
        if (!p.probe && mine) {
          const uint32_t box = unit_ring + uint32_t(s) * kStageBytes;
          const float fp[4] = {fac.x, fac.y, fac.z, fac.w};
          // The swizzled row offsets stay in registers (an empty asm hides their derivation, so
          // the compiler does not rebuild them from the lane id every stage: ~20 instructions).
#pragma unroll
          for (int pp = 0; pp < 4; ++pp) asm volatile("" : "+r"(lm_off[pp]));
#pragma unroll
          for (int pp = 0; pp < 4; ++pp) {
            uint32_t d0, d1, d2, d3;
            ldsm_x4(box + lm_off[pp], d0, d1, d2, d3);
            const uint2 xa = lds_u2(xptr + 64 * pp);
            const uint2 xc = lds_u2(xptr + 64 * pp + 32);
            uint32_t a0, a1, a2, a3;
            float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            if constexpr (kDiag) {
              auto dec = [&](uint32_t x0, uint32_t x1) {
                if (p.dbg & 4) {
                  a0 = x0, a2 = x0 ^ 1u, a1 = x1, a3 = x1 ^ 1u;
                } else if (p.dbg & 16) {
                  e4m3x4_int_decode(x0, a0, a2);
                  e4m3x4_int_decode(x1, a1, a3);
                } else {
                  e4m3x4_to_f16x2x2(x0, a0, a2);
                  e4m3x4_to_f16x2x2(x1, a1, a3);
                }
              };
              dec(d0, d1);
              if (p.dbg & 8) asm volatile("" ::"r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(xa.x), "r"(xa.y));
              else mma_f16(c, a0, a1, a2, a3, xa.x, xa.y);
              dec(d2, d3);
              if (p.dbg & 8) asm volatile("" ::"r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(xc.x), "r"(xc.y));
              else mma_f16(c, a0, a1, a2, a3, xc.x, xc.y);
            } else {
              e4m3x4_to_f16x2x2(d0, a0, a2);
              e4m3x4_to_f16x2x2(d1, a1, a3);
              mma_f16(c, a0, a1, a2, a3, xa.x, xa.y);
              e4m3x4_to_f16x2x2(d2, a0, a2);
              e4m3x4_to_f16x2x2(d3, a1, a3);
              mma_f16(c, a0, a1, a2, a3, xc.x, xc.y);
            }
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[i] += c[i] * fp[pp];
          }
        }
        __syncwarp();
        if (lane == 0) mbar_arrive(empty + s);
        if (++s == p.stages) {
          s = 0;
          ph ^= 1;
        }
      }
      if (p.probe) continue;
      if (q == 0) {
        part[box_u][tile_u * 16 + g] = acc[0];
        part[box_u][tile_u * 16 + g + 8] = acc[2];
      }
      named_bar_consumers<kCT>();
      if (int(threadIdx.x) < TR) {
        const int r = threadIdx.x;
        float v = part[0][r];
#pragma unroll
        for (int b = 1; b < NB; ++b) v += part[b][r];
        // x's shift out: two power-of-two factors, each normal for sh in [-126, 252].
        v = v * __uint_as_float(uint32_t(127 - sh / 2) << 23) * __uint_as_float(uint32_t(127 - (sh - sh / 2)) << 23);
        store_row<TR>(tw.y, tw.num_rows, v, r, lr0, ti, my_tiles, cs, rank, red, red_full, red_free);
      }
      named_bar_consumers<kCT>();
    }
  }
  if (cs > 1) cluster_sync_all();
}

template <int TR, bool kScaled, bool kDiag = false>
__global__ void __launch_bounds__((kSlimWarps + 1) * 32, 1)
    gemv_tmap_slim_kernel(const __grid_constant__ CUtensorMap tmap, const Params p) {
  slim_body<TR, kScaled, kDiag, 1>(&tmap, &tmap, p, Params1{});
}
template <int TR, bool kScaled>
__global__ void __launch_bounds__((kSlimWarps + 1) * 32, 1)
    gemv_tmap_pair_kernel(const __grid_constant__ CUtensorMap tmap, const __grid_constant__ CUtensorMap tmap1,
                          const Params p, const Params1 p1) {
  slim_body<TR, kScaled, false, 2>(&tmap, &tmap1, p, p1);
}

// ---- host ----------------------------------------------------------------------------------

PFN_cuTensorMapEncodeTiled_v12000 encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      p = nullptr;
    cudaGetLastError();
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

std::atomic<int> g_stages{kDefaultStages};
std::atomic<bool> g_probe{false};

int max_dyn_smem() { return cached_device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin, 0); }

using KernelFn = void (*)(CUtensorMap, Params);
std::atomic<int> g_warps{8};
std::atomic<bool> g_f16{false};
std::atomic<bool> g_slim{false};

template <int TR, int C>
KernelFn pick(int cw, bool f16) {
  if (cw == 16) return f16 ? gemv_tmap_kernel<TR, C, 16, true> : gemv_tmap_kernel<TR, C, 16, false>;
  return f16 ? gemv_tmap_kernel<TR, C, 8, true> : gemv_tmap_kernel<TR, C, 8, false>;
}
template <int TR>
KernelFn pick_codes(int codes, int cw, bool f16) {
  return codes == 0 ? pick<TR, 0>(cw, f16) : codes == 4 ? pick<TR, 4>(cw, f16) : pick<TR, 8>(cw, f16);
}
KernelFn kernel_for(int tr, int codes, int cw = 8, bool f16 = false) {
  return tr == 64 ? pick_codes<64>(codes, cw, f16) : tr == 128 ? pick_codes<128>(codes, cw, f16)
                                                                : pick_codes<256>(codes, cw, f16);
}
KernelFn slim_kernel_for(int tr, bool scaled, int dbg = 0) {
  if ((dbg & 28) != 0 && scaled && (tr == 64 || tr == 256))  // the arithmetic diagnostics (NOTES 44)
    return tr == 64 ? gemv_tmap_slim_kernel<64, true, true> : gemv_tmap_slim_kernel<256, true, true>;
  if (tr == 64) return scaled ? gemv_tmap_slim_kernel<64, true> : gemv_tmap_slim_kernel<64, false>;
  if (tr == 128) return scaled ? gemv_tmap_slim_kernel<128, true> : gemv_tmap_slim_kernel<128, false>;
  return scaled ? gemv_tmap_slim_kernel<256, true> : gemv_tmap_slim_kernel<256, false>;
}

using PairFn = void (*)(CUtensorMap, CUtensorMap, Params, Params1);
PairFn pair_kernel_for(int tr, bool scaled) {
  if (tr == 64) return scaled ? gemv_tmap_pair_kernel<64, true> : gemv_tmap_pair_kernel<64, false>;
  if (tr == 128) return scaled ? gemv_tmap_pair_kernel<128, true> : gemv_tmap_pair_kernel<128, false>;
  return scaled ? gemv_tmap_pair_kernel<256, true> : gemv_tmap_pair_kernel<256, false>;
}

// Static shared memory of the kernels (barriers, part) is < 4 KB; the dynamic part is the ring,
// x, the cluster reduction and 1 KB for the 1024-byte alignment.
constexpr int kStaticSmem = 4096;

// Resident clusters of cs CTAs (one per SM at this shared-memory size): the GPCs, not
// SMs / cs, bound it. Cached per device and cs.
int max_clusters(int cs, int dyn_smem) {
  if (cs == 1) return device_sm_count();
  static std::mutex mu;
  static std::map<std::tuple<int, int>, int> cache;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(device, cs);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  KernelFn k = kernel_for(128, 4);  // 288 threads; one CTA per SM whatever the consumer (shared memory)
  int v = 0;
  if (cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn_smem) == cudaSuccess) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(unsigned(cs * 16));
    cfg.blockDim = dim3(9 * 32);
    cfg.dynamicSmemBytes = size_t(dyn_smem);
    LaunchAttrs attrs;
    attrs.cluster(unsigned(cs)).apply(cfg);
    if (cudaOccupancyMaxActiveClusters(&v, k, &cfg) != cudaSuccess) v = 0;
  }
  cudaGetLastError();
  cache[key] = v > 0 ? v : std::max(1, device_sm_count() / cs);
  return cache[key];
}

struct Plan {
  int tr = 0, cs = 1, nclusters = 0, per_steps = 0, stages = 0, x_bytes = 0, dyn_smem = 0;
  bool ok = false;
};

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The split: the fewest bytes for the busiest CTA (each cluster round costs a tile's bytes of
// its slice; a cluster reduction per round counts as 4 KB), ties to fewer ranks, then larger
// tiles. A function of the shape, the SM count and the ring depth only.
// A forced split (tr, cs) for A/B measurements of the plan (gemv_set_tmap_force; 0: the plan's
// own choice). Where the forced split cannot run the shape, the plan's own choice stands.
std::atomic<int> g_force_tr{0}, g_force_cs{0};

// What a launch runs: the ring depth, the consumer and a forced split. kTmap (the A/B kind) takes
// the process-wide settings above; kAuto its own fixed choice (auto_config), so a bench's settings
// never change what the default runs.
struct Config {
  int stages = kDefaultStages, warps = 8;
  bool f16 = false, slim = false;
  int force_tr = 0, force_cs = 0;
  int order = 0, dbg = 0;  // the slim kernel's Params::order and ::dbg
};
// kAuto's order 3 (NOTES 44, runs 36 and 38): one stage streams before the gate, the rest after the
// consumers have issued their scale-code and x loads. us at n = 1 (order 0 / 2 / 3): wq_b 16.21 /
// 15.20 / 14.31, wo_a 12.90 / 13.00 / 11.98, wo_b 15.88 / 15.14 / 14.68; the 7 layers at batch 1
// 1.722 (order 0) / 1.721 (2) / 1.703 ms (3).
std::atomic<int> g_order{0}, g_dbg{0}, g_auto_order{3};
std::atomic<bool> g_auto_rounds{true};  // auto_config's whole-K tiles over several rounds (A/B)
std::atomic<int64_t> g_auto_min_bytes{kGemvTmapAutoMinBytes};
Config global_config() {
  return Config{std::clamp(g_stages.load(), 2, kMaxStages), g_warps.load(), g_f16.load(), g_slim.load(),
                g_force_tr.load(), g_force_cs.load(), g_order.load(), g_dbg.load()};
}

// kAuto at one token (NOTES 41, run 33): the slim consumer on a 4-stage ring (wq_b 15.7 us against
// kXs 17.8, wo_a 12.6 against 17.0; the 7 layers at batch 1 -1.9% with it on the >= 30 MB
// weights), and whole-K 64-row tiles without a cluster split where they fill between half of the
// SMs and all of them in one round: the plan's cost model prefers wo_b's 15 clusters of 8 (3
// rounds of 128-row tiles, 20.8 us), whole-K 64-row tiles on 80 CTAs measured 15.9. Also over
// several rounds where the plan would split K over clusters (NOTES 44, run 39: the Engram wkv,
// 25600 x 6144, 62.6 us on the plan's clusters of 8, 46.2 on whole-K 64-row tiles; where the plan
// keeps whole K, as wq_b's 256-row tiles, its choice stands: 14.3 against 16.7). Its start order:
// g_auto_order (3 since NOTES 44).
Plan cached_plan(const LinearArgs& a, const Config& cfg, int64_t rows1 = 0);
Config auto_config(const LinearArgs& a) {
  Config c;
  c.stages = 4;
  c.warps = 16;
  c.f16 = c.slim = true;
  c.order = g_auto_order.load();
  const int64_t tiles64 = ceil_div(a.num_rows, 64), sms = device_sm_count();
  if (2 * tiles64 >= sms && (a.x_group_rows == 0 || a.x_group_rows % 64 == 0) &&
      (tiles64 <= sms || (g_auto_rounds.load() && cached_plan(a, c).cs > 1))) {
    c.force_tr = 64;
    c.force_cs = 1;
  }
  return c;
}

// rows1 > 0: a pair launch's second weight (same columns), its tiles after the first's.
Plan make_plan(const LinearArgs& a, const Config& cfg, int64_t rows1 = 0) {
  Plan best;
  const int64_t cols = a.w.cols, rows = a.num_rows;
  const int64_t nsteps = ceil_div(cols, kBoxCols);
  const int want_stages = std::clamp(cfg.stages, 2, kMaxStages);
  const int smem_cap = max_dyn_smem() - kStaticSmem;
  const int ftr = cfg.force_tr, fcs = cfg.force_cs;
  const bool slim = cfg.slim;
  int64_t best_cost = INT64_MAX;
  for (int pass = ftr > 0 ? 0 : 1; pass < 2 && !best.ok; ++pass) {  // pass 0: the forced split only
    for (const int tr : {256, 128, 64}) {
      if (pass == 0 && tr != ftr) continue;
      if (a.x_group_rows > 0 && a.x_group_rows % tr != 0) continue;
      const int64_t tiles = ceil_div(rows, tr) + (rows1 > 0 ? ceil_div(rows1, tr) : 0);
      for (int cs = 1; cs <= kMaxCluster && cs <= nsteps; ++cs) {
        if (pass == 0 && fcs > 0 && cs != fcs) continue;
        const int64_t per = ceil_div(nsteps, cs);
        if ((cs - 1) * per >= nsteps) continue;     // an empty slice
        if (slim && per * 4 > kSlimTable) continue;  // the slim consumer's factor table
        const int x_bytes = int(per * kBoxCols * 2);
        const int red_bytes = (cs > 1 ? 2 * cs * tr * 4 : 0) + (slim ? kSlimWarps * kSlimTable * 4 : 0);
        const int stages = std::min<int64_t>(want_stages, (smem_cap - 1024 - x_bytes - red_bytes) / kStageBytes);
        if (stages < 2) continue;
        const int dyn = 1024 + stages * kStageBytes + x_bytes + red_bytes;
        const int64_t nc = std::min<int64_t>(tiles, max_clusters(cs, dyn));
        const int64_t rounds = ceil_div(tiles, nc);
        const int64_t cost = rounds * (tr * per * kBoxCols + (cs > 1 ? 4096 : 0));
        if (cost < best_cost) {
          best_cost = cost;
          best.tr = tr;
          best.cs = cs;
          best.nclusters = int(nc);
          best.per_steps = int(per);
          best.stages = stages;
          best.x_bytes = x_bytes;
          best.dyn_smem = dyn;
          best.ok = true;
        }
      }
    }
  }
  return best;
}

// The tensor map of a call: the slice's rows [row0, row0 + num_rows) x cols bytes; boxes of 128
// bytes x TR rows, 128-byte swizzle (conflict-free ldmatrix), zeros outside (row and column tails).
bool encode_map(const LinearArgs& a, int tr, CUtensorMap* map) {
  const auto fn = encoder();
  if (fn == nullptr) return false;
  const WeightArgs& w = a.w;
  const cuuint64_t dims[2] = {cuuint64_t(w.cols), cuuint64_t(a.num_rows)};
  const cuuint64_t strides[1] = {cuuint64_t(w.cols)};
  const cuuint32_t box[2] = {cuuint32_t(kBoxCols), cuuint32_t(tr)};
  const cuuint32_t estr[2] = {1, 1};
  return fn(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<uint8_t*>(w.data + a.row0 * w.cols), dims, strides, box,
            estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// Host cost (helper gvn1, NOTES 41): a launch used to plan twice and encode its tensor map twice
// (eligible, then launch; a third time through gemv_tmap_wants), and set the kernel's shared-
// memory attribute every time: ~10 us of host time per call, which bounded the eager op loop on
// the weights under ~12 MB (NOTES 38). Both are functions of their key alone, so they are cached
// (per device): the plan by (shape, groups, ring depth), the map by (base pointer, rows, cols,
// tile rows) -- a map encodes nothing else, so a freed and reused address gets the same map.
struct PlanKey {
  int device;
  int64_t rows, cols, groups;
  int stages, force;
  int64_t rows1;  // a pair's second weight (0: a single call)
  bool operator<(const PlanKey& o) const {
    return std::tie(device, rows, cols, groups, stages, force, rows1) <
           std::tie(o.device, o.rows, o.cols, o.groups, o.stages, o.force, o.rows1);
  }
};
struct MapKey {
  int device;
  const void* base;
  int64_t rows, cols;
  int tr;
  bool operator<(const MapKey& o) const {
    return std::tie(device, base, rows, cols, tr) < std::tie(o.device, o.base, o.rows, o.cols, o.tr);
  }
};
std::mutex g_cache_mu;
std::map<PlanKey, Plan> g_plans;
std::map<MapKey, std::pair<bool, CUtensorMap>> g_maps;
std::map<std::tuple<int, const void*>, int> g_attr;  // (device, kernel) -> dynamic smem set

int current_device() {
  int d = 0;
  if (cudaGetDevice(&d) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return d;
}

Plan cached_plan(const LinearArgs& a, const Config& cfg, int64_t rows1) {
  const PlanKey k{current_device(),
                  a.num_rows,
                  a.w.cols,
                  a.x_group_rows,
                  std::clamp(cfg.stages, 2, kMaxStages),
                  (cfg.force_tr * 16 + cfg.force_cs) * 2 + (cfg.slim ? 1 : 0),
                  rows1};
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = g_plans.find(k);
    if (it != g_plans.end()) return it->second;
  }
  const Plan pl = make_plan(a, cfg, rows1);  // outside the lock: max_clusters takes its own
  std::lock_guard<std::mutex> lock(g_cache_mu);
  g_plans[k] = pl;
  return pl;
}

bool cached_map(const LinearArgs& a, int tr, CUtensorMap* map) {
  const MapKey k{current_device(), a.w.data + a.row0 * a.w.cols, a.num_rows, a.w.cols, tr};
  std::lock_guard<std::mutex> lock(g_cache_mu);
  auto it = g_maps.find(k);
  if (it == g_maps.end()) {
    std::pair<bool, CUtensorMap> v;
    v.first = encode_map(a, tr, &v.second);
    if (g_maps.size() > 4096) g_maps.clear();  // bound the cache (tests and benches make many weights)
    it = g_maps.emplace(k, v).first;
  }
  if (it->second.first) *map = it->second.second;
  return it->second.first;
}

// Any kernel pointer type (the single and the pair kernels): one cache of the attribute per device.
template <typename Fn>
cudaError_t set_smem_once(Fn k, int dyn_smem) {
  const auto key = std::make_tuple(current_device(), reinterpret_cast<const void*>(k));
  std::lock_guard<std::mutex> lock(g_cache_mu);
  auto it = g_attr.find(key);
  if (it != g_attr.end() && it->second >= dyn_smem) return cudaSuccess;
  const cudaError_t e = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, dyn_smem);
  if (e == cudaSuccess) g_attr[key] = dyn_smem;
  return e;
}

// The launch both kernels (single weight, pair) take: the plan's CTAs in clusters of pl.cs, `warps`
// consumer warps and the producer warp, the plan's dynamic shared memory, PDL where it is on.
template <typename Fn, typename... Args>
cudaError_t launch_planned(const Plan& pl, int warps, cudaStream_t stream, Fn k, Args... args) {
  if (const cudaError_t e = set_smem_once(k, pl.dyn_smem); e != cudaSuccess) return e;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(pl.nclusters * pl.cs));
  cfg.blockDim = dim3(unsigned((warps + 1) * 32));
  cfg.dynamicSmemBytes = size_t(pl.dyn_smem);
  cfg.stream = stream;
  LaunchAttrs attrs;
  if (pl.cs > 1) attrs.cluster(unsigned(pl.cs));
  attrs.pdl(gemv_pdl()).apply(cfg);
  return cudaLaunchKernelEx(&cfg, k, args...);
}

bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
int log2i(int64_t v) {
  int s = 0;
  while ((int64_t(1) << s) < v) ++s;
  return s;
}

// The kernel's shape rules for a call (no plan).
bool shape_ok(const LinearArgs& a) {
  const WeightArgs& w = a.w;
  const bool scales_ok = w.scale_format == SFormat::kNone ||
                         (w.scale_format == SFormat::kE8M0 && pow2(w.block_cols) && w.block_cols >= 16 &&
                          pow2(w.block_rows) && w.block_rows >= 16 && a.row0 % 16 == 0);
  if (!(a.n == 1 && a.bf16_x && w.format == WFormat::kE4M3 && scales_ok && w.cols % 16 == 0 &&
        w.cols < (int64_t(1) << 30) && a.num_rows < (int64_t(1) << 30) &&
        (a.x_group_rows == 0 || a.x_group_rows % 64 == 0) && linear_gemv_eligible(a)))
    return false;
  return true;
}

// Whether a call can run under cfg: the kernel's shape rules, a plan and a tensor map.
bool eligible(const LinearArgs& a, const Config& cfg) {
  if (!shape_ok(a)) return false;
  const Plan pl = cached_plan(a, cfg);
  CUtensorMap map;
  return pl.ok && cached_map(a, pl.tr, &map);
}

// ---- pairs (NOTES 47): two weights of one x in one launch of the slim kernel --------------------
// kAuto's pair configuration: the slim consumer at kAuto's start order on a 4-stage ring; whole-K
// 64-row tiles without clusters where both weights' tiles fill between half of the SMs and all of them
// in one round (shared w1 + w3: 72 CTAs, 9.2 us in run pair, where the plan's cost model took 64-row
// tiles over 15 clusters of 8 in 5 rounds, 25.2 us), the plan's own split over both weights' tiles
// elsewhere (wq_a + wkv: 128-row tiles over 14 clusters of 8, 7.4 us). A forced split and the ring
// depth for A/B: gemv_set_tmap_pair_config.
std::atomic<int> g_pair_stages{4}, g_pair_tr{0}, g_pair_cs{0};
Config pair_config(const LinearArgs* calls) {
  Config c;
  c.stages = g_pair_stages.load();
  c.warps = 16;
  c.f16 = c.slim = true;
  c.order = g_auto_order.load();
  c.force_tr = g_pair_tr.load();
  c.force_cs = g_pair_tr.load() > 0 ? g_pair_cs.load() : 0;
  if (c.force_tr == 0) {
    const int64_t tiles64 = ceil_div(calls[0].num_rows, 64) + ceil_div(calls[1].num_rows, 64),
                  sms = device_sm_count();
    if (2 * tiles64 >= sms && tiles64 <= sms) {
      c.force_tr = 64;
      c.force_cs = 1;
    }
  }
  return c;
}
// Whether the pair kernel takes calls[0..1] under cfg (the plan, when it does): both one-token bf16-x
// e4m3 calls the kernel takes alone, on the same x (staged once), the same columns and scale-block
// shape (blocks of >= 32 columns: the slim consumer's table), no input groups; a plan over both
// weights' tiles and a tensor map per weight at its tile rows.
bool pair_eligible(const LinearArgs* c, const Config& cfg, Plan* plan) {
  const LinearArgs &a = c[0], &b = c[1];
  if (!shape_ok(a) || !shape_ok(b) || a.x != b.x || a.w.cols != b.w.cols || a.x_group_rows != 0 ||
      b.x_group_rows != 0 || a.w.scale_format != b.w.scale_format)
    return false;
  if (a.w.scale_format == SFormat::kE8M0 &&
      (a.w.block_rows != b.w.block_rows || a.w.block_cols != b.w.block_cols || a.w.block_cols < 32))
    return false;
  const Plan pl = cached_plan(a, cfg, b.num_rows);
  CUtensorMap m;
  if (!pl.ok || !cached_map(a, pl.tr, &m) || !cached_map(b, pl.tr, &m)) return false;
  if (plan != nullptr) *plan = pl;
  return true;
}

}  // namespace

cudaError_t launch(const LinearArgs& a, cudaStream_t stream, const Config& conf);

}  // namespace deepinfer::kernels::gemv_tmap

namespace deepinfer::kernels {

void gemv_set_tmap(int stages, bool probe) {
  gemv_tmap::g_stages = stages > 0 ? stages : gemv_tmap::kDefaultStages;
  gemv_tmap::g_probe = probe;
}
int gemv_tmap_stages() { return gemv_tmap::g_stages.load(); }
bool gemv_tmap_probe() { return gemv_tmap::g_probe.load(); }
namespace {
std::atomic<int64_t> g_tmap_min_bytes{0};
}  // namespace
void gemv_set_tmap_min_bytes(int64_t bytes) { g_tmap_min_bytes = bytes > 0 ? bytes : 0; }
bool gemv_tmap_wants(const LinearArgs& a) {
  return a.num_rows * a.w.cols >= g_tmap_min_bytes.load() && linear_gemv_tmap_eligible(a);
}
void gemv_set_tmap_consumer(int warps, bool f16) {
  gemv_tmap::g_warps = warps == 16 ? 16 : 8;
  gemv_tmap::g_f16 = f16;
}
void gemv_set_tmap_slim(bool slim) { gemv_tmap::g_slim = slim; }
void gemv_set_tmap_force(int tr, int cs) {
  const bool ok = tr == 64 || tr == 128 || tr == 256;
  gemv_tmap::g_force_tr = ok ? tr : 0;
  gemv_tmap::g_force_cs = ok ? std::clamp(cs, 0, gemv_tmap::kMaxCluster) : 0;
}
bool gemv_tmap_slim() { return gemv_tmap::g_slim.load(); }

bool linear_gemv_tmap_eligible(const LinearArgs& a) { return gemv_tmap::eligible(a, gemv_tmap::global_config()); }

namespace {
std::atomic<bool> g_tmap_auto{true};
}  // namespace
void gemv_set_tmap_auto(bool on) { g_tmap_auto = on; }
void gemv_set_tmap_order(int order, int dbg) {
  gemv_tmap::g_order = std::clamp(order, 0, 4);
  gemv_tmap::g_dbg = dbg & 31;
}
void gemv_set_tmap_auto_rounds(bool on) { gemv_tmap::g_auto_rounds = on; }
void gemv_set_tmap_auto_order(int order) { gemv_tmap::g_auto_order = std::clamp(order, 0, 4); }
void gemv_set_tmap_auto_min_bytes(int64_t bytes) {
  gemv_tmap::g_auto_min_bytes = bytes > 0 ? bytes : kGemvTmapAutoMinBytes;
}

namespace {
// kPairDefault: the pair rule's mode when neither the setter nor DEEPINFER_GEMV_PAIR says (NOTES 47,
// run pair: the 7 layers at batch 1 1.686 -> 1.674 ms with the pair kernel on wq_a + wkv only; 1.706
// with it on the shared expert's pair too, at a split later replaced, see pair_config; run 45, with
// whole-K 64-row tiles for the shared pair: mode 1 1.648 against mode 3's 1.668 ms, three A/B rounds).
constexpr int kPairDefault = 1;
std::atomic<int> g_pair_mode{-1};  // -1: not read yet
}  // namespace
void gemv_set_tmap_pair(int mode) { g_pair_mode = mode < 0 ? -1 : std::min(mode, 3); }
int gemv_tmap_pair_mode() {
  return resolve_env_switch(g_pair_mode, "DEEPINFER_GEMV_PAIR", 0, 3,
                            [](const EnvDigit& e) { return e.valid ? e.value : kPairDefault; });
}
void gemv_set_tmap_pair_config(int stages, int tr, int cs) {
  gemv_tmap::g_pair_stages = stages > 0 ? std::clamp(stages, 2, gemv_tmap::kMaxStages) : 4;
  const bool ok = tr == 64 || tr == 128 || tr == 256;
  gemv_tmap::g_pair_tr = ok ? tr : 0;
  gemv_tmap::g_pair_cs = ok ? std::clamp(cs, 0, gemv_tmap::kMaxCluster) : 0;
}
bool gemv_tmap_pair_takes(const LinearArgs* calls, int count) {
  const int mode = gemv_tmap_pair_mode();
  if (calls == nullptr || count != 2 || mode == 0 || calls[0].one_kernel || calls[1].one_kernel) return false;
  // Mode 2: only outside a concurrent branch (the model's branches cap bulk launches per SM). Mode 3:
  // pairs of at most kGemvTmapPairMaxBytes (wq_a + wkv, not the shared expert's w1 + w3) -- the same
  // launches as mode 2 in the layers, but a rule of the shape, not of the stream, so a model with its
  // branches on runs the same kernels as one without (bitwise the one-stream logits, NOTES 33).
  if (mode == 2 && gemv_bulk_blocks_per_sm() > 0) return false;
  if (mode == 3 && calls[0].num_rows * calls[0].w.cols + calls[1].num_rows * calls[1].w.cols > kGemvTmapPairMaxBytes)
    return false;
  return gemv_tmap::pair_eligible(calls, gemv_tmap::pair_config(calls), nullptr);
}
void gemv_tmap_pair_plan(const LinearArgs* calls, int* tr, int* cs, int* nclusters, int* stages) {
  gemv_tmap::Plan pl;
  if (!gemv_tmap::pair_eligible(calls, gemv_tmap::pair_config(calls), &pl)) pl = gemv_tmap::Plan{};
  if (tr) *tr = pl.ok ? pl.tr : 0;
  if (cs) *cs = pl.cs;
  if (nclusters) *nclusters = pl.nclusters;
  if (stages) *stages = pl.stages;
}

bool gemv_tmap_auto_takes(const LinearArgs& a) {
  return g_tmap_auto.load() && !a.one_kernel && a.num_rows * a.w.cols >= gemv_tmap::g_auto_min_bytes.load() &&
         gemv_tmap::eligible(a, gemv_tmap::auto_config(a));
}

}  // namespace deepinfer::kernels

namespace deepinfer::kernels::gemv_tmap {

cudaError_t launch(const LinearArgs& a, cudaStream_t stream) { return launch(a, stream, global_config()); }
cudaError_t launch_auto(const LinearArgs& a, cudaStream_t stream) { return launch(a, stream, auto_config(a)); }

namespace {
// A call's kernel parameters under a plan (its weight's fields, the split, the ring).
Params make_params(const LinearArgs& a, const Plan& pl, const Config& conf) {
  const WeightArgs& w = a.w;
  Params p;
  p.x = a.x;
  p.y = a.y;
  const bool scaled = w.scale_format == SFormat::kE8M0;
  p.scale = scaled ? w.scale : nullptr;
  p.scale_cols = w.scale_cols;
  p.row0 = a.row0;
  p.x_group_rows = a.x_group_rows;
  p.x_group_step = a.x_group_step;
  p.block_rows_shift = scaled ? log2i(w.block_rows) : 0;
  p.scale_shift = scaled ? log2i(w.block_cols) : 0;
  p.num_rows = int(a.num_rows);
  p.cols = int(w.cols);
  p.tiles = int(ceil_div(a.num_rows, pl.tr));
  p.cs = pl.cs;
  p.nclusters = pl.nclusters;
  p.per_steps = pl.per_steps;
  p.nsteps = int(ceil_div(w.cols, kBoxCols));
  p.stages = pl.stages;
  p.x_bytes = pl.x_bytes;
  p.probe = g_probe.load() ? 1 : 0;
  p.order = conf.order;
  p.dbg = conf.dbg;
  return p;
}
}  // namespace

thread_local int t_max_ctas = 0;  // gemv_set_tmap_max_ctas (per host thread, as the bulk cap)

cudaError_t launch(const LinearArgs& a, cudaStream_t stream, const Config& conf) {
  if (!eligible(a, conf)) return cudaErrorInvalidValue;
  Plan pl = cached_plan(a, conf);
  if (t_max_ctas > 0 && pl.cs == 1 && pl.nclusters > t_max_ctas) pl.nclusters = t_max_ctas;  // more rounds
  const WeightArgs& w = a.w;
  CUtensorMap map;
  if (!cached_map(a, pl.tr, &map)) return cudaErrorInvalidValue;
  const Params p = make_params(a, pl, conf);
  const bool scaled = w.scale_format == SFormat::kE8M0;
  const int codes = !scaled ? 0 : w.block_cols >= 32 ? 4 : 8;
  // slim: its own kernel (16 consumer warps, f16) where it takes the scales (none, or blocks of >= 32
  // columns); 16-column blocks run the 16-warp f16 consumer (the plan left room for the table).
  const bool slim = conf.slim && codes != 8;
  const int cw = conf.slim || conf.warps == 16 ? 16 : 8;
  KernelFn k = slim ? slim_kernel_for(pl.tr, scaled, conf.dbg) : kernel_for(pl.tr, codes, cw, conf.f16 || conf.slim);
  return launch_planned(pl, cw, stream, k, map, p);
}

// Two calls of one x in one launch (gemv_tmap_pair_kernel): the first weight's tiles, then the
// second's, over the plan's clusters; each tile as a single launch of its weight under that split.
cudaError_t launch_pair(const LinearArgs* calls, cudaStream_t stream, const Config& conf) {
  Plan pl;
  if (!pair_eligible(calls, conf, &pl)) return cudaErrorInvalidValue;
  CUtensorMap m0, m1;
  if (!cached_map(calls[0], pl.tr, &m0) || !cached_map(calls[1], pl.tr, &m1)) return cudaErrorInvalidValue;
  const Params p = make_params(calls[0], pl, conf);
  const LinearArgs& b = calls[1];
  Params1 p1;
  p1.y = b.y;
  p1.scale = p.scale != nullptr ? b.w.scale : nullptr;
  p1.scale_cols = b.w.scale_cols;
  p1.row0 = b.row0;
  p1.num_rows = int(b.num_rows);
  p1.tiles = int(ceil_div(b.num_rows, pl.tr));
  PairFn k = pair_kernel_for(pl.tr, p.scale != nullptr);
  return launch_planned(pl, kSlimWarps, stream, k, m0, m1, p, p1);
}
cudaError_t launch_pair_auto(const LinearArgs* calls, cudaStream_t stream) {
  return launch_pair(calls, stream, pair_config(calls));
}

// The plan of a call, for flash_layers' lines and the tests (tr 0: not eligible).
}  // namespace deepinfer::kernels::gemv_tmap

namespace deepinfer::kernels {
void gemv_set_tmap_max_ctas(int ctas) { gemv_tmap::t_max_ctas = ctas > 0 ? ctas : 0; }
int gemv_tmap_max_ctas() { return gemv_tmap::t_max_ctas; }
namespace {
std::atomic<int> g_engram_wkv_mode{-1};
}  // namespace
void engram_wkv_set_mode(int mode) { g_engram_wkv_mode = mode < 0 ? -1 : std::min(mode, 3); }
int engram_wkv_mode() {
  return resolve_env_switch(g_engram_wkv_mode, "DEEPINFER_ENGRAM_WKV", 0, 3,
                            [](const EnvDigit& e) { return e.valid ? e.value : kEngramWkvDefault; });
}
void gemv_tmap_plan(const LinearArgs& a, int* tr, int* cs, int* nclusters, int* stages) {
  gemv_tmap::Plan pl;
  if (linear_gemv_tmap_eligible(a)) pl = gemv_tmap::cached_plan(a, gemv_tmap::global_config());
  if (tr) *tr = pl.ok ? pl.tr : 0;
  if (cs) *cs = pl.cs;
  if (nclusters) *nclusters = pl.nclusters;
  if (stages) *stages = pl.stages;
}
}  // namespace deepinfer::kernels
