// Big tiles of the FP4 MoE under Activations::kBF16 on Hopper's warpgroup MMA (wgmma,
// sm_90a): moe_tc's tiles of up to kMoeTcWgmmaRows rows (one tile per expert at T = 8192
// for ~half the experts, smxx_moe.cuh), both stages.
//
// Why (bench/flash/NOTES.md "MoE wide tiles at prefill sizes"): the mma.sync wide kernel
// spends its time in turns: every warp decodes its FP4 rows, then every warp multiplies,
// because a warp's MMAs and its decode share one instruction stream and a barrier per
// chunk lines the warps up. wgmma is asynchronous: a warpgroup issues the 8 MMAs of a
// 128-column chunk and decodes the next chunk while the tensor cores run them, and the
// B operand (the tile's tokens) comes straight from shared memory instead of through
// registers (no LDS per MMA).
//
// Block: 2 warpgroups (256 threads, one block per SM), 64 weight rows per warpgroup
// (stage 1: 32 outputs as w1 / w3 row pairs; stage 2: 64 w2 rows), all kN tokens of the
// tile (kN = its rows rounded up to 16, a template case per size). A thread decodes the
// same 2 x 32 codes per chunk as the mma.sync kernels (decode8, smxx_moe_decode.cuh): its
// registers are an mma.sync A fragment, which is exactly the RS-form wgmma A fragment of
// its warp's 16 rows. Per chunk, through two cp.async rings (WgRing: the tokens' and a
// deeper one for the weights): the tile's token rows (kN x 256 bytes, K-major in the
// 128-byte swizzle the descriptor reads) and each thread's own 2 x 16 weight bytes and 2
// scale words (read back by the thread that copied them).
//
// The k order. A thread's A registers of step j (0..7) of a chunk hold columns
// 32 c + 8 q + 4 h + {0, 1} (k slots 2 c, 2 c + 1) and + {2, 3} (slots 2 c + 8, 2 c + 9),
// j = 2 q + h (the mma.sync kernels' order: they read B from the same columns). wgmma
// reads B's k slots from 16 consecutive elements of a row in shared memory, so the token
// rows are stored in that order: within every 128-column chunk, column col sits at
// chunk_pos(col) = 16 j + slot. Stage 1 reads x through moe_split_perm (a permuted copy of
// the bf16 planes) and writes h permuted the same way, which is what stage 2 reads; the
// small tiles keep the natural planes (their rows are disjoint from the big tiles').
//
// Arithmetic: per (row, token) each chunk is one chain of 8 k16 MMAs from zero (scale-d
// = 0 on the first) added into the fp32 accumulator: the same products, the same chains,
// the same promotion order as moe_tc_wide_kernel, whose output this kernel must equal bit
// for bit (ops_cuda "wgmma_vs_wide_differ"; it holds when the k16 step rounds as mma.sync's).
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/smxx_moe.cuh"
#include "kernels/cuda/smxx_moe_decode.cuh"
#include "kernels/cuda/smxx_moe_terms.cuh"
#include "kernels/cuda/smxx_wgmma.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kWgThreads = 256;           // two warpgroups
constexpr int kWgMaxN = kMoeTcWgmmaRows;  // tokens per tile = the largest wgmma N used
constexpr int kAtomBytes = kWgMaxN * 128;          // a 64-column half of a staged chunk
constexpr int kXBytes = 2 * kAtomBytes;            // a token stage: the tile's tokens x 128 columns (32 KB)
constexpr int kWBytes = kWgThreads * 32;           // every thread's 2 x 16 weight bytes
constexpr int kSBytes = kWgThreads * 8;            // every thread's 2 scale words (4 bytes each)
constexpr int kWSlotBytes = kWBytes + kSBytes;     // a weight stage (10 KB)
constexpr int kXoBytes = (kWgMaxN / 16) * kWgThreads * 4;  // each thread's token source offsets
constexpr int kWgSmemMax = 227 * 1024;                      // dynamic shared memory per block on sm_90
static_assert(kAtomBytes % 1024 == 0 && kXBytes % 1024 == 0, "swizzle atoms must stay 1024-byte aligned");
static_assert(kWgMaxN % 16 == 0 && kWgMaxN <= 128, "one template case per 16 tokens, up to m64n128");

// The two cp.async rings of a block: kX token stages (the tile's tokens of one chunk) and
// kW weight stages (each thread's weight bytes and scale words of one chunk); kRun
// consecutive chunks' weights are copied at once, so the 64-byte halves of a weight row's
// 128-byte line reach the memory system together. Layout: token stages (1024-aligned),
// weight stages, the token offsets (xo).
// Why a separate, deeper weight ring was tried (helper moepf, NOTES 14): every big-tile
// kernel had run at ~0.8 TB/s of expert weights whatever its tile width, with 3 chunks x 8
// KB of weights in flight per block and each row's 128-byte line fetched as two 64-byte
// pieces a chunk apart. Measured: RingDeep (8 weight stages, line-sized runs) is 7-10%
// slower than RingShared, with DRAM at 18% of its peak and the tensor pipe at 26% (ncu, T
// = 8192): the weights were not the bind, and the extra requests in flight only slow the
// token copies the next chunk waits for. RingShared stays the default.
template <int kX, int kW, int kRun>
struct WgRing {
  static constexpr int kXStages = kX, kWStages = kW, kWRun = kRun;
  static constexpr int kWBase = kX * kXBytes;                   // first weight stage
  static constexpr int kXoBase = kWBase + kW * kWSlotBytes;     // the token offsets
  static constexpr int kSmem = kXoBase + kXoBytes + 1024;       // + slack to align the ring to 1024
  // kW >= kX: a chunk's weights are never in a later cp.async group than its tokens (the
  // wait for the tokens covers them); kRun <= 2: the stages a run overwrites were read
  // (the second one in the chunk that issues the run, see wg_tile).
  static_assert(kX >= 2 && kW >= kX && kW % kRun == 0 && (kRun == 1 || kRun == 2), "ring shape");
  static_assert(kSmem <= kWgSmemMax, "the rings must fit the block's shared memory");
};
using RingShared = WgRing<4, 4, 1>;  // MoeTcBig::kWgmma (kAuto until run moepf2): tokens and weights 4 chunks deep
using RingDeep = WgRing<4, 8, 2>;    // MoeTcBig::kWgmmaDeep (opt-in): 8 weight stages, line-sized runs

// Position of column col (0..127) of a chunk in the permuted rows (see the top comment).
__host__ __device__ constexpr int chunk_pos(int col) {
  const int c = col >> 5, q = (col >> 3) & 3, h = (col >> 2) & 1, hi = (col >> 1) & 1, e = col & 1;
  return 16 * (2 * q + h) + 8 * hi + 2 * c + e;
}
// Every column lands on its own position (a permutation of 0..127).
constexpr bool chunk_pos_is_permutation() {
  bool seen[128] = {};
  for (int col = 0; col < 128; ++col) {
    const int p = chunk_pos(col);
    if (p < 0 || p >= 128 || seen[p]) return false;
    seen[p] = true;
  }
  return true;
}
static_assert(chunk_pos_is_permutation(), "chunk_pos must permute a chunk's columns");
static_assert(chunk_pos(1) == chunk_pos(0) + 1 && chunk_pos(2) == chunk_pos(0) + 8 && chunk_pos(3) == chunk_pos(0) + 9,
              "moe_split_perm stores pairs (4 c, 4 c + 1) and (4 c + 2, 4 c + 3) at p and p + 8");

