// Big tiles of the FP4 MoE under Activations::kBF16 on Hopper's warpgroup MMA (wgmma,
// sm_90a): moe_tc's tiles of up to kMoeTcWgmmaRows rows (one tile per expert at T = 8192
// for ~half the experts, smxx_moe.cuh), both stages (MoeTcBig::kWgmmaWsS, kAuto's from
// kMoeTcWgmmaMinTokens tokens).
//
// Why (bench/flash/NOTES.md "MoE wide tiles at prefill sizes"): the mma.sync wide kernel
// spends its time in turns: every warp decodes its FP4 rows, then every warp multiplies,
// because a warp's MMAs and its decode share one instruction stream and a barrier per
// chunk lines the warps up. wgmma is asynchronous: a warpgroup issues the 8 MMAs of a
// 128-column chunk and decodes the next chunk while the tensor cores run them, and the
// B operand (the tile's tokens) comes straight from shared memory instead of through
// registers (no LDS per MMA).
//
// Block: 2 consumer warpgroups (256 threads, one block per SM), 64 weight rows per
// warpgroup (stage 1: 32 outputs as w1 / w3 row pairs; stage 2: 64 w2 rows), all kN tokens
// of the tile (kN = its rows rounded up to 16, a template case per size), and a producer
// warpgroup (below). A thread decodes the same 2 x 32 codes per chunk as the mma.sync
// kernels (decode8, smxx_moe_decode.cuh): its registers are an mma.sync A fragment, which
// is exactly the RS-form wgmma A fragment of its warp's 16 rows. Per chunk, through a
// 4-stage ring: the tile's token rows (kN x 256 bytes, K-major in the 128-byte swizzle the
// descriptor reads) and each thread's own 2 x 16 weight bytes (read back by the thread that
// copied them); the scale words in a ring of their own (NOTES 42, see ws_tile).
// (Session 8 deleted the first form of these tiles, both warpgroups in step with a block
// barrier per chunk (MoeTcBig::kWgmma; kWgmmaDeep with a deeper weight ring, NOTES 14), and
// the clusters of 2 / 4 blocks sharing token chunks (kWgmmaCl2 / kWgmmaCl4, NOTES 21): all
// slower than the warp-specialized kernel below. Session 12 (NOTES 45) deleted the kinds
// measured slower than kWgmmaWsS: kWgmmaWs (the scale words per thread through L1, the former
// kAuto), the tiles of up to 160 / 144 rows (kWgmmaWsTall / TallEf / Tall144, NOTES 39), the
// evict-first weight copies (kWgmmaWsEf, Ef5, Ef55, EfOdd, EfL1, EfS, EfS5, EfSL1: NOTES 39,
// 40, 42), the 5-stage rings and the largest carve-out (NOTES 40, 42).)
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
// for bit (ops_cuda "wgmmawss_vs_default_differ" / "wide_vs_default_differ"; it holds when the
// k16 step rounds as mma.sync's).
#include <cuda_bf16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/smxx_device.h"
#include "kernels/cuda/smxx_moe.cuh"
#include "kernels/cuda/smxx_moe_decode.cuh"
#include "kernels/cuda/smxx_moe_terms.cuh"
#include "kernels/cuda/smxx_wgmma.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kWgThreads = 256;           // two (consumer) warpgroups
constexpr int kWBytes = kWgThreads * 32;           // a weight stage: every thread's 2 x 16 weight bytes
constexpr int kWgSmemMax = 227 * 1024;                      // dynamic shared memory per block on sm_90

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
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void cp_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

using moe_decode::decode8;
using moe_decode::scale_bf16x2;

// A thread's weights of one chunk as the big-tile kernel streams them: 16 bytes of each of
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

