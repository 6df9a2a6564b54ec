// Tensor-core FP4 tiles of the grouped MoE (smxx_moe.cuh, moe_tc): e2m1 experts with
// 1x32 ue8m0 scales, every tile height (1..64 rows), both activation modes.
//
// Why (bench/flash/NOTES.md §4 and "MoE FP4 tensor-core tiles"): the SIMT gemv spent
// ~42 integer ops + 8 conversions per 8 FP4 codes and 32 FMAs per row per token on every
// 16-byte vector, i.e. ~240 issue slots per vector at batch 1 against ~125 available per
// vector at 4.27 TB/s on 132 SMs: it ran at ~15% of bandwidth, and n rows cost n times
// the FMAs. Here a warp
// owns 16 weight rows x (8 .. 64) tokens and the dot products run on mma.sync
// m16n8k16 (bf16 in, fp32 out), so the per-vector cost is the decode (~19 ops per 8
// codes: byte-table PRMTs to exact bf16, sign by PRMT sign-replication, one bf16x2
// multiply by the power-of-two scale) plus 4 MMAs per 1..8 tokens.
//
// Layout: in each 128-column chunk thread (g = lane / 4, c = lane % 4) loads 16 bytes =
// 32 codes = one whole scale block of its two rows (g and g + 8 of the warp's 16), and
// supplies the MMA's k slots {2c, 2c + 1, 2c + 8, 2c + 9} of step j (0..7) from its
// codes 4j .. 4j + 3. The MMA sums over k in any order of slots, so B (x) is read at the
// same columns 32c + 4j .. + 3 of the token row: x is pre-split into bf16 planes (one
// plane under Activations::kBF16, hi / mid / lo = the fp32 value exactly under kF32), so
// B fragments are plain 16-byte loads. Products are exact (e2m1 x 2^k and bf16 x bf16
// in fp32); the MMA accumulator is promoted into fp32 every 32 columns under kF32 (the
// truncation bias of long MMA chains, NOTES §4) and every 128 under kBF16.
//
// Determinism / batch invariance: a token column of an MMA depends only on that column,
// the K split (ks) is a function of K and the tile kind, the cross-warp sums are added in
// slice order. So a row's result depends on neither the batch nor the other rows of its
// tile; kInvariant runs every expert on the 8-row tiles.
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear_mma.cuh"
#include "kernels/cuda/smxx_moe.cuh"
#include "kernels/cuda/smxx_moe_decode.cuh"
#include "kernels/cuda/smxx_moe_terms.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kTcWarps = 8;

using mma::mma_bf16;  // d += a b (m16n8k16, bf16 in, fp32 out)

// d = a b + 0: the first MMA of a promotion window (no zeroing moves).
__device__ __forceinline__ void mma_bf16_zero(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
#endif
}

__device__ __forceinline__ uint4 ld_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

using moe_decode::decode8;
using moe_decode::scale_bf16x2;
using moe_decode::kHi0;
using moe_decode::kHi1;
using moe_decode::kLo0;
using moe_decode::kLo1;
using moe_decode::mul_bf16x2;
using moe_decode::prmt;

using moe_terms::store_terms;

// Stores token row p (the thread's token h of its pair) of a warp's MMA fragment d:
// d[h] comes from the warp's weight row g, d[2 + h] from row g + 8. Stage 1: those are
// the w1 and w3 rows of output o (gate and up), whose SwiGLU goes into the h planes at
// column o. Stage 2: the w2 rows o and o + 8, both stored to y.
template <int kStage, int kTerms>
__device__ __forceinline__ void store_fragment_row(const MoeGroupedArgs& a, const float (&d)[4], int h, int64_t p,
                                                   int64_t out_rows, int64_t o) {
  if constexpr (kStage == 1) {
    const float v = moe_terms::swiglu(d[h], d[2 + h], a.limit, a.row_weight ? a.row_weight[p] : 0.0f,
                                      a.row_weight != nullptr);
    store_terms<kTerms>(a.ht, a.ht_plane, p * out_rows + o, v);
  } else {
    a.y[p * out_rows + o] = d[h];
    a.y[p * out_rows + o + 8] = d[2 + h];
  }
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(uint32_t(__cvta_generic_to_shared(smem))), "l"(gmem));
}

// The same copy, also ordered after the thread's earlier memory accesses (compiler
// level): a ring slot is refilled only after the reads of its previous chunk.
__device__ __forceinline__ void cp_async16_mem(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(uint32_t(__cvta_generic_to_shared(smem))), "l"(gmem)
               : "memory");
}