__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
// 4 bytes (the .ca form: .cg copies 16 only).
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

using moe_decode::decode8;
using moe_decode::scale_bf16x2;

// One tile, kN = its rows rounded up to 16 (tokens past the rows are zero in shared
// memory: computed, never stored), for `items` consecutive row blocks from rb0 (stage 1:
// 64 outputs, stage 2: 128 rows each). The row blocks run as one stream of items x chunks
// through the rings (R), so the next block's first chunks load and decode under the current
// one's last MMAs (no pipeline start-up per row block). sbase / sgen: the 1024-aligned
// rings (shared-window address / generic pointer).
// A thread's weights of one chunk as both big-tile kernels stream them: 16 bytes of each of
// its two rows (32 e2m1 codes) and the rows' scales as bf16 pairs.
struct Raw {
  uint4 va, vb;
  uint32_t sca, scb;
};

// Word q of the chunk (codes 8 q .. 8 q + 7 of both rows) -> the A registers of steps
// 2 q and 2 q + 1.
__device__ __forceinline__ void decode_chunk_word(const Raw& r, int q, uint32_t (&A)[8][4]) {
  const uint32_t ua = q == 0 ? r.va.x : q == 1 ? r.va.y : q == 2 ? r.va.z : r.va.w;
  const uint32_t ub = q == 0 ? r.vb.x : q == 1 ? r.vb.y : q == 2 ? r.vb.z : r.vb.w;
  uint32_t pa[4], pb[4];
  decode8(ua, r.sca, pa);
  decode8(ub, r.scb, pb);
  A[2 * q][0] = pa[0], A[2 * q][1] = pb[0], A[2 * q][2] = pa[1], A[2 * q][3] = pb[1];
  A[2 * q + 1][0] = pa[2], A[2 * q + 1][1] = pb[2], A[2 * q + 1][2] = pa[3], A[2 * q + 1][3] = pb[3];
}