// ---- MoeTcBig::kWgmmaWsS (and kAuto): warp-specialized (helper moepf2, NOTES 18) ----
// Why: ncu on the first form (both warpgroups in step, deleted in session 8) at T = 8192
// (NOTES 14) had the tensor pipe active 26-28% of the cycles. After each chunk's 8 MMAs both
// warpgroups, in step because of the block barrier, decoded the last word, summed the chain,
// met at __syncthreads and issued the next chunk's token copies (LDS'd offsets, 64-bit
// arithmetic, divisions) while no MMA ran on the SM.
// Here a producer warpgroup (warps 8..11) issues every token copy and signals a per-stage
// "full" mbarrier as they land (cp.async.mbarrier.arrive.noinc); each consumer warpgroup waits on
// that barrier, runs its chunk's MMAs (word q of the next chunk decoded as steps 2 q and
// 2 q + 1 complete), and releases the stage on an "empty" mbarrier once its MMAs are done. No block-wide barrier: the warpgroups drift
// apart by up to the ring's depth, so one's decode / chain sum / epilogue runs under the
// other's MMAs. The weights and scale words stay per consumer thread (each thread copies
// and reads back its own bytes: cp.async.wait_group suffices, no cross-thread signal).
// Chunk, item and ring positions are counters (no per-chunk division), weight offsets
// 32-bit. The MMAs, their A registers, the token layout, the chains and the promotion
// (acc += chain per chunk, chunk order) were the first form's: bitwise the same output.
// Registers: a 9-warp block gets 168 per thread (3 warps on one SM sub-partition's 16K
// registers) and the N = 128 consumers spilled 2 KB; so the producer is a whole warpgroup
// (its copies spread over the 4 sub-partitions) that gives registers back (setmaxnreg 40)
// and the consumers take them (232: 40 + 2 x 232 warps of 32 = the sub-partition's 16K).
constexpr int kWsConsumers = 256;                   // two consumer warpgroups (warps 0..7)
constexpr int kWsThreads = kWsConsumers + 128;      // + the producer warpgroup (warps 8..11)
constexpr int kWsProducerRegs = 40, kWsConsumerRegs = 232;
static_assert(kWsProducerRegs + 2 * kWsConsumerRegs <= 512, "a sub-partition's 16K registers / 32 lanes");
// The ring (189 KB: the 196 KB carve-out, L1 ~60 KB): kXSt token stages of kMaxN =
// kMoeTcWgmmaRows tokens, kWSt weight stages (the weight bytes alone), and the scale words in a
// ring of their own (NOTES 42): kSR = kWSt + 1 slots of kSSlotBytes. NOTES 40 / 42 measured a 5th
// token stage (and weight stage) and the 228 KB carve-out (L1 28 KB): no faster (deleted).
constexpr int kSQuadBytes = 64;                           // a quad's 2 rows x 2 granules of 16 bytes
constexpr int kSSlotBytes = (kWgThreads / 4) * kSQuadBytes;  // a window's scale slot: 64 quads (4 KB)
struct WsLayout {
  static constexpr int kMaxN = kMoeTcWgmmaRows;     // a tile's tokens, at most
  static constexpr int kXSt = 4, kWSt = 4;          // token and weight stages
  static constexpr int kAtom = kMaxN * 128;         // a 64-column half of a staged chunk
  static constexpr int kX = 2 * kAtom;              // a token stage: kMaxN tokens x 128 columns
  static constexpr int kXo = (kMaxN / 16) * kWgThreads * 4;  // the token source offsets (one per 16-byte unit)
  static constexpr int kWBase = kXSt * kX;
  static constexpr int kWSlot = kWBytes;            // a weight stage
  static constexpr int kSR = kWSt + 1;              // scale ring slots
  static constexpr int kSBase = kWBase + kWSt * kWSlot;
  static constexpr int kXoBase = kSBase + kSR * kSSlotBytes;
  static constexpr int kBarBase = kXoBase + kXo;                // full[kXSt], empty[kXSt]
  static constexpr int kSmem = kBarBase + 2 * kXSt * 8 + 1024;  // + slack to align to 1024
  static_assert(kAtom % 1024 == 0 && kX % 1024 == 0, "swizzle atoms must stay 1024-byte aligned");
  static_assert(kMaxN % 16 == 0 && kMaxN <= 128, "one template case per 16 tokens, up to m64n128");
  static_assert(kSmem <= kWgSmemMax, "the ws ring must fit the block's shared memory");
  static_assert(kXo >= kMaxN * 16 * 4, "one token offset per 16-byte unit of a chunk");
  static_assert((kWSt & (kWSt - 1)) == 0, "the weight stage of a chunk is a mask");
};

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

