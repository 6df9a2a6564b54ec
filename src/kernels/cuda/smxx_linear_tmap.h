// The tensor-map gemv kernel's consumer variants (GemvKind::kTmap, smxx_linear_gemv_tmap.cu;
// bench/flash/NOTES.md 38), process-wide, for A/B measurements and tests. Kept out of
// smxx_linear.cuh so that only the kernel, flash_layers and the op tests depend on it.
#pragma once

#include <cstdint>

#include "kernels/cuda/smxx_linear.cuh"

namespace deepinfer::kernels {

// warps: consumer warps per CTA, 8 (the default, the measured kernel: two (m16 tile, box) units
// per warp and stage) or 16 (one unit each). f16: the f16 consumer (A from cvt e4m3x2 -> f16x2,
// x staged in f16 after a power-of-two shift per CTA, the block scale applied in fp32 per 32
// columns) instead of the exact-bf16 decode. Same split, ring and sum structure either way.
void gemv_set_tmap_consumer(int warps, bool f16);
// slim: the 16-warp f16 consumer with its per-stage overhead removed (scale factors decoded once per
// tile into a shared table, x's shift applied once per row, no division per stage; NOTES 41);
// overrides warps / f16 while set (16-column scale blocks: the 16-warp f16 consumer).
void gemv_set_tmap_slim(bool slim);
bool gemv_tmap_slim();
// A forced split for A/B measurements of the plan: tile rows tr (64 / 128 / 256) and cs CTAs per
// cluster (0: the plan picks cs); tr 0: the plan's own choice (the default). A split that cannot
// run the shape leaves the plan's own choice.
void gemv_set_tmap_force(int tr, int cs);
// GemvKind::kTmap takes only calls whose weight slice has at least this many bytes (0: every call
// it can take, the default); smaller ones run what kAuto runs (layers with tmap on the big weights only).
void gemv_set_tmap_min_bytes(int64_t bytes);
// kAuto's own use of the kernel (gemv_tmap_auto_takes, smxx_linear.cuh): on (the default) or off
// (kAuto as before run 34: kXs / the former kernel at one token), for the layers' A/B.
void gemv_set_tmap_auto(bool on);
// The slim kernel's start (kTmap): order 0 its producer issues the first weight copies at once; 1
// after the consumers have issued the first tile's scale-code loads; 2 after they have also issued
// x's loads (so neither waits behind the grid's first ring fill); 3 / 4 one / two stages at once, the
// rest as 2. dbg: timing diagnostics that give
// wrong results (bit 0 no scale codes, bit 1 x not staged; on 64- and 256-row tiles: bit 2 no decode,
// bit 3 no MMAs, bit 4 an integer decode); 0 outside benches.
void gemv_set_tmap_order(int order, int dbg = 0);
// kAuto's order (the same meaning; its default is in smxx_linear_gemv_tmap.cu) and its size floor
// (0: kGemvTmapAutoMinBytes), for the layers' A/B.
void gemv_set_tmap_auto_order(int order);
void gemv_set_tmap_auto_min_bytes(int64_t bytes);
// kAuto's whole-K 64-row tiles over several rounds where the plan would split K over clusters (the
// Engram wkv; on, the default) or only where they fit one round (off: the rule before NOTES 44).
void gemv_set_tmap_auto_rounds(bool on);
// kAuto's pairs (NOTES 47): two one-token bf16-x FP8 calls of one x through linear_gemv_multi
// (linear_multi: wq_a + wkv, the shared expert's w1 + w3) as one launch of the slim kernel
// (gemv_tmap_pair_takes, smxx_linear.cuh). mode 0 off (the bulk kernel, as before), 1 every pair it
// takes (the default since run 45), 2 only outside a concurrent branch (while this thread's bulk launches are not capped per
// SM: the model's branches cap them; A/B only: a model with branches then runs other kernels than one
// without), 3 pairs of at most kGemvTmapPairMaxBytes (the default in session 13's run 44); < 0: DEEPINFER_GEMV_PAIR or the
// default. For the layers' A/B.
void gemv_set_tmap_pair(int mode);
int gemv_tmap_pair_mode();
// The pair kernel's ring depth (stages; <= 0: 4) and a forced split (tr 64 / 128 / 256 and cs, 0:
// the plan's own over both weights' tiles), for A/B measurements and the bitwise tests.
void gemv_set_tmap_pair_config(int stages, int tr, int cs);
// The plan a pair runs under (tr 0: the pair kernel does not take it).
void gemv_tmap_pair_plan(const LinearArgs* calls, int* tr, int* cs, int* nclusters, int* stages);
// Whether kTmap runs its kernel for a call: linear_gemv_tmap_eligible and the size floor above.
bool gemv_tmap_wants(const LinearArgs& a);
// This host thread's launches of the tensor-map kernel use at most `ctas` CTAs where the plan
// has no cluster split (whole-K tiles: a CTA takes tiles cid, cid + grid, ..., so each tile's sum
// is the same whatever the grid; 0: the plan's grid, the default). The model sets it around the
// Engram wkv (engram_wkv_mode 1 / 2), so the wkv leaves SMs to layer 0 (NOTES 55).
void gemv_set_tmap_max_ctas(int ctas);
int gemv_tmap_max_ctas();
// The Engram branch's wkv at one-row decode steps (NOTES 49 item 6, NOTES 55): 0 at the step's
// start on the plan's grid (one CTA per SM); 1 / 2 there on at most a half / a quarter of the
// SMs (gemv_set_tmap_max_ctas); 3 forked after layer 0's first hc site, the plan's grid.
// DEEPINFER_ENGRAM_WKV=0..3 (invalid: the model refuses it at load) or engram_wkv_set_mode (-1:
// back to the environment), else kEngramWkvDefault; the model reads it per step. 1 since run 47's
// successor, run 48: three rounds in one process, 7 layers at batch 1 1.408 (0) / 1.396 (1) /
// 1.408 (2) / 1.412 (3) ms, every mode-1 sample below every other one (layer 0 runs beside the
// wkv on the SMs it leaves; the same bits: each tile is summed by one CTA whatever the grid).
constexpr int kEngramWkvDefault = 1;
void engram_wkv_set_mode(int mode);
int engram_wkv_mode();

}  // namespace deepinfer::kernels