template <int kStage, int kN, class R>
__device__ __forceinline__ void wg_tile(const MoeGroupedArgs& a, const MoeTile& tile, int64_t rb0, int items,
                                        uint32_t sbase, uint8_t* sgen) {
  constexpr int kD = kN / 2;      // accumulator registers per thread
  constexpr int kUnits = kN / 16;  // 16-byte token copies per thread per chunk (kN rows x 16)
  constexpr int kBlockRows = kStage == 1 ? 64 : 128;  // outputs (stage 1) / w2 rows (stage 2) per row block
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  const MoeExpertPtrs& ex = a.experts[tile.expert];
  const int64_t K = L.cols, out_rows = L.rows;
  const int chunks = int(K / 128), total = items * chunks;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
  const int rows = tile.rows;

  // The warp's 16 weight rows in row block rb0 (rows 16 (warp % 4) .. of its warpgroup's
  // 64): stage 1 w1 row o (A row g) and w3 row o (A row g + 8) of output o = o0 + g; stage
  // 2 w2 rows o0 + g and o0 + 8 + g. Item r: + r kBlockRows rows. out_rows is a multiple
  // of kBlockRows (host check).
  const int64_t o0 = rb0 * kBlockRows + (kStage == 1 ? warp * 8 : warp * 16);
  const int64_t ra = o0 + g, rb = kStage == 1 ? o0 + g : o0 + 8 + g;
  const int64_t row_bytes = K / 2;
  const uint8_t* wa = ex.w[kStage == 1 ? 0 : 2] + ra * row_bytes + c * 16;
  const uint8_t* wb = ex.w[kStage == 1 ? 1 : 2] + rb * row_bytes + c * 16;
  const uint8_t* sa = ex.s[kStage == 1 ? 0 : 2] + ra * L.scale_cols + c;
  const uint8_t* sb = ex.s[kStage == 1 ? 1 : 2] + rb * L.scale_cols + c;
  const int64_t item_w = kBlockRows * row_bytes, item_s = kBlockRows * L.scale_cols;
  // The scale bytes come through the ring too (a global load consumed in the chunk that
  // issues it stalls the warp for a memory latency per chunk: the first run of this
  // kernel, NOTES "MoE big tiles on wgmma"). cp.async copies whole aligned words, so each
  // thread copies the 4-byte word holding its byte (a word never straddles an allocation)
  // and keeps the byte's place in it: item_s, the chunk step 4 and the row offsets keep
  // that place the same for every chunk (item_s = 64 or 128 rows x scale_cols).
  const uint32_t sha = uint32_t(reinterpret_cast<uintptr_t>(sa) & 3) * 8,
                 shb = uint32_t(reinterpret_cast<uintptr_t>(sb) & 3) * 8;
  const uint8_t* const sa4 = sa - (reinterpret_cast<uintptr_t>(sa) & 3);
  const uint8_t* const sb4 = sb - (reinterpret_cast<uintptr_t>(sb) & 3);

  // Token copies: unit u = tid + 256 j = (row u >> 4, half (u >> 3) & 1, granule u & 7),
  // stored at half * kAtomBytes + row * 128 + ((granule ^ (row % 8)) * 16): the 128-byte
  // swizzle. row % 8 and the granule do not depend on j, so the destination is xdst +
  // 2048 j. Sources as int32 element offsets into the planes (rows x K < 2^31: host check).
  const int half = (tid >> 3) & 1, gran = tid & 7;
  const uint32_t xdst = uint32_t(half * kAtomBytes + (tid >> 4) * 128 + ((gran ^ ((tid >> 4) & 7)) << 4));
  // Kept in shared memory (xo[j * 256 + tid], read back by the same thread): registers
  // are the scarce resource here.
  int32_t* const xo = reinterpret_cast<int32_t*>(sgen + R::kXoBase);
#pragma unroll
  for (int j = 0; j < kUnits; ++j) {
    const int r = (tid >> 4) + 16 * j;
    int32_t v = -1;
    if (r < rows) {
      const int64_t p = tile.row0 + r;
      const int64_t xrow = kStage == 1 ? int64_t(a.row_token[p]) : p;
      v = int32_t(xrow * K + half * 64 + gran * 8);
    }
    xo[j * kWgThreads + tid] = v;
  }
  const uint32_t wdst = uint32_t(tid * 16);            // in a weight stage: row a; row b at + kWBytes / 2
  const uint32_t sdst = uint32_t(kWBytes + tid * 4);  // row a's scale word; row b's at + kSBytes / 2
  // Stream chunk gc (item gc / chunks, chunk gc % chunks): its tokens (the same for every
  // item) into token stage gc % kXStages, this thread's weight bytes and scale words into
  // weight stage gc % kWStages. The caller commits the cp.async group.
  auto stage_x = [&](int gc) {
    if (gc < total) {
      const uint32_t st = sbase + uint32_t(gc % R::kXStages) * kXBytes;
      const int64_t xc = int64_t(gc % chunks) * 128;
#pragma unroll
      for (int j = 0; j < kUnits; ++j) {
        const int32_t o = xo[j * kWgThreads + tid];
        if (o >= 0) cp_async16(st + xdst + j * 2048, a.xt + o + xc);
      }
    }
  };
  auto stage_w = [&](int gc) {
    if (gc < total) {
      const uint32_t st = sbase + uint32_t(R::kWBase + (gc % R::kWStages) * kWSlotBytes);
      const int it = gc / chunks, ch = gc - it * chunks;
      const int64_t wo = it * item_w + int64_t(ch) * 64, so = it * item_s + int64_t(ch) * 4;
      cp_async16(st + wdst, wa + wo);
      cp_async16(st + wdst + kWBytes / 2, wb + wo);
      cp_async4(st + sdst, sa4 + so);
      cp_async4(st + sdst + kSBytes / 2, sb4 + so);
    }
  };

  // Rows rows .. kN - 1 of every token stage: zeros (no copy writes them in this block).
  {
    const int pad = kN - rows, per_stage = pad * 16;
    for (int i = tid; i < R::kXStages * per_stage; i += kWgThreads) {
      const int s = i / per_stage, u = i % per_stage, r = rows + (u >> 4), hf = (u >> 3) & 1, gr = u & 7;
      *reinterpret_cast<uint4*>(sgen + s * kXBytes + hf * kAtomBytes + r * 128 + gr * 16) = make_uint4(0, 0, 0, 0);
    }
  }

  // Stream chunk gc's weights: this thread's 2 x 16 bytes in the ring and the two scales.
  auto load_raw = [&](int gc) {
    const uint8_t* st = sgen + R::kWBase + (gc % R::kWStages) * kWSlotBytes;
    const uint32_t wsa = *reinterpret_cast<const uint32_t*>(st + sdst),
                   wsb = *reinterpret_cast<const uint32_t*>(st + sdst + kSBytes / 2);
    return Raw{*reinterpret_cast<const uint4*>(st + wdst), *reinterpret_cast<const uint4*>(st + wdst + kWBytes / 2),
               scale_bf16x2(uint8_t(wsa >> sha)), scale_bf16x2(uint8_t(wsb >> shb))};
  };
  uint32_t A[8][4];  // the A registers of the chunk's 8 steps (decode_chunk_word)
  auto decode_q = [&](const Raw& r, int q) { decode_chunk_word(r, q, A); };

  float acc[kD], tmp[kD];
#pragma unroll
  for (int i = 0; i < kD; ++i) acc[i] = tmp[i] = 0.0f;

  // Item r's outputs from acc, then acc = 0. acc[4 i + {0, 1}]: A row g, tokens
  // 8 i + 2 c + {0, 1}; acc[4 i + {2, 3}]: A row g + 8.
  auto store = [&](int r) {
    const int64_t ob = o0 + int64_t(r) * kBlockRows;
#pragma unroll
    for (int i = 0; i < kD / 4; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int t = 8 * i + 2 * c + h;
        if (t >= rows) continue;
        const int64_t p = tile.row0 + t;
        if constexpr (kStage == 1) {
          const int64_t o = ob + g;  // output o, stored at its permuted column for stage 2
          const float v = moe_terms::swiglu(acc[4 * i + h], acc[4 * i + 2 + h], a.limit,
                                            a.row_weight ? a.row_weight[p] : 0.0f, a.row_weight != nullptr);
          moe_terms::store_terms<1>(a.ht, a.ht_plane, p * out_rows + (o & ~int64_t(127)) + chunk_pos(int(o & 127)), v);
        } else {
          a.y[p * out_rows + ob + g] = acc[4 * i + h];
          a.y[p * out_rows + ob + 8 + g] = acc[4 * i + 2 + h];
        }
      }
#pragma unroll
    for (int i = 0; i < kD; ++i) acc[i] = 0.0f;
  };

  // One stream chunk: its 8 MMAs, each its own wgmma group; as steps 2 q and 2 q + 1
  // complete, word q of the next chunk is decoded into their A registers (the decode runs
  // under the remaining MMAs, one set of A registers). Then the chain's sum is added into
  // acc (and the item's outputs stored after its last chunk), a barrier (chunk gc + 1
  // staged by every thread, every warpgroup past chunk gc) and the refills: chunk gc +
  // kXStages' tokens into chunk gc's token stage; on every kWRun-th chunk, the weights of
  // chunks gc + kWStages .. + kWRun - 1 into the weight stages of chunks gc .. gc + kWRun
  // - 1, which this thread has read (chunk gc + 1's by load_raw in this body).
  auto body = [&](int gc) {
    const uint32_t xs = sbase + uint32_t(gc % R::kXStages) * kXBytes;
    wgmma::fence();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      wgmma::WgmmaRS<kN>::mma(tmp, A[j], wgmma::desc_k_sw128(xs + (j >> 2) * kAtomBytes + (j & 3) * 32), j);
      wgmma::commit();
    }
    const bool more = gc + 1 < total;
    Raw raw{};
    if (more) {
      cp_wait<R::kXStages - 2>();  // group gc + 1 (chunk gc + 1's tokens and, earlier, its weights) has landed
      raw = load_raw(gc + 1);
    }
    auto next_q = [&](auto qc) {
      constexpr int q = decltype(qc)::value;
      wgmma::wait<6 - 2 * q>();  // steps 2 q and 2 q + 1 are done with their A registers
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        wgmma::keep(A[2 * q][r]);
        wgmma::keep(A[2 * q + 1][r]);
      }
      if (more) decode_q(raw, q);
    };
    next_q(std::integral_constant<int, 0>{});
    next_q(std::integral_constant<int, 1>{});
    next_q(std::integral_constant<int, 2>{});
    next_q(std::integral_constant<int, 3>{});  // waits for all 8
#pragma unroll
    for (int i = 0; i < kD; ++i) wgmma::keep(tmp[i]);
#pragma unroll
    for (int i = 0; i < kD; ++i) acc[i] += tmp[i];
    if (gc % chunks == chunks - 1) store(gc / chunks);
    wgmma::fence_proxy_async();  // this thread's copies of chunk gc + 1, for the wgmma reads
    __syncthreads();
    stage_x(gc + R::kXStages);  // into token stage gc % kXStages, which no wgmma reads any more
    if (gc % R::kWRun == 0)
#pragma unroll
      for (int r = 0; r < R::kWRun; ++r) stage_w(gc + R::kWStages + r);
    cp_commit();  // group gc + kXStages (empty past the end: the count stays uniform)
  };

  // Groups 0 .. kXStages - 1: chunk s's tokens, and the weights of chunks 0 .. kWStages - 1,
  // chunk c's in group min(c, kXStages - 1) (never later than its tokens' group).
#pragma unroll 1
  for (int s = 0; s < R::kXStages; ++s) {
    stage_x(s);
    if (s < R::kXStages - 1) {
      stage_w(s);
    } else {
#pragma unroll 1
      for (int c = s; c < R::kWStages; ++c) stage_w(c);
    }
    cp_commit();
  }
  cp_wait<R::kXStages - 1>();  // group 0: stream chunk 0
  {
    const Raw r0 = load_raw(0);
#pragma unroll
    for (int q = 0; q < 4; ++q) decode_q(r0, q);
  }
  wgmma::fence_proxy_async();
  __syncthreads();  // chunk 0, the zero rows and xo, from every thread
#pragma unroll 1
  for (int gc = 0; gc < total; ++gc) body(gc);
}