// Waits until at most kPending of the thread's cp.async groups are in flight; "memory":
// the shared-memory reads after it stay after it.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// Grid (tile, block of output rows). Block: 8 warps = (8 / ks) row groups x ks slices of
// K. A warp: 16 weight rows (stage 1: w1 rows o0 .. o0 + 7 then w3 rows o0 .. o0 + 7, so
// a thread holds gate and up of the same output; stage 2: w2 rows o0 .. o0 + 15) x kNT8
// token tiles of 8.
// The block's work on one (tile, block of output rows by): moe_tc_kernel runs one per
// block, moe_tc_fused_kernel a sequence of them. kWarps: the block's warps (>= ks);
// kDepth: chunks of weights in flight ahead of the MMAs; red: [kWarps][32][4] floats
// (kNT8 == 1). Per output the arithmetic depends only on K, ks and the tile, not on
// kWarps or kDepth: the K slices are (chunks / ks)-runs of chunks, and slice 0 adds the
// others in slice order, whatever the block shape.
//
// kRing > 0 (moe_tc_fused): the weights come through a per-warp cp.async ring of kRing
// chunks in shared memory (ring: the warp's kRing KB; slot s holds row a's 16 bytes of
// lane l at s * 1024 + l * 16, row b's at + 512) instead of kDepth registers: kRing KB in
// flight per warp at no register cost. A thread reads back only the bytes it copied
// (cp.async.wait_group, no barrier) and refills a slot only after its words were decoded.
// Scale bytes stay in the kDepth register queue. Same words, same arithmetic.
template <int kStage, int kTerms, int kNT8, int kWarps, int kDepth, int kRing = 0>
__device__ __forceinline__ void tc_tile(const MoeGroupedArgs& a, int ks, int64_t tile_idx, int64_t by,
                                        float (*red)[32][4], uint8_t* ring = nullptr) {
  constexpr int kOutPerWarp = kStage == 1 ? 8 : 16;
  constexpr int kWindow = kTerms == 3 ? 1 : 4;  // words (32 columns) per promotion window
  const MoeTile tile = a.tiles[tile_idx];
  const MoeExpertPtrs& ex = a.experts[tile.expert];
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  const int64_t K = L.cols, out_rows = L.rows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int slice = warp % ks, group = warp / ks, groups = kWarps / ks;
  const int64_t o0 = (by * groups + group) * kOutPerWarp;
  const bool active = o0 < out_rows;  // warp-uniform; inactive warps still meet the barrier
  const int64_t ob = active ? o0 : 0;
  const int64_t row_bytes = K / 2;
  const int64_t ra = ob + g, rb = kStage == 1 ? ob + g : ob + 8 + g;
  const uint8_t* wa = ex.w[kStage == 1 ? 0 : 2] + ra * row_bytes + c * 16;
  const uint8_t* wb = ex.w[kStage == 1 ? 1 : 2] + rb * row_bytes + c * 16;
  const uint8_t* sa = ex.s[kStage == 1 ? 0 : 2] + ra * L.scale_cols + c;
  const uint8_t* sb = ex.s[kStage == 1 ? 1 : 2] + rb * L.scale_cols + c;
  const int chunks = int(K / 128);
  const int per = (chunks + ks - 1) / ks;
  const int ch0 = slice * per, ch1 = min(chunks, ch0 + per);
  const int rows = tile.rows;
  const int ntiles = min(kNT8, (rows + 7) / 8);

  // B rows as element offsets into the planes (n k rows x K < 2^31: checked on the host).
  const uint16_t* xb = a.xt + c * 32;
  int32_t bo[kNT8];
#pragma unroll
  for (int nt = 0; nt < kNT8; ++nt) {
    const int64_t p = tile.row0 + min(nt * 8 + g, rows - 1);  // clamped columns: computed, never stored
    bo[nt] = int32_t((kStage == 1 ? int64_t(a.row_token[p]) : p) * K);
  }
  float acc[kNT8][4];
#pragma unroll
  for (int nt = 0; nt < kNT8; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;

  if (active && ch0 < ch1) {
    constexpr int kRegQ = kRing > 0 ? 1 : kDepth;  // weight registers in the queue (ring: unused)
    uint4 qa[kRegQ], qb[kRegQ];
    uint8_t qsa[kDepth], qsb[kDepth];
    uint8_t* const rl = ring + (threadIdx.x & 31) * 16;  // kRing > 0: this lane's row-a bytes of slot 0
    // kRing > 0: chunk ch into slot (ch - ch0) % kRing, one commit group per call (empty
    // past ch1, so the group count stays uniform).
    auto refill = [&](int ch) {
      if (ch < ch1) {
        uint8_t* d = rl + ((ch - ch0) % (kRing > 0 ? kRing : 1)) * 1024;
        cp_async16_mem(d, wa + int64_t(ch) * 64);
        cp_async16_mem(d + 512, wb + int64_t(ch) * 64);
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
    };
    if constexpr (kRing > 0) {
#pragma unroll
      for (int d = 0; d < kRing; ++d) refill(ch0 + d);
    }
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int ch = min(ch0 + d, ch1 - 1);
      if constexpr (kRing == 0) {
        qa[d] = ld_stream(wa + int64_t(ch) * 64);
        qb[d] = ld_stream(wb + int64_t(ch) * 64);
      }
      qsa[d] = sa[ch * 4];
      qsb[d] = sb[ch * 4];
    }
    for (int ch = ch0; ch < ch1; ++ch) {
      uint4 va, vb;
      if constexpr (kRing > 0) {
        cp_async_wait<(kRing > 0 ? kRing - 1 : 0)>();  // chunk ch's group (the oldest) has landed
        const uint8_t* sl = rl + ((ch - ch0) % (kRing > 0 ? kRing : 1)) * 1024;
        va = *reinterpret_cast<const uint4*>(sl);
        vb = *reinterpret_cast<const uint4*>(sl + 512);
      } else {
        va = qa[0];
        vb = qb[0];
      }
      const uint32_t sca = scale_bf16x2(qsa[0]), scb = scale_bf16x2(qsb[0]);
#pragma unroll
      for (int d = 0; d + 1 < kDepth; ++d) {
        if constexpr (kRing == 0) {
          qa[d] = qa[d + 1];
          qb[d] = qb[d + 1];
        }
        qsa[d] = qsa[d + 1];
        qsb[d] = qsb[d + 1];
      }
      {  // the chunk kDepth ahead (clamped: a repeated load at the end, never used)
        const int nx = min(ch + kDepth, ch1 - 1);
        if constexpr (kRing == 0) {
          qa[kDepth - 1] = ld_stream(wa + int64_t(nx) * 64);
          qb[kDepth - 1] = ld_stream(wb + int64_t(nx) * 64);
        }
        qsa[kDepth - 1] = sa[nx * 4];
        qsb[kDepth - 1] = sb[nx * 4];
      }
      const uint32_t wa4[4] = {va.x, va.y, va.z, va.w}, wb4[4] = {vb.x, vb.y, vb.z, vb.w};
      const int64_t kof = int64_t(ch) * 128;
      float tmp[kNT8][4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t pa[4], pb[4];
        decode8(wa4[q], sca, pa);
        decode8(wb4[q], scb, pb);
        const uint32_t a0[4] = {pa[0], pb[0], pa[1], pb[1]};  // step 2q: codes 8q .. 8q + 3
        const uint32_t a1[4] = {pa[2], pb[2], pa[3], pb[3]};  // step 2q + 1: codes 8q + 4 .. 8q + 7
#pragma unroll
        for (int nt = 0; nt < kNT8; ++nt) {
          if (nt >= ntiles) break;
#pragma unroll
          for (int t = kTerms - 1; t >= 0; --t) {  // smallest term first
            const uint4 b = *reinterpret_cast<const uint4*>(xb + bo[nt] + t * a.xt_plane + kof + q * 8);
            if (q % kWindow == 0 && t == kTerms - 1) mma_bf16_zero(tmp[nt], a0, b.x, b.y);
            else mma_bf16(tmp[nt], a0, b.x, b.y);
            mma_bf16(tmp[nt], a1, b.z, b.w);
          }
        }
        if (q % kWindow == kWindow - 1) {
#pragma unroll
          for (int nt = 0; nt < kNT8; ++nt) {
            if (nt >= ntiles) break;
#pragma unroll
            for (int i = 0; i < 4; ++i) acc[nt][i] += tmp[nt][i];
          }
        }
      }
      // The slot chunk ch used (its words are decoded) takes chunk ch + kRing.
      if constexpr (kRing > 0) refill(ch + kRing);
    }
  }
  if (kNT8 == 1 && ks > 1) {
    // Slices meet in shared memory; slice 0 adds them in slice order.
#pragma unroll
    for (int i = 0; i < 4; ++i) red[warp][lane][i] = acc[0][i];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float s = red[warp][lane][i];
      for (int k = 1; k < ks; ++k) s += red[warp + k][lane][i];
      acc[0][i] = s;
    }
  }
  if (!active) return;
#pragma unroll
  for (int nt = 0; nt < kNT8; ++nt) {
    if (nt >= ntiles) break;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int i = nt * 8 + 2 * c + h;
      if (i >= rows) continue;
      const int64_t p = tile.row0 + i;
      store_fragment_row<kStage, kTerms>(a, acc[nt], h, p, out_rows, o0 + g);
    }
  }
}