// One tile, kN = its rows rounded up to 16 (tokens past the rows are zero in shared
// memory: computed, never stored), for `items` consecutive row blocks from rb0 (stage 1:
// 64 outputs, stage 2: 128 rows each). The row blocks run as one stream of items x chunks
// through the ring, so the next block's first chunks load and decode under the current
// one's last MMAs (no pipeline start-up per row block). sbase / sgen: the 1024-aligned
// ring (shared-window address / generic pointer).
template <int kStage, int kN>
__device__ __forceinline__ void ws_tile(const MoeGroupedArgs& a, const MoeTile& tile, int64_t rb0, int items,
                                        uint32_t sbase, uint8_t* sgen) {
  using S = WsLayout;
  constexpr int kAtomBytes = S::kAtom, kXBytes = S::kX, kXSt = S::kXSt, kWSt = S::kWSt;
  static_assert(kN <= S::kMaxN, "a tile's tokens fit its stage");
  constexpr int kD = kN / 2;          // accumulator registers per thread
  constexpr int kPerLane = kN / 8;    // a producer thread's 16-byte token copies per chunk (kN x 16 / 128)
  constexpr int kBlockRows = kStage == 1 ? 64 : 128;
  const WeightArgs& L = kStage == 1 ? a.w13 : a.w2;
  const MoeExpertPtrs& ex = a.experts[tile.expert];
  const int64_t K = L.cols, out_rows = L.rows;
  const int chunks = int(K / 128), total = items * chunks;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, c = lane & 3;
  const int rows = tile.rows;
  int32_t* const xo = reinterpret_cast<int32_t*>(sgen + S::kXoBase);
  const uint32_t full0 = sbase + S::kBarBase, empty0 = full0 + kXSt * 8;

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
    for (int i = tid; i < kXSt * per_stage; i += kWsThreads) {
      const int s = i / per_stage, u = i % per_stage, r = rows + (u >> 4), hf = (u >> 3) & 1, gr = u & 7;
      *reinterpret_cast<uint4*>(sgen + s * kXBytes + hf * kAtomBytes + r * 128 + gr * 16) = make_uint4(0, 0, 0, 0);
    }
  }
  if (tid == 0)
    for (int s = 0; s < kXSt; ++s) {
      mbar_init(full0 + 8 * s, 128);  // the producer's 128 threads (cp.async arrivals)
      mbar_init(empty0 + 8 * s, 8);  // lane 0 of each consumer warp
    }
  wgmma::fence_proxy_async();  // the zero rows, for the wgmma reads
  __syncthreads();  // xo, the zero rows, the barriers: the last block-wide barrier

  if (tid >= kWsConsumers) {
    // The producer: chunk gc's tokens into stage gc % kXSt once both warpgroups have
    // released chunk gc - kXSt. Thread pt copies units pt + 128 j (row (pt >> 4) + 8 j,
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
      if (gc >= kXSt) mbar_wait(empty0 + 8 * s, ph ^ 1);
      const uint32_t st = sbase + uint32_t(s) * kXBytes + dbase;
#pragma unroll
      for (int j = 0; j < kPerLane; ++j)
        if (xr[j] >= 0) cp_async16(st + uint32_t(1024 * j), xc + xr[j]);
      cp_arrive_noinc(full0 + 8 * s);
      if (++ch == chunks) ch = 0, xc = a.xt;
      else xc += 128;
      if (++s == kXSt) s = 0, ph ^= 1;
    }
    asm volatile("cp.async.wait_all;" ::: "memory");
    return;
  }

  // The consumers: their rows, weight pointers, scale words, decode and stores.
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
  // Where this thread's scale byte of a row sits in the 4-byte word it reads (bit 8 x (address & 3)).
  const uint32_t sha = uint32_t(reinterpret_cast<uintptr_t>(sa) & 3) * 8,
                 shb = uint32_t(reinterpret_cast<uintptr_t>(sb) & 3) * 8;
  const uint32_t wdst = uint32_t(tid * 16);
  // The scale words through a ring of their own (NOTES 42), one window of up to 4 chunks
  // per slot. A row's words of chunks 4 m .. 4 m + 3 of an item are 16 bytes at row + 16 m,
  // which span at most two aligned 16-byte granules: per window the quad's lane c copies
  // granule c & 1 of row a (c < 2) or b (c >= 2), with one cp.async.cg of 16 bytes, to
  // slot + quad x 64 + 16 c (lane 1 / 3 only where the window's bytes reach the second
  // granule: a copied granule always holds a byte of its row, so it lies in the scales'
  // allocation). Each thread then reads its byte c of chunk j at byte (row & 15) + c + 4 (j & 3)
  // of its row's 32 (the row's offset within a granule is the same for every window and item:
  // items step by 64 or 128 rows x scale_cols, a multiple of 16). Against a 4-byte .ca copy per
  // thread per chunk (the deleted kWgmmaWs): 1/16 of the copies, no L1 (bypass), the same bytes,
  // and no spill reloads left in the N = 128 loop (the two scale pointers are gone).
  const uint8_t* const srow_a = ex.s[kStage == 1 ? 0 : 2] + ra * L.scale_cols;
  const uint8_t* const srow_b = ex.s[kStage == 1 ? 1 : 2] + rb * L.scale_cols;
  const uint8_t* const srow = (c >> 1) ? srow_b : srow_a;
  const int loff = int(reinterpret_cast<uintptr_t>(srow) & 15);  // this lane's row within its granule
  const uint8_t* const sg0 = srow - loff + 16 * (c & 1);          // this lane's granule of window 0
  const int qd = warp * 8 + g;                                    // the quad (0..63)
  const uint32_t sqdst = uint32_t(qd * kSQuadBytes + 16 * c);
  const uint32_t ba = uint32_t(reinterpret_cast<uintptr_t>(srow_a) & 15) + uint32_t(c),
                 bb = uint32_t(reinterpret_cast<uintptr_t>(srow_b) & 15) + uint32_t(c);
  const uint32_t rda = uint32_t(qd * kSQuadBytes) + (ba & ~3u), rdb = uint32_t(qd * kSQuadBytes + 32) + (bb & ~3u);
  // Weight stage of chunk g (kWSt a power of two).
  auto wslot = [](int g) { return g & (kWSt - 1); };
  // The weight stream: the next chunk to copy (gw), its chunk in the item and its offsets.
  int gw = 0, wch = 0;
  uint32_t wo = 0, so = 0;
  int wsl = 0;  // the scale slot of the next window to copy
  // This thread's weight destination in chunk gw's stage, kept per thread and wrapped by a
  // per-thread compare. From wslot(gw) (uniform), ptxas 13.0 put the stage offset of the (deleted)
  // evict-first copies in the low word of the uniform register pair holding the cache-policy
  // descriptor, and those copies stopped with an illegal instruction from the second stage on
  // (NOTES 42's first call); the copies here carry no policy, but the per-thread destination is
  // the code measured (kWgmmaWsS, run 32).
  const uint32_t wfirst = sbase + uint32_t(S::kWBase) + wdst, wlast = wfirst + uint32_t((kWSt - 1) * S::kWSlot);
  uint32_t wcur = wfirst;
  auto stage_w = [&]() {
    if (gw < total) {
      const uint32_t st = wcur - wdst;
      wcur = wcur == wlast ? wfirst : wcur + uint32_t(S::kWSlot);
      cp_async16(st + wdst, wa + wo);
      cp_async16(st + wdst + kWBytes / 2, wb + wo);
      if ((wch & 3) == 0) {  // a window starts: its (up to) 4 chunks' scale words
        const int nwin = min(4, chunks - wch);
        if (!(c & 1) || loff + 4 * nwin > 16)
          cp_async16(sbase + uint32_t(S::kSBase + wsl * kSSlotBytes) + sqdst, sg0 + so);
        if (++wsl == S::kSR) wsl = 0;
      }
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
  // The scale words of the next chunk to read (chunk rc of its item) from the ring, after
  // this thread's cp.async wait and a __syncwarp (the quad's other lanes copied them). A slot is
  // rewritten kWSt + 1 windows later, at the earliest 2 iterations after its last read (windows
  // have >= 1 chunk; the copy of chunk g is issued in iteration g - kWSt): a __syncwarp between.
  int rc = 0, rsl = S::kSR - 1;
  auto ring_words = [&](uint32_t& wsa, uint32_t& wsb) {
    if ((rc & 3) == 0) rsl = rsl + 1 == S::kSR ? 0 : rsl + 1;
    const uint8_t* const p = sgen + S::kSBase + rsl * kSSlotBytes + 4 * (rc & 3);
    wsa = *reinterpret_cast<const uint32_t*>(p + rda);
    wsb = *reinterpret_cast<const uint32_t*>(p + rdb);
    if (++rc == chunks) rc = 0;
  };
  auto load_raw = [&](int gc) {
    const uint8_t* st = sgen + S::kWBase + wslot(gc) * S::kWSlot;
    uint32_t wsa, wsb;
    __syncwarp();  // the quad's scale granules (copied by its lanes 0..3)
    ring_words(wsa, wsb);
    return Raw{*reinterpret_cast<const uint4*>(st + wdst), *reinterpret_cast<const uint4*>(st + wdst + kWBytes / 2),
               scale_bf16x2(uint8_t(wsa >> sha)), scale_bf16x2(uint8_t(wsb >> shb))};
  };
  uint32_t A[8][4];
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

  // Weights of chunks 0 .. kWSt - 1 (one group each); chunk 0 decoded.
#pragma unroll 1
  for (int s = 0; s < kWSt; ++s) stage_w();
  cp_wait<kWSt - 1>();
  {
    const Raw r0 = load_raw(0);
#pragma unroll
    for (int q = 0; q < 4; ++q) decode_q(r0, q);
  }
  int s = 0, cch = 0, item = 0;
  uint32_t ph = 0;
#pragma unroll 1
  for (int gc = 0; gc < total; ++gc) {
    // Chunk gc's tokens have landed (every producer thread's copies).
    mbar_wait(full0 + 8 * s, ph);
    wgmma::fence_proxy_async();    // ... and are visible to this thread's wgmma (async proxy) reads
    const uint32_t xs = sbase + uint32_t(s) * kXBytes;
    wgmma::fence();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      wgmma::WgmmaRS<kN>::mma(tmp, A[j], wgmma::desc_k_sw128(xs + (j >> 2) * kAtomBytes + (j & 3) * 32), j);
      wgmma::commit();
    }
    // Weight stage s held chunk gc (read back in the previous iteration): chunk gc + kWSt.
    stage_w();
    const bool more = gc + 1 < total;
    // Chunk gc + 1's scales now, its weight words one q at a time (the first form held all 10
    // words of Raw across the 4 waits): fewer live registers under the 232 of setmaxnreg
    // (ptxas spills over the 8 tile heights: 316 -> 296 bytes in stage 2, 396 -> 376 in 1).
    const uint8_t* const wst = sgen + S::kWBase + wslot(gc + 1) * S::kWSlot;
    uint32_t sca = 0, scb = 0;
    if (more) {
      cp_wait<kWSt - 1>();  // chunk gc + 1's weights (this thread's own copies) have landed
      __syncwarp();         // ... and the quad's scale granules (copied by its lanes 0..3)
      uint32_t wsa, wsb;
      ring_words(wsa, wsb);
      sca = scale_bf16x2(uint8_t(wsa >> sha));
      scb = scale_bf16x2(uint8_t(wsb >> shb));
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
    if (lane == 0) mbar_arrive(empty0 + 8 * s);
#pragma unroll
    for (int i = 0; i < kD; ++i) wgmma::keep(tmp[i]);
#pragma unroll
    for (int i = 0; i < kD; ++i) acc[i] += tmp[i];
    if (++cch == chunks) {
      cch = 0;
      store(item++);
    }
    if (++s == kXSt) s = 0, ph ^= 1;
  }
}

// Grid (group of row blocks, tile): block x takes row blocks [x items, (x + 1) items) of
// tile y (the last group may be shorter); a tile's groups are neighbours in launch order, so
// its staged tokens are read from L2 by blocks running at the same time.
template <int kStage>
__global__ void __launch_bounds__(kWsThreads, 1) moe_wgmma_ws_kernel(MoeGroupedArgs a, int items) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) uint8_t wg_smem[];
  if (int64_t(blockIdx.y) >= *a.num_tiles) return;
  const MoeTile tile = a.tiles[blockIdx.y];
  const int64_t blocks = (kStage == 1 ? a.w13.rows / 64 : a.w2.rows / 128);
  const int64_t rb0 = int64_t(blockIdx.x) * items;
  const int n = int(max(int64_t(0), min(int64_t(items), blocks - rb0)));
  const uint32_t raw = smem_u32(wg_smem), pad = (1024u - raw % 1024u) % 1024u;
  uint8_t* const sgen = wg_smem + pad;
  const uint32_t sbase = raw + pad;
  switch ((tile.rows + 15) / 16) {
    case 1: ws_tile<kStage, 16>(a, tile, rb0, n, sbase, sgen); break;
    case 2: ws_tile<kStage, 32>(a, tile, rb0, n, sbase, sgen); break;
    case 3: ws_tile<kStage, 48>(a, tile, rb0, n, sbase, sgen); break;
    case 4: ws_tile<kStage, 64>(a, tile, rb0, n, sbase, sgen); break;
    case 5: ws_tile<kStage, 80>(a, tile, rb0, n, sbase, sgen); break;
    case 6: ws_tile<kStage, 96>(a, tile, rb0, n, sbase, sgen); break;
    case 7: ws_tile<kStage, 112>(a, tile, rb0, n, sbase, sgen); break;
    case 8: ws_tile<kStage, 128>(a, tile, rb0, n, sbase, sgen); break;
    // Tiles of up to 144 / 160 rows were the deleted tall kinds' (NOTES 39); the plan cuts at most
    // kMoeTcWgmmaRows, so these never run. They stay because the switch's shape sets ptxas' block
    // layout: without them the SASS of the eight tile bodies is the same arithmetic, but with
    // other instruction choices and order (NOTES 45); with them it is run 32's, bit for bit.
    case 9: __trap(); break;
    case 10: __trap(); break;
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

// The grid the big-tile kernel runs on (moe_wgmma_ws_kernel): row blocks of 64
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

template <int kStage>
cudaError_t launch_wgmma_ws(const MoeGroupedArgs& a, cudaStream_t stream) {
  using S = WsLayout;
  BigGrid g;
  if (!big_grid<kStage>(a, g)) return cudaErrorInvalidValue;
  // ws_tile's 32-bit weight / scale offsets over a block's items.
  if (int64_t(g.items) * g.per_block * (g.L->cols / 2) > INT32_MAX ||
      int64_t(g.items) * g.per_block * g.L->scale_cols > INT32_MAX)
    return cudaErrorInvalidValue;
  constexpr auto kernel = moe_wgmma_ws_kernel<kStage>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmem);
  if (attr != cudaSuccess) return attr;
  kernel<<<g.grid, kWsThreads, S::kSmem, stream>>>(a, g.items);
  return cudaGetLastError();
}

}  // namespace

bool moe_tc_wgmma_supported() { return device_runs_sm90a(); }  // the binary's wgmma code is sm_90a only

cudaError_t moe_tc_wgmma(const MoeGroupedArgs& a, cudaStream_t stream) {
  if (a.max_tiles <= 0) return cudaSuccess;
  if (!moe_tc_eligible(a.w13, a.w2) || !a.experts || !a.xt || !a.tiles || !a.num_tiles || a.terms != 1 ||
      a.tile_rows != kMoeTcWgmmaRows || (a.stage == 1 && (!a.row_token || !a.ht)) || (a.stage == 2 && !a.y) ||
      (a.stage != 1 && a.stage != 2))
    return cudaErrorInvalidValue;
  if (!moe_tc_wgmma_supported()) return cudaErrorNotSupported;
  // The warp-specialized kernel with the scale ring (kWgmmaWsS, kAuto's from kMoeTcWgmmaMinTokens;
  // run 32: 5.59 / 6.62 / 10.99 ms at T = 2048 / 4096 / 8192, NOTES 42).
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