// Grid (group of row blocks, tile): block x takes row blocks [x items, (x + 1) items) of
// tile y (the last group may be shorter); a tile's groups are neighbours in launch order, so
// its staged tokens are read from L2 by blocks running at the same time.
template <int kStage, class R>
__global__ void __launch_bounds__(kWgThreads, 1) moe_wgmma_kernel(MoeGroupedArgs a, int items) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t wg_smem[];
  if (int64_t(blockIdx.y) >= *a.num_tiles) return;
  const MoeTile tile = a.tiles[blockIdx.y];
  const int64_t blocks = (kStage == 1 ? a.w13.rows / 64 : a.w2.rows / 128);
  const int64_t rb0 = int64_t(blockIdx.x) * items;
  const int n = int(min(int64_t(items), blocks - rb0));
  const uint32_t raw = smem_u32(wg_smem), pad = (1024u - raw % 1024u) % 1024u;
  uint8_t* const sgen = wg_smem + pad;
  const uint32_t sbase = raw + pad;
  switch ((tile.rows + 15) / 16) {  // 1 .. kWgMaxN / 16: the plan's tiles have 1 .. kMoeTcWgmmaRows rows
    case 1: wg_tile<kStage, 16, R>(a, tile, rb0, n, sbase, sgen); break;
    case 2: wg_tile<kStage, 32, R>(a, tile, rb0, n, sbase, sgen); break;
    case 3: wg_tile<kStage, 48, R>(a, tile, rb0, n, sbase, sgen); break;
    case 4: wg_tile<kStage, 64, R>(a, tile, rb0, n, sbase, sgen); break;
    case 5: wg_tile<kStage, 80, R>(a, tile, rb0, n, sbase, sgen); break;
    case 6: wg_tile<kStage, 96, R>(a, tile, rb0, n, sbase, sgen); break;
    case 7: wg_tile<kStage, 112, R>(a, tile, rb0, n, sbase, sgen); break;
    case 8: wg_tile<kStage, 128, R>(a, tile, rb0, n, sbase, sgen); break;
    default: __trap();  // a tile taller than the plan makes them
  }
#else
  __trap();  // wgmma needs sm_90a; the host never launches this elsewhere (moe_tc_wgmma_supported)
#endif
}
static_assert(kWgMaxN == 128, "the switch above lists the cases up to 128 tokens");

// ---- MoeTcBig::kWgmmaWs (and kAuto): the same tiles, warp-specialized (helper moepf2, NOTES 18) ----
// Why: ncu on wg_tile at T = 8192 (NOTES 14) has the tensor pipe active 26-28% of the
// cycles. After each chunk's 8 MMAs both warpgroups, in step because of the block barrier,
// decode the last word, sum the chain, meet at __syncthreads and issue the next chunk's
// token copies (LDS'd offsets, 64-bit arithmetic, divisions) while no MMA runs on the SM.
// Here a producer warpgroup (warps 8..11) issues every token copy and signals a per-stage
// "full" mbarrier as they land (cp.async.mbarrier.arrive.noinc); each consumer warpgroup waits on
// that barrier, runs its chunk exactly as wg_tile does, and releases the stage on an
// "empty" mbarrier once its MMAs are done. No block-wide barrier: the warpgroups drift
// apart by up to the ring's depth, so one's decode / chain sum / epilogue runs under the
// other's MMAs. The weights and scale words stay per consumer thread (each thread copies
// and reads back its own bytes: cp.async.wait_group suffices, no cross-thread signal).
// Chunk, item and ring positions are counters (no per-chunk division), weight offsets
// 32-bit. The MMAs, their A registers, the token layout, the chains and the promotion
// (acc += chain per chunk, chunk order) are wg_tile's: bitwise the same output.
// Registers: a 9-warp block gets 168 per thread (3 warps on one SM sub-partition's 16K
// registers) and the N = 128 consumers spilled 2 KB; so the producer is a whole warpgroup
// (its copies spread over the 4 sub-partitions) that gives registers back (setmaxnreg 40)
// and the consumers take them (232: 40 + 2 x 232 warps of 32 = the sub-partition's 16K).
constexpr int kWsConsumers = 256;                   // two consumer warpgroups (warps 0..7)
constexpr int kWsThreads = kWsConsumers + 128;      // + the producer warpgroup (warps 8..11)
constexpr int kWsProducerRegs = 40, kWsConsumerRegs = 232;
static_assert(kWsProducerRegs + 2 * kWsConsumerRegs <= 512, "a sub-partition's 16K registers / 32 lanes");
constexpr int kWsStages = 4;                   // token and weight stages (RingShared's depth)
struct WsLayout {
  static constexpr int kWBase = kWsStages * kXBytes;
  static constexpr int kXoBase = kWBase + kWsStages * kWSlotBytes;
  static constexpr int kBarBase = kXoBase + kXoBytes;                  // full[kWsStages], empty[kWsStages]
  static constexpr int kSmem = kBarBase + 2 * kWsStages * 8 + 1024;  // + slack to align to 1024
};
static_assert(WsLayout::kSmem <= kWgSmemMax, "the ws ring must fit the block's shared memory");
static_assert(kXoBytes >= kWgMaxN * 16 * 4, "one token offset per 16-byte unit of a chunk");

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar) : "memory");
}
// Until the phase of the given parity has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// One arrival on bar once every cp.async this thread issued before has landed (the
// barrier's count includes it: .noinc).
__device__ __forceinline__ void cp_arrive_noinc(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

// Thread-block clusters (MoeTcBig::kWgmmaCl2 / kWgmmaCl4, ws_tile with kCl > 1).
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// The cluster-window address of this block's shared-window address addr in block `rank`.
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, uint32_t rank) {
  uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
// Every thread of every block of the cluster; orders shared-memory writes before it
// (release) with reads after it (acquire) cluster-wide.
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// The barrier inits, for the other blocks' arrivals and transaction counts.
__device__ __forceinline__ void fence_mbar_init_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// An arrival on a barrier of any block of the cluster (bar: cluster-window address),
// releasing this thread's prior accesses (the wgmma reads of the stage) cluster-wide.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar) {
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
}
// As mbar_wait, acquiring at cluster scope (the other blocks' arrivals).
__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// The current phase of bar also waits for `bytes` more bytes of complete_tx (st.async from
// the other blocks; they may land before this: the count goes negative meanwhile).
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// 16 bytes into another block's shared memory (addr, bar: cluster-window addresses); the
// bytes count on that block's barrier bar once written.
__device__ __forceinline__ void st_async16(uint32_t addr, const uint4& v, uint32_t bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(addr),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(bar)
               : "memory");
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}