// ---------------------------------------------------------------------------
// Lean small tiles (moe_tc_lean_kernel, NOTES "MoE decode tiles: fewer instructions per
// weight byte"). The same per-output arithmetic as tc_tile<kStage, kTerms, 1> (the same
// A words in the same MMA slots, the same B columns, promotion windows, ks and slice
// sum: bitwise the same output), with the instruction count per 1 KB warp-chunk cut
// from ~264 (stage 1, kBF16, SASS of moe_tc_kernel) towards the decode's own ~150:
//  - weights through a per-warp cp.async ring of kRing chunks in shared memory (a
//    thread reads back only its own 32 bytes: no barrier), the chunk loop unrolled by
//    kRing so every ring slot and scale register is static: no queue moves, no
//    clamped reloads;
//  - scale bytes -> bf16x2 words through a 256-entry shared table (one LDS instead of
//    two compares, two selects and a shift per row and chunk on the ALU pipe);
//  - B fragments through running pointers with immediate offsets;
//  - the decode's m >> 16 as a mul.hi by an opaque 2^16 (FMA pipe instead of ALU:
//    the ALU pipe, 16 lanes per scheduler, carries the ~14 PRMT / LOP3 per 8 codes and
//    is the kernel's tightest pipe);
//  - no token-tile loop (one n-tile of 8 columns), so no WARPSYNC before the MMAs.
// Block = 8 warps of (8 / ks) row groups x ks slices, grid (tile, row block): the
// former kernel's shape and work split.
// Measured (NOTES §8, bench/results/2026-11-30-moe-decode.md): the ALU work per byte fell
// as counted (ncu, T = 256 stage 1: ALU pipe 77% of 2.72 ms -> 63% of 2.32 ms, i.e. -31%),
// but the kernel then binds on L1TEX
// (75% in kBF16, 89% in kF32: the B fragment loads touch 2 lines per token per quarter-warp,
// and the ring's LDGSTS + LDS add to the same pipe), so the op gained 7-16% in kBF16 and
// nothing (or lost, T >= 128) in kF32; moe_tc_small_for picks it only where it measured faster.
template <int kRing>
__host__ __device__ constexpr int lean_smem(int warps) { return warps * kRing * 1024; }

// decode8 with m >> 16 as a multiply-high by k16 = 2^16 (opaque to the compiler, so it
// stays on the FMA pipe instead of the ALU's shifter).
__device__ __forceinline__ void decode8_lean(uint32_t u, uint32_t sc, uint32_t k16, uint32_t (&p)[4]) {
  const uint32_t m = u & 0x77777777u;
  moe_decode::decode8_from(u, m, __umulhi(m, k16), u * 16u, sc, p);
}

// Blocks per SM the kernel is compiled for: 3 (24 warps, <= 80 registers), except the
// kF32 kernel with the 8-chunk ring: 2 (128 registers; at 80 it spilled ~160 bytes, its
// 12 B vectors per chunk and 16 queued scale bytes do not fit).
template <int kTerms, int kRing>
constexpr int lean_blocks() { return kTerms == 3 && kRing == 8 ? 2 : 3; }

// The scale folded into the lookup tables (kLean4T): per row and chunk the eight e2m1
// magnitudes times the scale (four bf16x2 multiplies of the same products decode8 forms
// per element: exact, or the same rounding where they underflow or overflow), split into
// a low-byte and a high-byte table (four PRMT); the per-code decode then needs no
// multiply, and the sign is OR'ed in as before (-(v s) = (-v) s in round-to-nearest).
// 8 multiplies + 8 PRMT per lane and chunk instead of 32 multiplies: fewer issue slots,
// more ALU-pipe work. Bitwise the same A words (a NaN scale keeps NaN, sign aside).
struct ScaleTab {
  uint32_t lo0, lo1, hi0, hi1;
};
__device__ __forceinline__ ScaleTab scale_tab(uint32_t sc) {
  // bf16x2 of (0, 0.5), (1, 1.5), (2, 3), (4, 6), low half first.
  const uint32_t w0 = mul_bf16x2(0x3F000000u, sc), w1 = mul_bf16x2(0x3FC03F80u, sc);
  const uint32_t w2 = mul_bf16x2(0x40404000u, sc), w3 = mul_bf16x2(0x40C04080u, sc);
  return {prmt(w0, w1, 0x6420u), prmt(w2, w3, 0x6420u), prmt(w0, w1, 0x7531u), prmt(w2, w3, 0x7531u)};
}

__device__ __forceinline__ void decode8_tab(uint32_t u, const ScaleTab& t, uint32_t k16, uint32_t (&p)[4]) {
  const uint32_t m = u & 0x77777777u;
  const uint32_t mh = __umulhi(m, k16);
  const uint32_t l0 = prmt(t.lo0, t.lo1, m), l1 = prmt(t.lo0, t.lo1, mh);
  uint32_t h0 = prmt(t.hi0, t.hi1, m), h1 = prmt(t.hi0, t.hi1, mh);
  const uint32_t u4 = u * 16u;
  h0 |= prmt(u, u4, 0x9D8Cu) & 0x80808080u;
  h1 |= prmt(u, u4, 0xBFAEu) & 0x80808080u;
  p[0] = prmt(l0, h0, 0x5140u);
  p[1] = prmt(l0, h0, 0x7362u);
  p[2] = prmt(l1, h1, 0x5140u);
  p[3] = prmt(l1, h1, 0x7362u);
}

