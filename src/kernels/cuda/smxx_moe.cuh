// Mixture-of-experts kernels (MODEL_V41.md §6):
//   router_logits  logits[t, e] = x[t] . gate[e], accumulated in double. The router
//                  is tiny (384 x 5120 per token) and its top-k is a discrete choice:
//                  double sums make the logits round to the same fp32 values as the
//                  CPU oracle's, so expert choices agree exactly, ties included.
//                  Unscaled F32 / BF16 / F16 gates stream 16-byte vectors (a warp per
//                  expert row, eight tokens per weight load); others go element-wise.
//   router_select  s = sqrt(softplus(logit / temp)), top_k of s + bias (ties to the
//                  lower expert id), weights = s at the chosen experts, normalized
//                  and scaled. One warp per token.
//   swiglu_act     h = route_weight * silu(min(g, L)) * clamp(u, -L, L), in place on g.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <climits>

#include "kernels/cuda/smxx_types.h"

namespace deepinfer::kernels {

struct RouterLogitsArgs {
  const float* x = nullptr;  // [n, gate.cols]
  int64_t n = 0;
  WeightArgs gate;           // [num_experts, dim]
  float* logits = nullptr;   // [n, num_experts]
};
cudaError_t router_logits(const RouterLogitsArgs& a, cudaStream_t stream);
// Which kernel computes the logits of the vector gates (unscaled F32 / BF16 / F16):
//   kVec   one expert row per warp, lane-strided DFMA chains, warp tree;
//   kWide  four expert rows per warp (x converted to double once per four rows): the
//          kVec logits bit for bit (ops case router_logits_wide_*);
//   kDmma  FP64 tensor cores, gates with cols % 128 == 0 (smxx_moe.cu states the order);
//          its own fixed order for every n, so within one path logits never depend on the
//          batch; against kVec at most one f32 ulp apart (ops cases router_logits_dmma_*).
// A process-wide setting (like the other path switches) so that every call of a run, and
// every batch size, takes the same path. Default kDmma (faster at every n measured; the
// others stay for A/B and as the fallback for gates DMMA does not take).
//   kDmmaDeep  (default) kDmma's kernel and order (bitwise kDmma), with ten 32-channel
//          groups in flight per warp instead of four at n <= 8 (NOTES 28: 14.2 -> 11.4 us per
//          call at n = 1; what is left is the warp's 320-DMMA chain); kDmma above 8 tokens.
//   kDmmaSplit  (opt-in, NOTES 48) its own fixed order, K in 16 pieces instead of 4 (a
//          4x shorter dependent DMMA chain per warp; 16 warps per 8 x 8 tile up to 64
//          tokens): other low bits than kDmma, the same for every n (batch-invariant), at
//          most one f32 ulp from kVec (ops cases router_logits_split_*); gates with
//          cols % 512 != 0 take kDmma.
enum class RouterLogitsPath : uint8_t { kVec, kWide, kDmma, kDmmaDeep, kDmmaSplit };
void router_logits_set_path(RouterLogitsPath p);
RouterLogitsPath router_logits_path();

struct RouterSelectArgs {
  const float* logits = nullptr;  // [n, num_experts]
  const float* bias = nullptr;    // [num_experts] or null
  int64_t n = 0, num_experts = 0, top_k = 1;  // top_k <= num_experts <= 4096
  float temp = 1.0f;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.0f;
  int64_t* expert_ids = nullptr;    // [n, top_k]
  float* expert_weights = nullptr;  // [n, top_k]
};
cudaError_t router_select(const RouterSelectArgs& a, cudaStream_t stream);

struct SwigluActArgs {
  float* gate = nullptr;        // [n, inter], overwritten with the activation
  const float* up = nullptr;    // [n, inter]
  const float* route_weight = nullptr;  // [n] or null
  int64_t n = 0, inter = 0;
  float limit = 10.0f;          // <= 0: no clamps
};
cudaError_t swiglu_act(const SwigluActArgs& a, cudaStream_t stream);

// ---------------------------------------------------------------------------
// Device-routed grouped MoE (moe_experts): no host round trip between the router and
// the combine, a fixed number of launches per step whatever the routing.
//
//   moe_plan     from expert_ids [n, k]: counts [E], offsets [E + 1], the permuted
//                row list (row p of expert e's run is its (token, slot) pairs in
//                ascending (token, slot) order, i.e. the CPU's row order), the slot
//                -> row map, and the tile lists of the grouped GEMMs. Three small
//                kernels (chunk histograms, a one-block scan, placement); no atomic
//                whose order reaches a result.
//   moe_gemv     stage 1 (w1 / w3 with SwiGLU and the route weight fused) or stage 2
//                (w2) over "small" tiles of <= 8 rows of one expert (<= min(n, 8)): the gemv of
//                linear generalised to a tile list. A row's sums run in the same order
//                whatever tile it sits in, so its bits do not depend on the batch.
//   moe_mma      the same stages over "big" tiles of <= 64 rows (experts with more
//                than big_threshold rows; default mode only): linear's 3-term bf16
//                tensor-core block; stage 1 writes gate and up, moe_act finishes them.
//   moe_tc       both stages over either tile list for e2m1 experts with 1x32 ue8m0
//                scales (the released format): mma.sync on bf16 planes of x / h
//                (smxx_moe_tc.cu); it replaces moe_gemv for them, and moe_mma too
//                under Activations::kBF16 (the exact mode keeps moe_mma's big tiles).
//   moe_combine  out[t] = 0 + y[rows of t's slots in ascending expert id] (+ residual).
//
// Tile = {expert, first permuted row, rows}. Grids are sized on the host from upper
// bounds of the tile counts; blocks past the device-side count exit.
// ---------------------------------------------------------------------------

struct MoeTile {
  int32_t expert, row0, rows, pad;
};

// One expert's weights in the grouped table (device memory).
struct MoeExpertPtrs {
  const uint8_t* w[3];  // w1, w3, w2 data
  const uint8_t* s[3];  // their scales (null when unscaled)
};

constexpr int kMoeSmallRows = 8;  // rows per gemv tile (the gemv kernel's token count)
constexpr int kMoeBigRows = 64;   // rows per mma tile (its token tile)
// Rows per big tile of the wide moe_tc kernel (kBF16): at T = 4096 x top-6 over 384
// experts an expert gets 64 +- 8 rows, so 64-row tiles split half the experts into a
// full tile + a few-row tail that streams and decodes the whole expert again; 80 rows
// leave ~2% of them split (NOTES "MoE wide tiles").
constexpr int kMoeTcWideRows = 80;
// Rows per big tile of the wgmma kernel (kBF16, MoeTcBig::kWgmmaWsS, smxx_moe_wgmma.cu): the
// largest tile whose two fp32 accumulator sets (the chain of a chunk and the sum) fit a
// thread's registers next to two chunks of A fragments: at T = 8192 an expert gets
// 128 +- 11 rows, so about half the experts are one tile. (Tiles of up to 160 / 144 rows,
// one per expert at T = 8192, were slower: NOTES 39, deleted in session 12.)
constexpr int kMoeTcWgmmaRows = 128;
// MoeTcBig::kAuto takes the wgmma tiles with the scale ring (kWgmmaWsS) from this many tokens
// per call, the wide kernel below (all give the same bits, so the choice by T changes no
// result). Measured (run moepf, op moe_grouped): wide faster at T = 1024 (5.20 vs kWgmma's 6.02
// ms), wgmma at T = 4096 (8.26 vs 10.09) and 8192. kWgmmaWsS against the former kAuto (run
// 32 = the lead's run of moea's run2, ms): T = 2048 5.59 vs kWgmmaWs 5.65, 4096 6.62 vs 6.69,
// 8192 10.99 vs kWgmmaWsEf 12.88 (torch._grouped_mm 8.19 / 8.16 / 12.24): the scale words'
// ring removes the N = 128 loop's spill reloads and per-thread scale copies (NOTES 42), and
// without them evict-first no longer pays at 8192 (kWgmmaWsEfS 11.33). kWgmmaWs and the Ef kinds
// were deleted in session 12 (NOTES 45).
constexpr int64_t kMoeTcWgmmaMinTokens = 2048;

struct MoePlanArgs {
  const int64_t* expert_ids = nullptr;    // [n, k]
  const float* expert_weights = nullptr;  // [n, k]
  int32_t n = 0, k = 0, num_experts = 0;
  int32_t big_threshold = INT32_MAX;  // experts with more rows than this use big tiles
  int32_t small_rows = kMoeSmallRows;  // small-tile height: 1, 2, 4 or 8 (moe_small_tile_rows)
  int32_t big_rows = kMoeBigRows;      // big-tile height: kMoeBigRows, kMoeTcWideRows or kMoeTcWgmmaRows
  // Outputs / scratch (device):
  int32_t* counts = nullptr;      // [E]
  int32_t* offsets = nullptr;     // [E + 1]
  int32_t* chunk_base = nullptr;  // [ceil(n k / 256), E]
  int32_t* row_token = nullptr;   // [n k] permuted row -> token
  float* row_weight = nullptr;    // [n k] permuted row -> route weight
  int32_t* slot_row = nullptr;    // [n k] (token, slot) -> permuted row, -1 for a bad id
  MoeTile* small_tiles = nullptr;  // [moe_small_tile_bound]
  MoeTile* big_tiles = nullptr;    // [moe_big_tile_bound] (may be null when big_threshold = INT32_MAX)
  int32_t* num_tiles = nullptr;    // [2]: small, big
  // Optional (moe_tc_fused): sync_count int32 counters the scan kernel zeroes (the
  // fused kernel's ticket and per-tile done counts), and x split into bf16 planes by
  // the histogram launch (moe_split_terms folded in: one launch fewer). Null: skipped.
  int32_t* sync = nullptr;
  int64_t sync_count = 0;
  const float* split_x = nullptr;  // [split_count] fp32, 16-byte aligned
  uint16_t* split_out = nullptr;   // split_terms planes of split_count
  int64_t split_count = 0;         // % 4 == 0
  int split_terms = 1;
  // Optional: the router's selection (router_select) folded into the plan (logits set).
  // Its expert_ids / expert_weights must be this plan's; n, top_k and num_experts the
  // same. Where the one-launch plan runs and n <= 32 (moe_plan_select() on), block 0
  // selects each token's experts first, with router_select's arithmetic, then plans:
  // one launch for select + plan. Otherwise moe_plan launches router_select itself
  // first. Either way the ids, weights and plan are bitwise router_select's + the plan's.
  RouterSelectArgs select;
};
int64_t moe_plan_chunks(int64_t assignments);
// Small-tile height for a batch of n tokens (an expert has at most n rows when a
// token's ids are distinct; more rows just take more tiles).
int64_t moe_small_tile_rows(int64_t n);
int64_t moe_small_tile_bound(int64_t assignments, int64_t num_experts, int64_t tile_rows);
int64_t moe_big_tile_bound(int64_t assignments, int64_t num_experts);
cudaError_t moe_plan(const MoePlanArgs& a, cudaStream_t stream);
// Batches of at most this many assignments (<= kMoePlanOneMax) run the plan (and the
// folded split) as one launch instead of three, with the same outputs (tested bitwise
// through the op); 0: never. Default 64: the one launch measured faster at 6 and 48
// assignments (T = 1 / 8 x top-6, kBF16 -6% / -2% of the op) and slower at 768 (T = 128,
// +1-2%: each assignment counts its earlier equals, O(n^2) in one block; bench/results/
// 2026-11-30-moe-decode.md). A process-wide setting for A/B tests and benchmarks.
constexpr int kMoePlanOneMax = 1024;
void moe_plan_set_single_launch_max(int assignments);
int moe_plan_single_launch_max();
// MoePlanArgs::select folded into the one-launch plan where it fits (default on); off:
// router_select runs as its own launch before the plan (the same bits; for A/B tests).
void moe_plan_set_select(bool on);
bool moe_plan_select();
// The one-launch plan as moe_plan_fast_kernel (num_experts <= 1024): one expert per thread,
// the three scans as warp shuffles (2 block barriers instead of ~70); the same outputs
// bit for bit (ops cases moe_route_experts_*: new_kernels_differ). Default on (NOTES 28:
// 13.9 -> 10.2 us per call at batch 1 with the selection); off: moe_plan_one_kernel.
void moe_plan_set_fast(bool on);
// The lean one-launch plan (NOTES 48; default on since session 13: the same outputs, the route
// op at T = 1 -5 us; with moe_plan_fast and the fused selection, E <= 384, top_k <= 32): the
// top-k picks as register keys with warp reductions, the plan's ids / weights from shared
// memory, the launch with PDL after the router. Off: moe_plan_fast_kernel as before (A/B).
void moe_plan_set_lean(bool on);
bool moe_plan_lean();
bool moe_plan_fast();

struct MoeGroupedArgs {
  const MoeExpertPtrs* experts = nullptr;  // [E] device table
  WeightArgs w13;  // layout of every w1 / w3 [inter, dim] (data / scale ignored)
  WeightArgs w2;   // layout of every w2 [dim, inter]
  int stage = 1;   // 1: x -> h (w1, w3, SwiGLU); 2: h -> y (w2)
  const float* x = nullptr;          // stage 1: tokens [n, dim]; stage 2: h [n k, inter]
  const int32_t* row_token = nullptr;  // stage 1: permuted row -> token of x
  const float* row_weight = nullptr;   // stage 1: route weight per permuted row
  float* y = nullptr;    // stage 1: h [n k, inter]; stage 2: y [n k, dim]
  float* up = nullptr;   // mma stage 1 only: w3 . x [n k, inter] (moe_act consumes it)
  float limit = 10.0f;   // SwiGLU clamp (<= 0: none)
  const MoeTile* tiles = nullptr;
  const int32_t* num_tiles = nullptr;  // device count of valid tiles
  int64_t max_tiles = 0;               // host bound: the grid size
  int tile_rows = kMoeSmallRows;       // gemv: the plan's small_rows; moe_tc: that or kMoeBigRows
  bool round_h = false;  // gemv stage 1 / moe_act: h rounded to bf16 (Activations::kBF16)
  // moe_tc only: the B operand as bf16 planes (terms = 1: bf16 x; 3: hi, mid, lo = x),
  // plane p at xt + p * xt_plane; stage 1 writes h the same way into ht.
  const uint16_t* xt = nullptr;
  int64_t xt_plane = 0;
  uint16_t* ht = nullptr;
  int64_t ht_plane = 0;
  int terms = 3;
  // moe_tc, tiles of <= 8 rows: the MoeTcSmall kernel (as int; the op sets it from
  // moe_tc_small_for), -1: moe_tc_small() resolved for this tile height alone.
  int small_kernel = -1;
};
// Whether the grouped kernels take this expert layout (format, vector alignment,
// power-of-two scale blocks).
bool moe_gemv_eligible(const WeightArgs& layout);
bool moe_mma_eligible(const WeightArgs& layout);
cudaError_t moe_gemv(const MoeGroupedArgs& a, cudaStream_t stream);
cudaError_t moe_mma(const MoeGroupedArgs& a, cudaStream_t stream);
// h = route_weight * silu(min(h, L)) * clamp(up, -L, L) on the rows of the big tiles.
cudaError_t moe_act(const MoeGroupedArgs& a, cudaStream_t stream);

// Tensor-core FP4 tiles (smxx_moe_tc.cu): e2m1 experts with 1x32 ue8m0 scales, K a
// multiple of 128, inter a multiple of 8 and dim of 16. Stage 1 reads xt (the tokens'
// planes, rows by row_token) and writes h planes into ht; stage 2 reads xt = those
// planes and writes y (fp32). tile_rows <= 8: the small-tile list; the big tiles:
// kMoeBigRows (terms = 3), kMoeTcWideRows or kMoeTcWgmmaRows (terms = 1, MoeTcBig below).
bool moe_tc_eligible(const WeightArgs& w13, const WeightArgs& w2);
cudaError_t moe_tc(const MoeGroupedArgs& a, cudaStream_t stream);
// Which kernel takes the big tiles under kBF16 (terms = 1), a process-wide switch for
// benchmarks and tests, read by the op when it plans the tiles. Results are bitwise the same
// (same MMAs, same order; tested):
//   kWide      tiles of kMoeTcWideRows, 256 weight rows per block (16 warps x 16 rows),
//              activations and weights staged through a 3-deep cp.async ring (smxx_moe_tc.cu);
//   kWgmmaWsS  (sm_90a, moe_tc_wgmma_supported) tiles of kMoeTcWgmmaRows on warpgroup MMAs,
//              warp-specialized (smxx_moe_wgmma.cu; helper moepf2, NOTES 18): a producer
//              warpgroup issues the token copies and signals per-stage mbarriers, the two MMA
//              warpgroups run without a block-wide barrier; the scale words come through a
//              shared-memory ring of their own (helper moea, NOTES 42). Stage 1 reads x from
//              moe_split_perm's planes and writes h in the same permuted column order, which
//              its stage 2 reads; elsewhere the op takes kWide instead. Run 32 (op moe_grouped
//              bf16): T = 2048 / 4096 / 8192 5.59 / 6.62 / 10.99 ms;
//   kAuto      (default) kWgmmaWsS from kMoeTcWgmmaMinTokens tokens per call (where supported),
//              kWide below (all the same bits).
// Deleted in session 8 (never taken by kAuto, measured slower, nothing built on them):
// kRows64 (64-row tiles, 8 warps: 16.0 vs kWide's 10.1 ms at T = 4096, run 11), kWide2 (8
// warps x 32 rows: 10.0-10.1) and kWide128 (128 rows per block: 11.6) (NOTES "MoE wide
// tiles"); kWgmma (the wgmma tiles with both warpgroups in step: 8.26 vs kWgmmaWs's 6.66-6.78
// ms at T = 4096) and kWgmmaDeep (its deeper weight ring, 7-10% slower still; NOTES 14, 18);
// kWgmmaCl2 / kWgmmaCl4 (kWgmmaWs as clusters of 2 / 4 blocks forwarding token chunks:
// T = 8192 20.48 / 28.94 vs 14.29 ms; NOTES 21).
// Deleted in session 12 (NOTES 45; measured slower than kWgmmaWsS in run 32 / NOTES 39, 40, 42,
// nothing built on them), ms at T = 2048 / 4096 / 8192:
//   kWgmmaWs (kWgmmaWsS with each thread's scale words through L1, kAuto's from 2048 tokens until
//   run 32) 5.65 / 6.69 / 14.37; the tiles of up to 160 / 144 rows, kWgmmaWsTall / TallEf /
//   Tall144 (NOTES 39) 5.81 / 7.08 / 15.00, 5.81 / 7.04 / 13.78, 5.74 / 7.02 / 14.06; the
//   evict-first weight copies, kWgmmaWsEf 5.64 / 6.81 / 12.89 (kAuto's from 8192 tokens until run
//   32) with a 5-stage token ring (Ef5), 5 + 5 stages (Ef55), the policy on odd chunks only (EfOdd)
//   or the 228 KB carve-out (EfL1) (NOTES 40: 13.3 / 13.3 / 12.9 / 13.3 at 8192); and with the
//   scale ring, kWgmmaWsEfS / EfS5 / EfSL1 (NOTES 42) 5.56 / 6.82 / 11.33, 5.58 / 6.91 / 11.31,
//   5.57 / 6.64 / 11.16.
enum class MoeTcBig { kWide, kWgmmaWsS, kAuto };
void moe_tc_set_big(MoeTcBig k);
MoeTcBig moe_tc_big();
bool moe_tc_wgmma_supported();  // the current device runs the sm_90a wgmma code
// The kWgmmaWsS tiles of one stage (moe_tc routes tile_rows == kMoeTcWgmmaRows here).
cudaError_t moe_tc_wgmma(const MoeGroupedArgs& a, cudaStream_t stream);
// x [count] fp32 (rows of dim, dim % 128 == 0) -> one bf16 plane (round to nearest even)
// with each 128-column chunk in the wgmma kernel's k order (smxx_moe_wgmma.cu).
cudaError_t moe_split_perm(const float* x, uint16_t* out, int64_t count, int64_t dim, cudaStream_t stream);
// Both stages of the small tiles (<= 8 rows) in one persistent launch (moe_tc_fused):
// blocks take work items (stage 1 items of every tile, then stage 2 items) from a ticket
// counter, and a stage 2 item waits on its tile's count of finished stage 1 items; the
// same per-output MMAs, K split and slice order as moe_tc, so bitwise the same output.
// s1 / s2: the stage 1 / stage 2 arguments of the same small-tile list (as for moe_tc);
// sync: moe_tc_fused_sync_count(s1.max_tiles) int32, zero on entry (the plan zeroes it).
// Returns cudaErrorNotSupported where it does not apply (the caller runs moe_tc twice).
int64_t moe_tc_fused_sync_count(int64_t max_tiles);
cudaError_t moe_tc_fused(const MoeGroupedArgs& s1, const MoeGroupedArgs& s2, int32_t* sync, cudaStream_t stream);
// Which kernel takes the small tiles (<= 8 rows), a process-wide switch for A/B tests and
// benchmarks, read by the op and by moe_tc. All give bitwise the same output (the same
// MMAs per output, K split and slice order; tested):
//   kFormer  moe_tc_kernel, one launch per stage after a split launch;
//   kFused   moe_tc_fused (both stages in one persistent launch, the split in the plan);
//   kLean4 / kLean8  moe_tc_lean_kernel with a 4- / 8-chunk cp.async weight ring per
//            warp, one launch per stage, the split in the plan's histogram launch
//            (NOTES "MoE decode tiles: fewer instructions per weight byte");
//   kLean4T  kLean4 with the scale folded into per-row lookup tables (fewer multiplies,
//            more PRMT: tells whether issue slots or the ALU pipe bind);
//   kAuto    (default) the one measured fastest for the batch (moe_tc_small_for).
// Deleted in session 8 (measured no faster, nothing built on them): kLean4P (two MMA chains
// per warp, NOTES 20), kLean4L (an L2 prefetch hint, NOTES 20 / 28), kLeanW2 / kLeanW4 (row
// pieces of 128 / 256 bytes, NOTES 28), and the combine folded into the lean stage 2 (NOTES 28).
enum class MoeTcSmall { kFormer, kFused, kLean4, kLean8, kLean4T, kAuto };
void moe_tc_set_small(MoeTcSmall k);
MoeTcSmall moe_tc_small();
// moe_tc_small() for a batch of n tokens; kAuto resolves as measured on the H200 at the
// V4.1 shapes (bench/results/2026-11-30-moe-decode.md):
// kBF16: kLean4 for n <= 256 (-7..-16% of the op at T = 1..256) and in kInvariant mode at
// every n (-5..-10% at T = 1024 / 4096), else kFormer (kAuto at T >= 1024: +1..5% with
// kLean4, likely its empty blocks of the small-tile bound, costlier to start); kF32: kLean4 for n <= 8
// (-2..-4%), else kFormer (kLean4 +3..8% at T >= 128: kF32 is L1-bound on the B loads and
// the ring adds shared-memory traffic to the same pipe). Others are returned as they are.
MoeTcSmall moe_tc_small_for(int64_t n, bool bf16, bool invariant);
// Under Activations::kF32 the big tiles of e2m1 experts run linear's 3-term mma block on
// fp32 h (moe_mma + moe_act: two launches more, and ~0.5 ms at T = 256 for the ~8 experts
// with 9+ rows, run 12); experts with at most this many rows stay on the small tiles
// (ceil(rows / 8) tiles each). Default 32: measured kF32 kAuto T = 256 6.24 -> 5.71 ms
// and T = 1024 22.5 -> 16.0 ms (experts of ~16 rows: two small tiles beat one 3-term block);
// 8 = the former behaviour. A process-wide setting, read by the op; kBF16 ignores it.
void moe_tc_set_f32_big_threshold(int rows);
int moe_tc_f32_big_threshold();
// The lean kernels' stage 2 launched as a programmatic dependent launch: its blocks start
// while stage 1's last wave drains, fill their weight ring, then wait for stage 1 (griddepcontrol)
// before reading h. Off by default (opt-in; NOTES "MoE decode tiles").
void moe_tc_set_pdl(bool on);
bool moe_tc_pdl();
// x [count] fp32 -> terms (1 or 3) bf16 planes of count elements (count % 4 == 0).
cudaError_t moe_split_terms(const float* x, uint16_t* out, int64_t count, int terms, cudaStream_t stream);
// out = bf16-rounded x (fp32 storage), for the SIMT paths under Activations::kBF16.
cudaError_t moe_round_bf16(const float* x, float* out, int64_t count, cudaStream_t stream);

struct MoeCombineArgs {
  const float* y = nullptr;  // [n k, dim] permuted expert outputs
  const int64_t* expert_ids = nullptr;  // [n, k]
  const int32_t* slot_row = nullptr;    // [n, k]
  const float* residual = nullptr;      // [n, dim] or null
  float* out = nullptr;                 // [n, dim]
  int32_t n = 0, k = 0, dim = 0;
};
cudaError_t moe_combine(const MoeCombineArgs& a, cudaStream_t stream);

}  // namespace deepinfer::kernels