// kCl > 1 (MoeTcBig::kWgmmaCl2 / kWgmmaCl4): the block is one of a cluster of kCl blocks on
// consecutive row blocks of the same tile, which all need the same token chunks. Each
// block's producer copies only its share of every chunk from L2 (8-row groups j with j %
// kCl == its rank) and, once those land, forwards them into the other blocks' stages with
// st.async, which count on those blocks' "full" barriers (expect_tx: the bytes the others
// send). A stage is free when the consumers of every block in the cluster have released it:
// each consumer warp arrives on the "empty" barrier of every block. cl_total: the cluster's
// chunk count (its first block's items x chunks; a block with fewer row blocks, at the
// end of the matrix, runs the rest of the token stream without MMAs).
// Measured (run moeclu, NOTES 21): same bits, but 1.4-1.7x (kCl 2) and 2.0-2.7x (kCl 4) the
// time of kCl = 1 at T = 1024 .. 8192, with L2 at 2.5 / 1.5 TB/s: each producer thread forwards
// chunk g - 1 right after issuing chunk g (two chunks of copies in flight, one L2 round trip +
// the forward per chunk) and a stage frees only when the slowest block of the cluster is done
// with it, so the 4-stage ring acts as ~2 stages. Kept opt-in for A/B.
template <int kStage, int kN, int kCl = 1>
__device__ __forceinline__ void ws_tile(const MoeGroupedArgs& a, const MoeTile& tile, int64_t rb0, int items,
                                        uint32_t sbase, uint8_t* sgen, int cl_items = 0) {
  using S = WsLayout;
  constexpr int kD = kN / 2;          // accumulator registers per thread
  constexpr int kPerLane = kN / 8;    // a producer thread's 16-byte token copies per chunk (kN x 16 / 128)
  constexpr int kBlockRows = kStage == 1 ? 64 : 128;
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  const MoeExpertPtrs& ex = a.experts[tile.expert];
  const int64_t K = L.cols, out_rows = L.rows;
  const int chunks = int(K / 128), total = items * chunks;
  const int cl_total = kCl > 1 ? cl_items * chunks : total;  // the token stream's chunks
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
  const int rows = tile.rows;
  int32_t* const xo = reinterpret_cast<int32_t*>(sgen + S::kXoBase);
  const uint32_t full0 = sbase + S::kBarBase, empty0 = full0 + kWsStages * 8;

  // Every thread: the token source offsets of unit u (row u >> 4, half (u >> 3) & 1,
  // granule u & 7; -1 past the tile's rows), the zero rows of every stage, the barriers.
  for (int u = tid; u < kN * 16; u += kWsThreads) {
    const int r = u >> 4;
    int32_t v = -1;
    if (r < rows) {
      const int64_t p = tile.row0 + r;
      const int64_t xrow = kStage == 1 ? int64_t(a.row_token[p]) : p;
      v = int32_t(xrow * K + ((u >> 3) & 1) * 64 + (u & 7) * 8);
    }
    xo[u] = v;
  }
  {
    const int pad = kN - rows, per_stage = pad * 16;
    for (int i = tid; i < kWsStages * per_stage; i += kWsThreads) {
      const int s = i / per_stage, u = i % per_stage, r = rows + (u >> 4), hf = (u >> 3) & 1, gr = u & 7;
      *reinterpret_cast<uint4*>(sgen + s * kXBytes + hf * kAtomBytes + r * 128 + gr * 16) = make_uint4(0, 0, 0, 0);
    }
  }
  if (tid == 0)
    for (int s = 0; s < kWsStages; ++s) {
      mbar_init(full0 + 8 * s, 128);  // the producer's 128 threads (cp.async arrivals)
      mbar_init(empty0 + 8 * s, 8 * kCl);  // lane 0 of each consumer warp (of every block of the cluster)
    }
  wgmma::fence_proxy_async();  // the zero rows, for the wgmma reads
  if constexpr (kCl > 1) {
    if (tid == 0) fence_mbar_init_cluster();
    cluster_sync();  // also the other blocks' barriers are initialized before anything reaches them
  } else {
    __syncthreads();  // xo, the zero rows, the barriers: the last block-wide barrier
  }

  if constexpr (kCl > 1) if (tid >= kWsConsumers) {
    // The cluster's producer (see above): thread pt copies units pt + 128 j of its groups j
    // = kCl jj + rank (row (pt >> 4) + 8 j), then forwards them to the other blocks.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kWsProducerRegs));
    const int pt = tid - kWsConsumers;
    const uint32_t rank = cluster_rank();
    constexpr int kOwn = (kPerLane + kCl - 1) / kCl;
    int32_t xr[kOwn];
#pragma unroll
    for (int jj = 0; jj < kOwn; ++jj) {
      const int j = kCl * jj + int(rank);
      xr[jj] = j < kPerLane ? xo[pt + 128 * j] : -1;
    }
    // The bytes the other blocks send per chunk: 256 per tile row outside this block's groups.
    int own_rows = 0;
    for (int j = int(rank); 8 * j < rows; j += kCl) own_rows += min(8, rows - 8 * j);
    const uint32_t recv = uint32_t(rows - own_rows) * 256u;
    const uint32_t dbase = uint32_t(((pt >> 3) & 1) * kAtomBytes + (pt >> 4) * 128 +
                                    (((pt & 7) ^ ((pt >> 4) & 7)) << 4)) + 1024u * rank;
    uint32_t peer_smem[kCl - 1], peer_full[kCl - 1];
#pragma unroll
    for (int p = 0; p < kCl - 1; ++p) {
      const uint32_t peer = (rank + 1 + uint32_t(p)) % kCl;
      peer_smem[p] = cluster_map(sbase, peer);
      peer_full[p] = cluster_map(full0, peer);
    }
    // This thread's units of the chunk in stage sf (landed: cp.async.wait_group) to the others.
    auto forward = [&](int sf) {
      const uint32_t off = uint32_t(sf) * kXBytes + dbase;
#pragma unroll
      for (int jj = 0; jj < kOwn; ++jj)
        if (xr[jj] >= 0) {
          const uint4 v = lds128(sbase + off + uint32_t(1024 * kCl * jj));
#pragma unroll
          for (int p = 0; p < kCl - 1; ++p)
            st_async16(peer_smem[p] + off + uint32_t(1024 * kCl * jj), v, peer_full[p] + 8u * uint32_t(sf));
        }
    };
    const uint16_t* xc = a.xt;
    int ch = 0, s = 0, sp = 0;
    uint32_t ph = 0;
#pragma unroll 1
    for (int gc = 0; gc < cl_total; ++gc) {
      if (gc >= kWsStages) mbar_wait_cluster(empty0 + 8 * s, ph ^ 1);  // every block's consumers released it
      if (pt == 0) mbar_expect_tx(full0 + 8 * s, recv);
      const uint32_t st = sbase + uint32_t(s) * kXBytes + dbase;
#pragma unroll
      for (int jj = 0; jj < kOwn; ++jj)
        if (xr[jj] >= 0) cp_async16(st + uint32_t(1024 * kCl * jj), xc + xr[jj]);
      cp_arrive_noinc(full0 + 8 * s);
      cp_commit();
      if (gc > 0) {  // the previous chunk's own units, once landed, to the other blocks
        cp_wait<1>();
        forward(sp);
      }
      sp = s;
      if (++ch == chunks) ch = 0, xc = a.xt;
      else xc += 128;
      if (++s == kWsStages) s = 0, ph ^= 1;
    }
    if (cl_total > 0) {
      cp_wait<0>();
      forward(sp);
    }
    cluster_sync();  // no block leaves while the others may still write its shared memory
    return;
  }
  if (tid >= kWsConsumers) {
    // The producer: chunk gc's tokens into stage gc % kWsStages once both warpgroups have
    // released chunk gc - kWsStages. Thread pt copies units pt + 128 j (row (pt >> 4) + 8 j,
    // so the swizzle term is the same for every j: destination dbase + 1024 j); its
    // offsets stay in registers.
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kWsProducerRegs));
    const int pt = tid - kWsConsumers;
    int32_t xr[kPerLane];