// The lean small-tile kernel (kLean4 / kLean8 / kLean4T, NOTES 8): a per-warp cp.async ring
// of kRing weight chunks; grid (tile, row block).
// gy > 0 would take a tile-major one-dimensional grid instead (block b = tile b / gy, row
// block b % gy: kLean4P's, NOTES 20, deleted in session 8). launch_lean passes 0; the
// argument stays because without it ptxas schedules and allocates these kernels (kAuto's
// batch-1 path) differently, and the code measured in NOTES 28 is this one. Drop it with
// the kernel's next measured change.
template <int kStage, int kTerms, int kRing, bool kTab = false>
__global__ void __launch_bounds__(kTcWarps * 32, lean_blocks<kTerms, kRing>())
    moe_tc_lean_kernel(MoeGroupedArgs a, int ks, uint32_t k16, int gy) {
  constexpr int kOutPerWarp = kStage == 1 ? 8 : 16;
  constexpr int kWindow = kTerms == 3 ? 1 : 4;
  __shared__ float red[kTcWarps][32][4];
  __shared__ uint32_t lut[256];
  extern __shared__ __align__(16) uint8_t lean_ring[];  // [warp][kRing][1024]
  // Programmatic dependent launch (moe_tc_set_pdl): let the next launch in the stream
  // start its blocks once every block of this grid has started (no-op otherwise).
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  lut[threadIdx.x] = scale_bf16x2(uint8_t(threadIdx.x));  // blockDim = 256
  const unsigned tile_idx = gy > 0 ? blockIdx.x / unsigned(gy) : blockIdx.x;
  const unsigned row_block = gy > 0 ? blockIdx.x % unsigned(gy) : blockIdx.y;
  if (int64_t(tile_idx) >= *a.num_tiles) return;  // block-uniform
  __syncthreads();
  const MoeTile tile = a.tiles[tile_idx];
  const MoeExpertPtrs& ex = a.experts[tile.expert];
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  const int64_t K = L.cols, out_rows = L.rows;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, c = lane & 3;
  const int slice = warp % ks, group = warp / ks, groups = kTcWarps / ks;
  const int64_t o0 = (int64_t(row_block) * groups + group) * kOutPerWarp;
  const bool active = o0 < out_rows;
  const int64_t ob = active ? o0 : 0;
  const int64_t row_bytes = K / 2;
  const int64_t ra = ob + g, rb = kStage == 1 ? ob + g : ob + 8 + g;
  const int chunks = int(K / 128);
  const int per = (chunks + ks - 1) / ks;
  const int ch0 = slice * per, ch1 = min(chunks, ch0 + per);
  const int rows = tile.rows;
  // Running pointers, all at chunk ch0: weights (16 bytes of each row per chunk, 64
  // apart), scales (one byte per chunk, 4 apart), B (one 16-byte vector per q and term).
  const uint8_t* wa = ex.w[kStage == 1 ? 0 : 2] + ra * row_bytes + c * 16 + int64_t(ch0) * 64;
  const uint8_t* wb = ex.w[kStage == 1 ? 1 : 2] + rb * row_bytes + c * 16 + int64_t(ch0) * 64;
  const uint8_t* sa = ex.s[kStage == 1 ? 0 : 2] + ra * L.scale_cols + c + ch0 * 4;
  const uint8_t* sb = ex.s[kStage == 1 ? 1 : 2] + rb * L.scale_cols + c + ch0 * 4;
  const int64_t p = tile.row0 + min(g, rows - 1);  // clamped columns: computed, never stored
  const uint4* bp = reinterpret_cast<const uint4*>(a.xt + (kStage == 1 ? int64_t(a.row_token[p]) : p) * K + c * 32 +
                                                   int64_t(ch0) * 128);
  const int64_t plane16 = a.xt_plane / 8;  // plane stride in uint4 (xt_plane % 8 == 0: checked on the host)
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};

  if (active && ch0 < ch1) {
    uint8_t* const slot0 = lean_ring + (warp * kRing) * 1024 + lane * 16;  // + j * 1024: slot j
    uint32_t qsa[kRing], qsb[kRing];
    // Chunk ch0 + i into slot i % kRing (i = chunk index in the slice), one commit
    // group per call, empty past ch1: group accounting stays uniform.
    auto issue = [&](int i, int j) {
      if (ch0 + i < ch1) {
        uint8_t* d = slot0 + j * 1024;
        cp_async16_mem(d, wa + int64_t(i) * 64);
        cp_async16_mem(d + 512, wb + int64_t(i) * 64);
        qsa[j] = __ldg(sa + i * 4);
        qsb[j] = __ldg(sb + i * 4);
      }
      asm volatile("cp.async.commit_group;" ::: "memory");
    };
#pragma unroll
    for (int j = 0; j < kRing; ++j) issue(j, j);
    // Under PDL (stage 2 launched while stage 1 drains) the weights above need nothing
    // from the previous grid; B (its h planes) is read only after it has completed and
    // flushed. Without the launch attribute this returns at once.
    asm volatile("griddepcontrol.wait;" ::: "memory");
    const int n = ch1 - ch0;
    for (int base = 0; base < n; base += kRing) {
#pragma unroll
      for (int j = 0; j < kRing; ++j) {
        const int i = base + j;
        if (i < n) {  // warp-uniform
          cp_async_wait<kRing - 1>();  // chunk i's group (the oldest in flight) has landed
          const uint4 va = *reinterpret_cast<const uint4*>(slot0 + j * 1024);
          const uint4 vb = *reinterpret_cast<const uint4*>(slot0 + j * 1024 + 512);
          const uint32_t sca = lut[qsa[j]], scb = lut[qsb[j]];
          ScaleTab ta, tb;
          if constexpr (kTab) {
            ta = scale_tab(sca);
            tb = scale_tab(scb);
          }
          const uint32_t wa4[4] = {va.x, va.y, va.z, va.w}, wb4[4] = {vb.x, vb.y, vb.z, vb.w};
          const uint4* bq = bp + int64_t(i) * 16;
          float tmp[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            uint32_t pa[4], pb[4];
            if constexpr (kTab) {
              decode8_tab(wa4[q], ta, k16, pa);
              decode8_tab(wb4[q], tb, k16, pb);
            } else {
              decode8_lean(wa4[q], sca, k16, pa);
              decode8_lean(wb4[q], scb, k16, pb);
            }
            const uint32_t a0[4] = {pa[0], pb[0], pa[1], pb[1]};
            const uint32_t a1[4] = {pa[2], pb[2], pa[3], pb[3]};
#pragma unroll
            for (int t = kTerms - 1; t >= 0; --t) {  // smallest term first (tc_tile's order)
              const uint4 b = bq[t * plane16 + q];
              if (q % kWindow == 0 && t == kTerms - 1) mma_bf16_zero(tmp, a0, b.x, b.y);
              else mma_bf16(tmp, a0, b.x, b.y);
              mma_bf16(tmp, a1, b.z, b.w);
            }
            if (q % kWindow == kWindow - 1) {
#pragma unroll
              for (int r = 0; r < 4; ++r) acc[r] += tmp[r];
            }
          }
          issue(i + kRing, j);  // slot j's words are decoded: it takes chunk i + kRing
        }
      }
    }
  }
  if (ks > 1) {
#pragma unroll
    for (int r = 0; r < 4; ++r) red[warp][lane][r] = acc[r];
    __syncthreads();
    if (slice != 0) return;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      float s = red[warp][lane][r];
      for (int k = 1; k < ks; ++k) s += red[warp + k][lane][r];
      acc[r] = s;
    }
  }
  if (!active) return;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int i = 2 * c + h;
    if (i >= rows) continue;
    store_fragment_row<kStage, kTerms>(a, acc, h, tile.row0 + i, out_rows, o0 + g);
  }
}

template <int kStage, int kTerms, int kNT8>
__global__ void __launch_bounds__(kTcWarps * 32, kNT8 == 1 ? 3 : 2) moe_tc_kernel(MoeGroupedArgs a, int ks) {
  __shared__ float red[kNT8 == 1 ? kTcWarps : 1][32][4];
  if (int64_t(blockIdx.x) >= *a.num_tiles) return;
  tc_tile<kStage, kTerms, kNT8, kTcWarps, kNT8 == 1 ? 2 : 1>(a, ks, blockIdx.x, blockIdx.y, red);
}

// The big tiles' staged token rows in shared memory (the wide kernel below; first the
// 64-row kernel of MoeTcBig::kRows64, deleted in session 8: 16.0 vs 10.1 ms at T = 4096,
// run 11): smem unit (token, q, c) = columns c * 32 + q * 8 .. + 8 of a chunk,
// at token * kBRow + (q * 4 + c) * 16 bytes: a quarter-warp's LDS.128 (two tokens x four c)
// then covers 32 distinct banks (token stride 320 B = 16 banks apart).
constexpr int kBRow = 320;  // bytes per token row of a staged chunk (256 + 64 of padding)