#pragma unroll
    for (int j = 0; j < kPerLane; ++j) xr[j] = xo[pt + 128 * j];
    const uint32_t dbase =
        uint32_t(((pt >> 3) & 1) * kAtomBytes + (pt >> 4) * 128 + (((pt & 7) ^ ((pt >> 4) & 7)) << 4));
    const uint16_t* xc = a.xt;  // column 0 of the current chunk
    int ch = 0, s = 0;
    uint32_t ph = 0;  // parity of stage s's current round
#pragma unroll 1
    for (int gc = 0; gc < total; ++gc) {
      if (gc >= kWsStages) mbar_wait(empty0 + 8 * s, ph ^ 1);
      const uint32_t st = sbase + uint32_t(s) * kXBytes + dbase;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (xr[j] >= 0) cp_async16(st + uint32_t(1024 * j), xc + xr[j]);
      cp_arrive_noinc(full0 + 8 * s);
      if (++ch == chunks) ch = 0, xc = a.xt;
      else xc += 128;
      if (++s == kWsStages) s = 0, ph ^= 1;
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    return;
  }

  // The consumers: as wg_tile (rows, weight pointers, scale words, decode, store).
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kWsConsumerRegs));
  const int64_t o0 = rb0 * kBlockRows + (kStage == 1 ? warp * 8 : warp * 16);
  const int64_t ra = o0 + g, rb = kStage == 1 ? o0 + g : o0 + 8 + g;
  const int64_t row_bytes = K / 2;
  const uint8_t* wa = ex.w[kStage == 1 ? 0 : 2] + ra * row_bytes + c * 16;
  const uint8_t* wb = ex.w[kStage == 1 ? 1 : 2] + rb * row_bytes + c * 16;
  const uint8_t* sa = ex.s[kStage == 1 ? 0 : 2] + ra * L.scale_cols + c;
  const uint8_t* sb = ex.s[kStage == 1 ? 1 : 2] + rb * L.scale_cols + c;
  // 32-bit steps (host check: items x kBlockRows x row_bytes < 2^31).
  const uint32_t item_w = uint32_t(kBlockRows * row_bytes), item_s = uint32_t(kBlockRows * L.scale_cols);
  const uint32_t sha = uint32_t(reinterpret_cast<uintptr_t>(sa) & 3) * 8,
                 shb = uint32_t(reinterpret_cast<uintptr_t>(sb) & 3) * 8;
  const uint8_t* const sa4 = sa - (reinterpret_cast<uintptr_t>(sa) & 3);
  const uint8_t* const sb4 = sb - (reinterpret_cast<uintptr_t>(sb) & 3);
  const uint32_t wdst = uint32_t(tid * 16), sdst = uint32_t(kWBytes + tid * 4);
  // The weight stream: the next chunk to copy (gw), its chunk in the item and its offsets.
  int gw = 0, wch = 0;
  uint32_t wo = 0, so = 0;
  auto stage_w = [&]() {
    if (gw < total) {
      const uint32_t st = sbase + uint32_t(S::kWBase + (gw & (kWsStages - 1)) * kWSlotBytes);
      cp_async16(st + wdst, wa + wo);
      cp_async16(st + wdst + kWBytes / 2, wb + wo);
      cp_async4(st + sdst, sa4 + so);
      cp_async4(st + sdst + kSBytes / 2, sb4 + so);
      if (++wch == chunks) {
        wch = 0;
        wo += item_w - uint32_t(chunks - 1) * 64;
        so += item_s - uint32_t(chunks - 1) * 4;
      } else {
        wo += 64;
        so += 4;
      }
    }
    ++gw;
    cp_commit();  // one group per chunk (empty past the end: the count stays uniform)
  };
  static_assert((kWsStages & (kWsStages - 1)) == 0, "stage = chunk & (kWsStages - 1)");
  auto load_raw = [&](int gc) {
    const uint8_t* st = sgen + S::kWBase + (gc & (kWsStages - 1)) * kWSlotBytes;
    const uint32_t wsa = *reinterpret_cast<const uint32_t*>(st + sdst),
                   wsb = *reinterpret_cast<const uint32_t*>(st + sdst + kSBytes / 2);
    return Raw{*reinterpret_cast<const uint4*>(st + wdst), *reinterpret_cast<const uint4*>(st + wdst + kWBytes / 2),
               scale_bf16x2(uint8_t(wsa >> sha)), scale_bf16x2(uint8_t(wsb >> shb))};
  };
  uint32_t A[8][4];
  auto decode_q = [&](const Raw& r, int q) { decode_chunk_word(r, q, A); };
  float acc[kD], tmp[kD];
#pragma unroll
  for (int i = 0; i < kD; ++i) acc[i] = tmp[i] = 0.0f;
  auto store = [&](int r) {  // wg_tile's store
    const int64_t ob = o0 + int64_t(r) * kBlockRows;
#pragma unroll
    for (int i = 0; i < kD / 4; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int t = 8 * i + 2 * c + h;
        if (t >= rows) continue;
        const int64_t p = tile.row0 + t;
        if constexpr (kStage == 1) {
          const int64_t o = ob + g;
          const float v = moe_terms::swiglu(acc[4 * i + h], acc[4 * i + 2 + h], a.limit,
                                            a.row_weight ? a.row_weight[p] : 0.0f, a.row_weight != nullptr);
          moe_terms::store_terms<1>(a.ht, a.ht_plane, p * out_rows + (o & ~int64_t(127)) + chunk_pos(int(o & 127)), v);
        } else {
          a.y[p * out_rows + ob + g] = acc[4 * i + h];
          a.y[p * out_rows + ob + 8 + g] = acc[4 * i + 2 + h];
        }
      }
#pragma unroll
    for (int i = 0; i < kD; ++i) acc[i] = 0.0f;
  };

  // kCl > 1: a stage is released on the "empty" barrier of every block of the cluster.
  // cl_empty[p]: block p's "empty" barriers (cluster-window addresses, this block's own included).
  uint32_t cl_empty[kCl];
  if constexpr (kCl > 1) {
#pragma unroll
    for (int p = 0; p < kCl; ++p) cl_empty[p] = cluster_map(empty0, uint32_t(p));
  }
  auto release_cl = [&](int st) {
#pragma unroll
    for (int p = 0; p < kCl; ++p) mbar_arrive_cluster(cl_empty[p] + 8u * uint32_t(st));
  };

  // Weights of chunks 0 .. kWsStages - 1 (one group each); chunk 0 decoded.
#pragma unroll 1
  for (int s = 0; s < kWsStages; ++s) stage_w();
  cp_wait<kWsStages - 1>();
  {
    const Raw r0 = load_raw(0);
#pragma unroll
    for (int q = 0; q < 4; ++q) decode_q(r0, q);
  }
  int s = 0, cch = 0, item = 0;
  uint32_t ph = 0;