// Big tiles under kBF16, wide forms (NOTES "MoE wide tiles"): the tile height is
// kMoeTcWideRows (80: one tile per expert at T = 4096 but for ~2% of them, where 64-row
// tiles split half the experts and the tail tile streams and decodes the expert again),
// and a block holds 256 weight rows, so each staged activation chunk serves twice the
// rows of the 64-row kernel (L2 -> shared traffic of the activations 13.6 -> 6.8 GB per
// call at T = 4096). Per 128-column chunk the block copies, with cp.async into a 3-deep
// ring (two chunks in flight while one is computed, one barrier per chunk): the tile's
// token rows (layout above, kBRow per row) and each warp its own weight
// rows' 64 FP4 bytes (a thread re-reads exactly the bytes it copied: a prefetch two
// chunks deep without registers). A warp holds kMT m-tiles of 16 weight rows (kMT = 1:
// 16 warps, 128 registers; kMT = 2: 8 warps, up to 255 registers, each B fragment feeds
// two m-tiles: 128 instead of 256 bytes of shared memory per MMA), decodes its rows x
// 128 columns into registers once per chunk (32 A registers per m-tile), then runs the
// n-tiles, each (row, token) as the chain of 8 MMAs from zero over the chunk added into
// acc: the same MMAs in the same order as moe_tc_kernel<kStage, 1, 8> and the wgmma
// tiles (smxx_moe_wgmma.cu), so the big-tile kernels give bitwise the same output (tested).
// Only <kStage, 1, 256> is launched (MoeTcBig::kWide): the kMT = 2 form (kWide2: 10.0-10.1
// vs 10.1 ms at T = 4096, run 11) and the 128-row block (kWide128, two blocks per SM: 11.6)
// were measured no faster and deleted in session 8 (NOTES "MoE wide tiles").
constexpr int kWideStages = 3;
constexpr int kWideNT8 = kMoeTcWideRows / 8;
constexpr int kWideBBytes = kMoeTcWideRows * kBRow;  // activations of a stage
__host__ __device__ constexpr int wide_stage_bytes(int rows) { return kWideBBytes + rows * 64; }  // + weights
__host__ __device__ constexpr int wide_smem(int rows) { return kWideStages * wide_stage_bytes(rows); }  // 125952 / 101376

template <int kStage, int kMT, int kRows>
__global__ void __launch_bounds__(kRows / (16 * kMT) * 32, kRows == 256 ? 1 : 2) moe_tc_wide_kernel(MoeGroupedArgs a) {
  constexpr int kWarps = kRows / (16 * kMT), kThreads = kWarps * 32;
  constexpr int kWideStageBytes = wide_stage_bytes(kRows);
  constexpr int kBUnits = (kMoeTcWideRows * 16 + kThreads - 1) / kThreads;  // activation copies per thread
  constexpr int kMtOut = kStage == 1 ? 8 : 16;                              // outputs per m-tile
  constexpr int kNP = kMT == 1 ? 1 : 2;  // n-tiles per step (kMT = 2: 4 MMA chains per warp in flight)
  extern __shared__ __align__(16) uint8_t wsm[];
  if (int64_t(blockIdx.x) >= *a.num_tiles) return;
  const MoeTile tile = a.tiles[blockIdx.x];
  const MoeExpertPtrs& ex = a.experts[tile.expert];
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  const int64_t K = L.cols, out_rows = L.rows;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
  // A warp's kMT m-tiles are all in range or all out: out_rows (inter or dim) is a
  // multiple of 128 (moe_tc_eligible: both matrices' K % 128 == 0).
  const int64_t o0 = (int64_t(blockIdx.y) * kWarps + warp) * kMtOut * kMT;
  const bool active = o0 < out_rows;
  const int64_t row_bytes = K / 2;
  const int chunks = int(K / 128);
  const int rows = tile.rows;
  const int ntiles = min(kWideNT8, (rows + 7) / 8);

  // m-tile mt of the warp: rows a (g) and b (8 + g) as in moe_tc_kernel, from output
  // o0 + mt * kMtOut; smem slot of row a: warp * 16 kMT + mt * 16 + g (b: + 8).
  const int64_t ob = active ? o0 : 0;
  const uint8_t* wa = ex.w[kStage == 1 ? 0 : 2] + (ob + g) * row_bytes + c * 16;
  const uint8_t* wb = ex.w[kStage == 1 ? 1 : 2] + (ob + (kStage == 1 ? 0 : 8) + g) * row_bytes + c * 16;
  const uint8_t* sa = ex.s[kStage == 1 ? 0 : 2] + (ob + g) * L.scale_cols + c;
  const uint8_t* sb = ex.s[kStage == 1 ? 1 : 2] + (ob + (kStage == 1 ? 0 : 8) + g) * L.scale_cols + c;
  const int64_t mt_w = int64_t(kMtOut) * row_bytes, mt_s = int64_t(kMtOut) * L.scale_cols;  // per m-tile
  const int wofs = kWideBBytes + ((warp * 16 * kMT + g) * 4 + c) * 16;  // m-tile mt: + mt * 1024; row b: + 512
  // Activation copies: units tid + j * kThreads < ntiles * 128 of the tile's token rows x 16
  // (unit u: token u >> 4, q = (u >> 2) & 3, c = u & 3; the layout above), as int32
  // element offsets into the planes (rows x K < 2^31: checked on the host).
  int32_t xo[kBUnits];
#pragma unroll
  for (int j = 0; j < kBUnits; ++j) {
    const int u = tid + j * kThreads, tok = u >> 4, uq = (u >> 2) & 3, uc = u & 3;
    xo[j] = -1;
    if (u < ntiles * 128) {
      const int64_t p = tile.row0 + min(tok, rows - 1);
      const int64_t xrow = kStage == 1 ? int64_t(a.row_token[p]) : p;
      xo[j] = int32_t(xrow * K + uc * 32 + uq * 8);
    }
  }
  auto stage = [&](int ch) {
    if (ch < chunks) {
      uint8_t* st = wsm + (ch % kWideStages) * kWideStageBytes;
#pragma unroll
      for (int j = 0; j < kBUnits; ++j) {
        const int u = tid + j * kThreads;  // smem unit (token, q, c) at token * kBRow + (q * 4 + c) * 16
        if (xo[j] >= 0) cp_async16(st + (u >> 4) * kBRow + (u & 15) * 16, a.xt + xo[j] + int64_t(ch) * 128);
      }
      if (active) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt) {
          cp_async16(st + wofs + mt * 1024, wa + mt * mt_w + int64_t(ch) * 64);
          cp_async16(st + wofs + mt * 1024 + 512, wb + mt * mt_w + int64_t(ch) * 64);
        }
      }
    }
    asm volatile("cp.async.commit_group;");  // empty groups past the end keep the count uniform
  };

  float acc[kMT][kWideNT8][4];
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int nt = 0; nt < kWideNT8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.0f;

#pragma unroll
  for (int s = 0; s < kWideStages - 1; ++s) stage(s);
  uint8_t nsa[kMT], nsb[kMT];  // scale bytes, one chunk ahead
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) nsa[mt] = sa[mt * mt_s], nsb[mt] = sb[mt * mt_s];
  for (int ch = 0; ch < chunks; ++ch) {
    asm volatile("cp.async.wait_group %0;" ::"n"(kWideStages - 2));
    __syncthreads();  // chunk ch landed for every thread; every warp is past chunk ch - 1
    stage(ch + kWideStages - 1);  // into the buffer chunk ch - 1 used
    uint32_t sca[kMT], scb[kMT];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      sca[mt] = scale_bf16x2(nsa[mt]);
      scb[mt] = scale_bf16x2(nsb[mt]);
      if (ch + 1 < chunks) {
        nsa[mt] = sa[mt * mt_s + (ch + 1) * 4];
        nsb[mt] = sb[mt * mt_s + (ch + 1) * 4];
      }
    }
    if (!active) continue;
    const uint8_t* st = wsm + (ch % kWideStages) * kWideStageBytes;
    uint32_t A[kMT][4][2][4];  // [m-tile][q][step 2q / 2q + 1][fragment register]
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      const uint4 va = *reinterpret_cast<const uint4*>(st + wofs + mt * 1024);
      const uint4 vb = *reinterpret_cast<const uint4*>(st + wofs + mt * 1024 + 512);
      const uint32_t wa4[4] = {va.x, va.y, va.z, va.w}, wb4[4] = {vb.x, vb.y, vb.z, vb.w};
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        uint32_t pa[4], pb[4];
        decode8(wa4[q], sca[mt], pa);
        decode8(wb4[q], scb[mt], pb);
        A[mt][q][0][0] = pa[0], A[mt][q][0][1] = pb[0], A[mt][q][0][2] = pa[1], A[mt][q][0][3] = pb[1];
        A[mt][q][1][0] = pa[2], A[mt][q][1][1] = pb[2], A[mt][q][1][2] = pa[3], A[mt][q][1][3] = pb[3];
      }
    }
    const uint8_t* bb = st + g * kBRow + c * 16;
#pragma unroll
    for (int n0 = 0; n0 < kWideNT8; n0 += kNP) {
      if (n0 >= ntiles) break;
      float t[kNP][kMT][4];
#pragma unroll
      for (int q = 0; q < 4; ++q) {
#pragma unroll
        for (int j = 0; j < kNP; ++j) {
          if (n0 + j >= ntiles) break;  // warp-uniform
          const uint4 b = *reinterpret_cast<const uint4*>(bb + (n0 + j) * 8 * kBRow + q * 64);
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt) {
            if (q == 0) mma_bf16_zero(t[j][mt], A[mt][0][0], b.x, b.y);
            else mma_bf16(t[j][mt], A[mt][q][0], b.x, b.y);
            mma_bf16(t[j][mt], A[mt][q][1], b.z, b.w);
          }
        }
      }
#pragma unroll
      for (int j = 0; j < kNP; ++j) {
        if (n0 + j >= ntiles) break;
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int i = 0; i < 4; ++i) acc[mt][n0 + j][i] += t[j][mt][i];
      }
    }
  }
  asm volatile("cp.async.wait_group 0;");  // no copy outlives the block
  if (!active) return;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    const int64_t om = o0 + mt * kMtOut;
#pragma unroll
    for (int nt = 0; nt < kWideNT8; ++nt) {
      if (nt >= ntiles) break;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = nt * 8 + 2 * c + h;
        if (i >= rows) continue;
        const int64_t p = tile.row0 + i;
        store_fragment_row<kStage, 1>(a, acc[mt][nt], h, p, out_rows, om + g);
      }
    }
  }
}

template <int kStage, int kMT, int kRows>
cudaError_t launch_wide(const MoeGroupedArgs& a, cudaStream_t stream) {
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  // Stage 1 holds w1 and w3 rows of the same outputs: kRows / 2 outputs per block.
  const int64_t outs_per_block = kStage == 1 ? kRows / 2 : kRows;
  const int64_t gw = (L.rows + outs_per_block - 1) / outs_per_block;
  if (gw > 65535 || a.max_tiles > INT32_MAX || a.xt_plane > INT32_MAX) return cudaErrorInvalidValue;
  static const cudaError_t attr = cudaFuncSetAttribute(moe_tc_wide_kernel<kStage, kMT, kRows>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, wide_smem(kRows));
  if (attr != cudaSuccess) return attr;
  moe_tc_wide_kernel<kStage, kMT, kRows>
      <<<dim3(unsigned(a.max_tiles), unsigned(gw)), kRows / (16 * kMT) * 32, wide_smem(kRows), stream>>>(a);
  return cudaGetLastError();
}

// fp32 rows -> kTerms bf16 planes (plane stride = count), four values per thread.
template <int kTerms>
__global__ void moe_split_kernel(const float* x, uint16_t* out, int64_t count) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (i >= count) return;
  moe_terms::split4<kTerms>(x, out, count, i);
}

__global__ void moe_round_kernel(const float* x, float* out, int64_t count) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) out[i] = __bfloat162float(__float2bfloat16_rn(x[i]));
}

// Short tiles: split K until a warp has ~8-16 chunks (enough blocks at batch 1). The
// split fixes the order of a row's sums: every small-tile kernel takes it from here.
int small_tile_ks(int chunks) {
  int ks = 1;
  while (ks < kTcWarps && chunks / (2 * ks) >= 8) ks *= 2;
  return ks;
}

template <int kStage, int kTerms, int kNT8>
cudaError_t launch_tc(const MoeGroupedArgs& a, cudaStream_t stream) {
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  const int chunks = int(L.cols / 128);
  const int ks = kNT8 == 1 ? small_tile_ks(chunks) : 1;
  const int64_t per_block = int64_t(kTcWarps / ks) * (kStage == 1 ? 8 : 16);
  const int64_t gy = (L.rows + per_block - 1) / per_block;
  // B offsets are int32 elements: rows of the planes x K must stay below 2^31.
  if (gy > 65535 || a.max_tiles > INT32_MAX || a.xt_plane > INT32_MAX) return cudaErrorInvalidValue;
  moe_tc_kernel<kStage, kTerms, kNT8><<<dim3(unsigned(a.max_tiles), unsigned(gy)), kTcWarps * 32, 0, stream>>>(a, ks);
  return cudaGetLastError();
}

// The grid (tile, row block) of kLean4 / kLean8 / kLean4T as measured in NOTES 8.
template <int kStage, int kTerms, int kRing, bool kTab = false>
cudaError_t launch_lean(const MoeGroupedArgs& a, cudaStream_t stream) {
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  const int ks = small_tile_ks(int(L.cols / 128));  // the former kernel's K split: the same sums
  const int64_t per_block = int64_t(kTcWarps / ks) * (kStage == 1 ? 8 : 16);
  const int64_t gy = (L.rows + per_block - 1) / per_block;
  if (gy > 65535 || a.max_tiles > INT32_MAX || a.xt_plane % 8 != 0) return cudaErrorInvalidValue;
  const dim3 grid(unsigned(a.max_tiles), unsigned(gy));
  auto kernel = moe_tc_lean_kernel<kStage, kTerms, kRing, kTab>;
  constexpr int smem = lean_smem<kRing>(kTcWarps);
  // Once per instantiation: the ring above 48 KB needs the opt-in, and the carveout asks
  // for three blocks' shared memory (rings + red + lut); the rest stays L1 for B.
  static const cudaError_t attr = [&] {
    cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e == cudaSuccess) {
      const int per_block = smem + int(sizeof(float)) * kTcWarps * 32 * 4 + 1024 + 1024;  // + reserved
      e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               std::min(100, (lean_blocks<kTerms, kRing>() * per_block * 100 + 228 * 1024 - 1) /
                                                 (228 * 1024)));
    }
    return e;
  }();
  if (attr != cudaSuccess) return attr;
  if (kStage == 2 && moe_tc_pdl()) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = dim3(kTcWarps * 32);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, a, ks, 65536u, 0);
  }
  kernel<<<grid, kTcWarps * 32, smem, stream>>>(a, ks, 65536u, 0);
  return cudaGetLastError();
}