#pragma unroll 1
  for (int gc = 0; gc < total; ++gc) {
    // Chunk gc's tokens have landed (every producer thread's copies; kCl > 1: and the other
    // blocks' st.async, hence the cluster-scope acquire).
    if constexpr (kCl > 1) mbar_wait_cluster(full0 + 8 * s, ph);
    else mbar_wait(full0 + 8 * s, ph);
    wgmma::fence_proxy_async();    // ... and are visible to this thread's wgmma (async proxy) reads
    const uint32_t xs = sbase + uint32_t(s) * kXBytes;
    wgmma::fence();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      wgmma::WgmmaRS<kN>::mma(tmp, A[j], wgmma::desc_k_sw128(xs + (j >> 2) * kAtomBytes + (j & 3) * 32), j);
      wgmma::commit();
    }
    // Weight stage s held chunk gc (read back in the previous iteration): chunk gc + kWsStages.
    stage_w();
    const bool more = gc + 1 < total;
    // Chunk gc + 1's scales now, its weight words one q at a time (wg_tile holds all 10
    // words of Raw across the 4 waits): fewer live registers under the 232 of setmaxnreg
    // (ptxas spills over the 8 tile heights: 316 -> 296 bytes in stage 2, 396 -> 376 in 1).
    const uint8_t* const wst = sgen + S::kWBase + ((gc + 1) & (kWsStages - 1)) * kWSlotBytes;
    uint32_t sca = 0, scb = 0;
    if (more) {
      cp_wait<kWsStages - 1>();  // chunk gc + 1's weights (this thread's own copies) have landed
      sca = scale_bf16x2(uint8_t(*reinterpret_cast<const uint32_t*>(wst + sdst) >> sha));
      scb = scale_bf16x2(uint8_t(*reinterpret_cast<const uint32_t*>(wst + sdst + kSBytes / 2) >> shb));
    }
    auto next_q = [&](auto qc) {
      constexpr int q = decltype(qc)::value;
      uint32_t ua = 0, ub = 0;
      if (more) {  // loaded before the wait, so the LDS latency hides under the MMAs
        ua = *reinterpret_cast<const uint32_t*>(wst + wdst + 4 * q);
        ub = *reinterpret_cast<const uint32_t*>(wst + wdst + kWBytes / 2 + 4 * q);
      }
      wgmma::wait<6 - 2 * q>();
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        wgmma::keep(A[2 * q][r]);
        wgmma::keep(A[2 * q + 1][r]);
      }
      if (more) decode_q(Raw{make_uint4(ua, ua, ua, ua), make_uint4(ub, ub, ub, ub), sca, scb}, q);
    };
    next_q(std::integral_constant<int, 0>{});
    next_q(std::integral_constant<int, 1>{});
    next_q(std::integral_constant<int, 2>{});
    next_q(std::integral_constant<int, 3>{});  // waits for all 8: token stage s is free for this warp
    if constexpr (kCl > 1) {
      if (lane == 0) release_cl(s);
    } else {
      if (lane == 0) mbar_arrive(empty0 + 8 * s);
    }
#pragma unroll
    for (int i = 0; i < kD; ++i) wgmma::keep(tmp[i]);
#pragma unroll
    for (int i = 0; i < kD; ++i) acc[i] += tmp[i];
    if (++cch == chunks) {
      cch = 0;
      store(item++);
    }
    if (++s == kWsStages) s = 0, ph ^= 1;
  }
  if constexpr (kCl > 1) {
    // The rest of the cluster's token stream (a block with fewer row blocks): no MMAs, the
    // stages released as they fill.
#pragma unroll 1
    for (int gc = total; gc < cl_total; ++gc) {
      mbar_wait_cluster(full0 + 8 * s, ph);
      if (lane == 0) release_cl(s);
      if (++s == kWsStages) s = 0, ph ^= 1;
    }
    cluster_sync();  // as the producer's
  }
}

// kCl > 1: launched as clusters of kCl blocks along x (launch_wgmma_ws); the blocks of a
// cluster share blockIdx.y (the tile), so a cluster leaves at the tile check as a whole.
template <int kStage, int kCl = 1>
__global__ void __launch_bounds__(kWsThreads, 1) moe_wgmma_ws_kernel(MoeGroupedArgs a, int items) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t wg_smem[];
  if (int64_t(blockIdx.y) >= *a.num_tiles) return;
  const MoeTile tile = a.tiles[blockIdx.y];
  const int64_t blocks = (kStage == 1 ? a.w13.rows / 64 : a.w2.rows / 128);
  const int64_t rb0 = int64_t(blockIdx.x) * items;
  const int n = int(max(int64_t(0), min(int64_t(items), blocks - rb0)));
  // The cluster's first block's row blocks (>= 1: the grid rounds up to whole clusters only).
  const int n0 = kCl > 1 ? int(min(int64_t(items), blocks - int64_t(blockIdx.x - blockIdx.x % kCl) * items)) : n;
  const uint32_t raw = smem_u32(wg_smem), pad = (1024u - raw % 1024u) % 1024u;
  uint8_t* const sgen = wg_smem + pad;
  const uint32_t sbase = raw + pad;
  switch ((tile.rows + 15) / 16) {
    case 1: ws_tile<kStage, 16, kCl>(a, tile, rb0, n, sbase, sgen, n0); break;
    case 2: ws_tile<kStage, 32, kCl>(a, tile, rb0, n, sbase, sgen, n0); break;
    case 3: ws_tile<kStage, 48, kCl>(a, tile, rb0, n, sbase, sgen, n0); break;
    case 4: ws_tile<kStage, 64, kCl>(a, tile, rb0, n, sbase, sgen, n0); break;
    case 5: ws_tile<kStage, 80, kCl>(a, tile, rb0, n, sbase, sgen, n0); break;
    case 6: ws_tile<kStage, 96, kCl>(a, tile, rb0, n, sbase, sgen, n0); break;
    case 7: ws_tile<kStage, 112, kCl>(a, tile, rb0, n, sbase, sgen, n0); break;
    case 8: ws_tile<kStage, 128, kCl>(a, tile, rb0, n, sbase, sgen, n0); break;
    default: __trap();
  }
#else
  __trap();
#endif
}

// fp32 x -> bf16 (round to nearest even, as moe_split_terms<1>) at the permuted positions,
// four columns per thread: (4 m, 4 m + 1) -> chunk_pos(4 m) + {0, 1}, (4 m + 2, 4 m + 3)
// -> + {8, 9}. dim % 128 == 0, so chunks never straddle rows.
__global__ void moe_split_perm_kernel(const float* x, uint16_t* out, int64_t count) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (i >= count) return;
  const float4 v = *reinterpret_cast<const float4*>(x + i);
  const int64_t at = (i & ~int64_t(127)) + chunk_pos(int(i & 127));
  *reinterpret_cast<__nv_bfloat162*>(out + at) = __nv_bfloat162(__float2bfloat16_rn(v.x), __float2bfloat16_rn(v.y));
  *reinterpret_cast<__nv_bfloat162*>(out + at + 8) = __nv_bfloat162(__float2bfloat16_rn(v.z), __float2bfloat16_rn(v.w));
}

// Row blocks per block: 1 while the tiles are few (every row block its own block, to fill
// the GPU), up to 4 at prefill sizes, where the blocks are many and each block's pipeline
// start-up (the first chunks' HBM latency with nothing else on its SM) is worth spreading.
// From the host's tile bound (the device-side count is not known at launch; the bound is
// >= n k / 64): 195 at T = 256 -> 1, 769 at T = 4096 -> 3, 1153 at T = 8192 -> 4.
int wgmma_items(int64_t max_tiles, int64_t row_blocks) {
  return int(std::clamp<int64_t>(max_tiles / 256, 1, std::min<int64_t>(4, row_blocks)));
}

// The grid both big-tile kernels run on (moe_wgmma_kernel, moe_wgmma_ws_kernel): row blocks of 64
// outputs (stage 1) / 128 rows (stage 2), `items` of them per block; false where the
// arguments are out of the kernels' range (the grid's y limit, int counters of a block's
// chunk stream: items x K / 128 < 2^31).
struct BigGrid {
  const WeightArgs* L = nullptr;  // the stage's weight
  int64_t per_block = 0, row_blocks = 0;
  int items = 0;
  dim3 grid;
};
template <int kStage>
bool big_grid(const MoeGroupedArgs& a, BigGrid& g) {
  g.L = kStage == 1 ? &a.w13 : &a.w2;
  g.per_block = kStage == 1 ? 64 : 128;
  if (g.L->rows % g.per_block != 0 || g.L->rows / g.per_block > INT32_MAX || a.max_tiles > 65535 ||
      a.xt_plane > INT32_MAX)
    return false;
  g.row_blocks = g.L->rows / g.per_block;
  g.items = wgmma_items(a.max_tiles, g.row_blocks);
  if (int64_t(g.items) * (g.L->cols / 128) > INT32_MAX / 2) return false;
  g.grid = dim3(unsigned((g.row_blocks + g.items - 1) / g.items), unsigned(a.max_tiles));
  return true;
}

template <int kStage, class R>
cudaError_t launch_wgmma(const MoeGroupedArgs& a, cudaStream_t stream) {
  BigGrid g;
  if (!big_grid<kStage>(a, g)) return cudaErrorInvalidValue;
  static const cudaError_t attr =
      cudaFuncSetAttribute(moe_wgmma_kernel<kStage, R>, cudaFuncAttributeMaxDynamicSharedMemorySize, R::kSmem);
  if (attr != cudaSuccess) return attr;
  moe_wgmma_kernel<kStage, R><<<g.grid, kWgThreads, R::kSmem, stream>>>(a, g.items);
  return cudaGetLastError();
}

// Row blocks per block for a cluster of cl blocks: the largest count up to the unclustered
// choice (wgmma_items) that wastes the fewest row-block slots once the blocks are rounded up
// to whole clusters (V4.1 at T = 8192: stage 1's 36 row blocks -> 3 per block, 12 blocks;
// stage 2's 40 -> 4 (cl 2: 10 blocks) or 2 (cl 4: 20 blocks)). A function of the shapes and
// the host's tile bound only: the same for every call of the same size.
int cluster_items(int cap, int64_t row_blocks, int cl) {
  int best = 1;
  int64_t best_slots = INT64_MAX;
  for (int it = cap; it >= 1; --it) {
    const int64_t per_tile = (row_blocks + it - 1) / it, slots = (per_tile + cl - 1) / cl * cl * it;
    if (slots < best_slots) best = it, best_slots = slots;
  }
  return best;
}

template <int kStage, int kCl = 1>
cudaError_t launch_wgmma_ws(const MoeGroupedArgs& a, cudaStream_t stream) {
  BigGrid g;
  if (!big_grid<kStage>(a, g)) return cudaErrorInvalidValue;
  if constexpr (kCl > 1) {
    g.items = cluster_items(g.items, g.row_blocks, kCl);
    const int64_t per_tile = (g.row_blocks + g.items - 1) / g.items;
    g.grid.x = unsigned((per_tile + kCl - 1) / kCl * kCl);
  }
  // ws_tile's 32-bit weight / scale offsets over a block's items.
  if (int64_t(g.items) * g.per_block * (g.L->cols / 2) > INT32_MAX ||
      int64_t(g.items) * g.per_block * g.L->scale_cols > INT32_MAX)
    return cudaErrorInvalidValue;
  static const cudaError_t attr = cudaFuncSetAttribute(moe_wgmma_ws_kernel<kStage, kCl>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, WsLayout::kSmem);
  if (attr != cudaSuccess) return attr;
  if constexpr (kCl == 1) {
    moe_wgmma_ws_kernel<kStage><<<g.grid, kWsThreads, WsLayout::kSmem, stream>>>(a, g.items);
  } else {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = g.grid;
    cfg.blockDim = dim3(kWsThreads);
    cfg.dynamicSmemBytes = WsLayout::kSmem;
    cfg.stream = stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = kCl;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    const cudaError_t e = cudaLaunchKernelEx(&cfg, moe_wgmma_ws_kernel<kStage, kCl>, a, g.items);
    if (e != cudaSuccess) return e;
  }
  return cudaGetLastError();
}

}  // namespace

bool moe_tc_wgmma_supported() {
  static const bool ok = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess)
      return false;
    return major == 9 && minor == 0;  // the binary's wgmma code is sm_90a only
  }();
  return ok;
}

cudaError_t moe_tc_wgmma(const MoeGroupedArgs& a, cudaStream_t stream) {
  if (a.max_tiles <= 0) return cudaSuccess;
  if (!moe_tc_eligible(a.w13, a.w2) || !a.experts || !a.xt || !a.tiles || !a.num_tiles || a.terms != 1 ||
      a.tile_rows != kMoeTcWgmmaRows || (a.stage == 1 && (!a.row_token || !a.ht)) || (a.stage == 2 && !a.y) ||
      (a.stage != 1 && a.stage != 2))
    return cudaErrorInvalidValue;
  if (!moe_tc_wgmma_supported()) return cudaErrorNotSupported;
  const MoeTcBig big = moe_tc_big();
  if (big == MoeTcBig::kWgmma)  // opt-in for A/B: the 4-stage ring, both warpgroups in step
    return a.stage == 1 ? launch_wgmma<1, RingShared>(a, stream) : launch_wgmma<2, RingShared>(a, stream);
  if (big == MoeTcBig::kWgmmaDeep)  // opt-in, measured slower (see WgRing)
    return a.stage == 1 ? launch_wgmma<1, RingDeep>(a, stream) : launch_wgmma<2, RingDeep>(a, stream);
  if (big == MoeTcBig::kWgmmaCl2)  // opt-in: clusters of 2 sharing the token chunks (NOTES 21: slower)
    return a.stage == 1 ? launch_wgmma_ws<1, 2>(a, stream) : launch_wgmma_ws<2, 2>(a, stream);
  if (big == MoeTcBig::kWgmmaCl4)
    return a.stage == 1 ? launch_wgmma_ws<1, 4>(a, stream) : launch_wgmma_ws<2, 4>(a, stream);
  // kWgmmaWs and kAuto: the warp-specialized kernel (run moepf2: 1.22-1.25x kWgmma at T =
  // 4096, 1.06x at 8192).
  return a.stage == 1 ? launch_wgmma_ws<1>(a, stream) : launch_wgmma_ws<2>(a, stream);
}

cudaError_t moe_split_perm(const float* x, uint16_t* out, int64_t count, int64_t dim, cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (!x || !out || dim <= 0 || dim % 128 != 0 || count % dim != 0 || reinterpret_cast<uintptr_t>(x) % 16 != 0 ||
      reinterpret_cast<uintptr_t>(out) % 4 != 0)
    return cudaErrorInvalidValue;
  const int64_t blocks = (count / 4 + 255) / 256;
  if (blocks > INT32_MAX) return cudaErrorInvalidValue;
  moe_split_perm_kernel<<<unsigned(blocks), 256, 0, stream>>>(x, out, count);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