template <int kStage, int kTerms>
cudaError_t launch_tc_rows(const MoeGroupedArgs& a, cudaStream_t stream) {
  const MoeTcSmall small =
      a.small_kernel >= 0 ? MoeTcSmall(a.small_kernel) : moe_tc_small_for(a.tile_rows, a.terms == 1, false);
  if (a.tile_rows <= 8) switch (small) {
      case MoeTcSmall::kLean4: return launch_lean<kStage, kTerms, 4>(a, stream);
      case MoeTcSmall::kLean8: return launch_lean<kStage, kTerms, 8>(a, stream);
      case MoeTcSmall::kLean4T: return launch_lean<kStage, kTerms, 4, true>(a, stream);
      default: return launch_tc<kStage, kTerms, 1>(a, stream);
    }
  if constexpr (kTerms == 1)  // big tiles, bf16 (kMoeTcWideRows, moe_tc checks): B staged in shared memory
    return launch_wide<kStage, 1, 256>(a, stream);
  return launch_tc<kStage, kTerms, kMoeBigRows / 8>(a, stream);
}

// Both stages of the small tiles in one persistent launch (moe_tc_fused, NOTES "MoE at
// decode sizes"). The two-launch path pays, per stage, the block start-ups of ~2.2 /
// 1.2 waves of short blocks at batch 1 and a drained GPU between the stages (the
// second stage starts when the slowest first-stage block ends). Here blocks of 4 warps
// take work items from a ticket counter: first every stage 1 item (tile-major), then
// every stage 2 item; a stage 2 item spins until its tile's stage 1 items are all done
// (they hold smaller tickets, taken by running blocks that never wait on a larger one:
// no deadlock whatever the grid size or residency). A block takes its next ticket while
// it works on the current one (the atomic's latency hides under the item). An item is
// `span` consecutive row blocks of one tile, so the ticket count stays ~16 per block.
// Per output the arithmetic is tc_tile's with the same ks: bitwise moe_tc's output.
constexpr int kFusedWarps = 4;
constexpr int kFusedRing = 8;   // 8 KB of weights in flight per warp (moe_tc: 2 KB), in shared memory
constexpr int kFusedDepth = 4;  // scale bytes queued ahead (registers)
constexpr int kFusedBlocks = 3;  // per SM: 12 warps, 96 KB in flight (moe_tc: 24 x 2 KB); 34 KB smem per block

struct FusedShape {  // 32-bit: item counts < 2^30 (host check), no 64-bit divisions
  int ks1, ks2;
  int gy1, gy2;  // row blocks per tile, per stage
  int span;      // row blocks per work item
};

__device__ __forceinline__ int32_t ld_acquire(const int32_t* p) {
  int32_t v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

template <int kTerms>
__global__ void __launch_bounds__(kFusedWarps * 32, kFusedBlocks)
    moe_tc_fused_kernel(MoeGroupedArgs s1, MoeGroupedArgs s2, int32_t* sync, FusedShape f) {
  __shared__ float red[kFusedWarps][32][4];
  __shared__ __align__(16) uint8_t ring[kFusedWarps][kFusedRing * 1024];
  __shared__ int32_t next_item;
  uint8_t* const wring = ring[threadIdx.x >> 5];
  int32_t* const ticket = sync;
  int32_t* const done = sync + 1;  // [tile]: finished stage 1 items
  const int tiles = *s1.num_tiles;
  const int per1 = (f.gy1 + f.span - 1) / f.span, per2 = (f.gy2 + f.span - 1) / f.span;
  const int n1 = tiles * per1, total = n1 + tiles * per2;
  if (threadIdx.x == 0) next_item = atomicAdd(ticket, 1);
  __syncthreads();
  int item = next_item;
  while (item < total) {
    int32_t ahead = 0;
    if (threadIdx.x == 0) ahead = atomicAdd(ticket, 1);
    if (item < n1) {
      const int t = item / per1, b0 = (item % per1) * f.span, b1 = min(f.gy1, b0 + f.span);
      for (int by = b0; by < b1; ++by) {
        tc_tile<1, kTerms, 1, kFusedWarps, kFusedDepth, kFusedRing>(s1, f.ks1, t, by, red, wring);
        __syncthreads();  // red is free again; every thread's h stores are issued
      }
      if (threadIdx.x == 0) {
        __threadfence();  // the block's h stores (ordered before by the barrier) become visible first
        atomicAdd(done + t, 1);
      }
    } else {
      const int j = item - n1, t = j / per2, b0 = (j % per2) * f.span, b1 = min(f.gy2, b0 + f.span);
      if (threadIdx.x == 0)
        while (ld_acquire(done + t) < per1) __nanosleep(128);
      __syncthreads();  // the acquire orders every thread's h loads after the stage 1 stores
      for (int by = b0; by < b1; ++by) {
        tc_tile<2, kTerms, 1, kFusedWarps, kFusedDepth, kFusedRing>(s2, f.ks2, t, by, red, wring);
        __syncthreads();
      }
    }
    if (threadIdx.x == 0) next_item = ahead;
    __syncthreads();
    item = next_item;
  }
}

template <int kTerms>
cudaError_t launch_fused(const MoeGroupedArgs& s1, const MoeGroupedArgs& s2, int32_t* sync, const FusedShape& f,
                         cudaStream_t stream) {
  static int per_sm = -1;  // occupancy of this kernel: a property of the binary and the arch
  if (per_sm < 0) {
    // Shared memory for kFusedBlocks rings (3 x 35 KB -> the 132 KB configuration), the
    // rest stays L1 for the activation planes the B fragments are read from.
    const cudaError_t c = cudaFuncSetAttribute(moe_tc_fused_kernel<kTerms>,
                                               cudaFuncAttributePreferredSharedMemoryCarveout, 50);
    if (c != cudaSuccess) return c;
    const cudaError_t e =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, moe_tc_fused_kernel<kTerms>, kFusedWarps * 32, 0);
    if (e != cudaSuccess) return e;
  }
  int dev = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e != cudaSuccess) return e;
  const int64_t per1 = (f.gy1 + f.span - 1) / f.span, per2 = (f.gy2 + f.span - 1) / f.span;
  const int64_t bound = s1.max_tiles * (per1 + per2);  // < 2^30: checked by moe_tc_fused
  const int64_t blocks = std::min<int64_t>(bound, int64_t(std::max(per_sm, 1)) * sms);
  moe_tc_fused_kernel<kTerms><<<unsigned(blocks), kFusedWarps * 32, 0, stream>>>(s1, s2, sync, f);
  return cudaGetLastError();
}

}  // namespace

int64_t moe_tc_fused_sync_count(int64_t max_tiles) { return 1 + std::max<int64_t>(max_tiles, 0); }

cudaError_t moe_tc_fused(const MoeGroupedArgs& s1, const MoeGroupedArgs& s2, int32_t* sync, cudaStream_t stream) {
  if (s1.max_tiles <= 0) return cudaSuccess;
  if (!moe_tc_eligible(s1.w13, s1.w2) || !s1.experts || !s1.xt || !s1.tiles || !s1.num_tiles || !s1.row_token ||
      !s1.ht || !s2.y || !sync || s1.stage != 1 || s2.stage != 2 || s1.terms != s2.terms ||
      (s1.terms != 1 && s1.terms != 3) || s1.tile_rows > 8 || s2.tile_rows != s1.tile_rows ||
      (s1.tile_rows != 1 && s1.tile_rows != 2 && s1.tile_rows != 4 && s1.tile_rows != 8) || s2.tiles != s1.tiles ||
      s2.num_tiles != s1.num_tiles || s2.max_tiles != s1.max_tiles || s2.xt != s1.ht || s2.xt_plane != s1.ht_plane ||
      s1.xt_plane > INT32_MAX || s2.xt_plane > INT32_MAX)
    return cudaErrorInvalidValue;
  FusedShape f;
  f.ks1 = small_tile_ks(int(s1.w13.cols / 128));
  f.ks2 = small_tile_ks(int(s1.w2.cols / 128));
  // Blocks of kFusedWarps hold whole K splits only; the same ks as moe_tc keeps the bits.
  if (f.ks1 > kFusedWarps || f.ks2 > kFusedWarps) return cudaErrorNotSupported;
  const int64_t gy1 = (s1.w13.rows + int64_t(kFusedWarps / f.ks1) * 8 - 1) / (int64_t(kFusedWarps / f.ks1) * 8);
  const int64_t gy2 = (s1.w2.rows + int64_t(kFusedWarps / f.ks2) * 16 - 1) / (int64_t(kFusedWarps / f.ks2) * 16);
  // ~16 tickets per resident block at the host's tile bound (an H200's 132 SMs x 4
  // blocks; only the granularity depends on it): span 1 at batch 1 (a fine-grained
  // tail), up to 8 row blocks per item at batch 256 (~32K tickets, not ~260K).
  const int64_t span = std::clamp<int64_t>(s1.max_tiles * (gy1 + gy2) / (16 * 132 * kFusedBlocks), 1, 8);
  const int64_t items = s1.max_tiles * ((gy1 + span - 1) / span + (gy2 + span - 1) / span);
  if (gy1 > (1 << 20) || gy2 > (1 << 20) || items > (int64_t(1) << 30)) return cudaErrorNotSupported;
  f.gy1 = int(gy1);
  f.gy2 = int(gy2);
  f.span = int(span);
  return s1.terms == 1 ? launch_fused<1>(s1, s2, sync, f, stream) : launch_fused<3>(s1, s2, sync, f, stream);
}

namespace {
// moe_tc_set_small: read by the op and the launcher. kFused stays off: the persistent
// launch measured slower than the former launches at every decode size on the H200 (run
// 12, NOTES "Measured: moe6"); kept, bitwise equal and tested.
MoeTcSmall g_moe_tc_small = MoeTcSmall::kAuto;
}  // namespace
void moe_tc_set_small(MoeTcSmall k) { g_moe_tc_small = k; }
MoeTcSmall moe_tc_small() { return g_moe_tc_small; }
MoeTcSmall moe_tc_small_for(int64_t n, bool bf16, bool invariant) {
  if (g_moe_tc_small != MoeTcSmall::kAuto) return g_moe_tc_small;
  if (bf16) return invariant || n <= 256 ? MoeTcSmall::kLean4 : MoeTcSmall::kFormer;
  return n <= 8 ? MoeTcSmall::kLean4 : MoeTcSmall::kFormer;
}
namespace {
int g_moe_tc_f32_big = 32;  // moe_tc_set_f32_big_threshold
bool g_moe_tc_pdl = false;             // moe_tc_set_pdl
}  // namespace
void moe_tc_set_pdl(bool on) { g_moe_tc_pdl = on; }
bool moe_tc_pdl() { return g_moe_tc_pdl; }
void moe_tc_set_f32_big_threshold(int rows) { g_moe_tc_f32_big = std::max(rows, kMoeSmallRows); }
int moe_tc_f32_big_threshold() { return g_moe_tc_f32_big; }

namespace {
MoeTcBig g_moe_tc_big = MoeTcBig::kAuto;  // moe_tc_set_big: read by the op (plan) and the launcher
}  // namespace
void moe_tc_set_big(MoeTcBig k) { g_moe_tc_big = k; }
MoeTcBig moe_tc_big() { return g_moe_tc_big; }

bool moe_tc_eligible(const WeightArgs& w13, const WeightArgs& w2) {
  auto ok = [](const WeightArgs& w) {
    return w.format == WFormat::kE2M1 && w.scale_format == SFormat::kE8M0 && w.block_rows == 1 &&
           w.block_cols == 32 && w.cols % 128 == 0 && w.scale_cols >= w.cols / 32;
  };
  return ok(w13) && ok(w2) && w13.rows % 8 == 0 && w2.rows % 16 == 0 && w2.rows == w13.cols && w2.cols == w13.rows;
}

cudaError_t moe_tc(const MoeGroupedArgs& a, cudaStream_t stream) {
  if (a.max_tiles <= 0) return cudaSuccess;
  if (!moe_tc_eligible(a.w13, a.w2) || !a.experts || !a.xt || !a.tiles || !a.num_tiles ||
      (a.stage == 1 && (!a.row_token || !a.ht)) || (a.stage == 2 && !a.y) || (a.terms != 1 && a.terms != 3) ||
      (a.tile_rows != 1 && a.tile_rows != 2 && a.tile_rows != 4 && a.tile_rows != 8 &&
       !(a.tile_rows == kMoeBigRows && a.terms == 3) && !(a.tile_rows == kMoeTcWideRows && a.terms == 1) &&
       !(a.tile_rows == kMoeTcWgmmaRows && a.terms == 1)))
    return cudaErrorInvalidValue;
  if (a.tile_rows == kMoeTcWgmmaRows) return moe_tc_wgmma(a, stream);
  if (a.stage == 1) return a.terms == 1 ? launch_tc_rows<1, 1>(a, stream) : launch_tc_rows<1, 3>(a, stream);
  if (a.stage != 2) return cudaErrorInvalidValue;
  return a.terms == 1 ? launch_tc_rows<2, 1>(a, stream) : launch_tc_rows<2, 3>(a, stream);
}

cudaError_t moe_split_terms(const float* x, uint16_t* out, int64_t count, int terms, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (!x || !out || count % 4 != 0 || (terms != 1 && terms != 3) || reinterpret_cast<uintptr_t>(x) % 16 != 0)
    return cudaErrorInvalidValue;
  const int64_t blocks = (count / 4 + 255) / 256;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  if (terms == 1) moe_split_kernel<1><<<unsigned(blocks), 256, 0, stream>>>(x, out, count);
  else moe_split_kernel<3><<<unsigned(blocks), 256, 0, stream>>>(x, out, count);
  return cudaGetLastError();
}

cudaError_t moe_round_bf16(const float* x, float* out, int64_t count, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (!x || !out) return cudaErrorInvalidValue;
  const int64_t blocks = (count + 255) / 256;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  moe_round_kernel<<<unsigned(blocks), 256, 0, stream>>>(x, out, count);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
