// Manifold-constrained hyper-connection kernels (MODEL_V41.md §2.3-2.4): the per-token
// mixes (RMS-normalized projection, sigmoid gates, Sinkhorn-projected stream mixing)
// and the collapse / expand of the hc residual streams. fp32 throughout.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

constexpr int kMaxHc = 4;  // V4.1 uses 4 streams; register arrays are sized for it

struct HcMixesArgs {
  const float* h = nullptr;      // [n, hc * dim]
  const float* fn = nullptr;     // [(2 + hc) * hc, hc * dim]
  const float* base = nullptr;   // [(2 + hc) * hc]
  const float* scale = nullptr;  // [3]
  int64_t n = 0, hc = 4, dim = 0;  // 1 <= hc <= kMaxHc
  float norm_eps = 1e-20f, hc_eps = 1e-6f;
  int64_t sinkhorn_iters = 20;
  float* pre = nullptr;   // [n, hc]
  float* post = nullptr;  // [n, hc]
  float* comb = nullptr;  // [n, hc, hc]
  float* workspace = nullptr;  // [n, hc_mixes_splits(hc, dim), kMaxMixes + 1] partial sums
  // Partial-sum kernel: 0 = pick (rows from 256 tokens where it fits, else tiled where a
  // split fits one block's columns), 1 = one block per (split, token), 2 = tiled, 3 = rows
  // (hc = 4 and splits of exactly 128 columns, V4.1's shape; 2 and 3 return
  // cudaErrorInvalidValue where they cannot run). All give the same bits; 1-3 exist for
  // the A/B test.
  int variant = 0;
  // The finish (gates + Sinkhorn) of a token: 0 = one warp, lane (j, k) holding comb[j][k]
  // (row / column sums gathered by shuffles in the serial order), 1 = one thread (the
  // former code: at batch 1 its 20 iterations of 32 dependent IEEE divisions took ~33 us).
  // Same operations in the same order: the same bits; 1 exists for the A/B test.
  int finish_variant = 0;
  // [n] counters, zero before the call and left zero after it (or null). With them,
  // hc_[expand_]mixes_collapse_norm runs in ONE launch where the tiled partial sums run
  // one token per block (n <= 8, dim <= kOneLaunchMaxDim, cn over m's state): each
  // block also collapses its columns, and the last split block of a token (a completion
  // counter) normalizes the row and finishes the mixes, with the separate kernels'
  // arithmetic in their order (bitwise the two launches). Null: the two launches.
  unsigned* counters = nullptr;
  // The one-launch site only (hc_site_one_launch_applies): its last block normalizes the row
  // but leaves the mixes' finish (gates + Sinkhorn, ~3 us of one warp's dependent chain at the
  // end of the grid, which the gemv after the site waits for) to hc_mixes_finish, which the
  // caller launches after the site -- on a concurrent stream, since pre / post / comb are read
  // only at the next site (NOTES 51). The caller must keep workspace untouched until then.
  bool defer_finish = false;
  // The wide one-launch site (hc_site_mode 2 / 3, NOTES 55), honoured only with defer_finish where
  // the one-launch site applies: a block of 4 warps per 32 columns (a column warp of the 512-thread
  // block's split: 160 blocks at V4.1 instead of 40, a quarter of fn's bytes per SM) whose warp sums
  // go to workspace per column warp, [n][splits][kWideCw][kMaxMix + 1]; hc_mixes_finish (given the
  // same flag) adds a split's four in column-warp order from 0 as the 512-thread block does, so
  // pre / post / comb, h and x are bitwise the same. `pdl`: launched as a programmatic dependent
  // of the kernel before it; fn (a weight) is requested before griddepcontrol.wait.
  bool wide = false;
  bool pdl = false;
};
constexpr int kMaxMixes = (2 + kMaxHc) * kMaxHc;
// Splits of the hc * dim reduction: ~512 elements each, at most 64 (fixed by the shape
// alone, so results do not depend on the batch). 512 rather than 2048: at batch 1 the
// 2 MB of fn then streams through 40 SMs instead of 10 (V4.1: 20480 -> 40 splits).
inline int64_t hc_mixes_splits(int64_t hc, int64_t dim) {
  const int64_t s = (hc * dim + 511) / 512;
  return s < 1 ? 1 : (s > 64 ? 64 : s);
}
// Column warps (32 columns) per split in the wide site's workspace layout (HcMixesArgs::wide).
constexpr int kWideCw = 4;
// Floats of HcMixesArgs::workspace for n tokens, enough for every layout (the wide site's).
inline int64_t hc_mixes_workspace_floats(int64_t n, int64_t hc, int64_t dim) {
  return n * hc_mixes_splits(hc, dim) * kWideCw * (kMaxMixes + 1);
}
cudaError_t hc_mixes(const HcMixesArgs& a, cudaStream_t stream);
// The finish alone (what hc_mixes runs after its partial sums): pre / post / comb of every
// token from the split sums in a.workspace, in hc_mixes' order and arithmetic (bitwise the
// one-launch site's own finish). For HcMixesArgs::defer_finish.
cudaError_t hc_mixes_finish(const HcMixesArgs& a, cudaStream_t stream);

struct HcCollapseArgs {
  const float* h = nullptr;    // [n, hc, dim]
  const float* pre = nullptr;  // [n, hc]
  float* x = nullptr;          // [n, dim]
  int64_t n = 0, hc = 4, dim = 0;
};
cudaError_t hc_collapse(const HcCollapseArgs& a, cudaStream_t stream);

// hc_collapse then rms_norm (elementwise.cuh) in one launch, one block per token: the
// collapsed row stays in shared memory instead of a round trip through HBM. Each
// element and the norm's sum run in the same order as the two kernels (the norm's 256
// threads and tree), so the result is bitwise theirs.
struct HcCollapseNormArgs {
  const float* h = nullptr;       // [n, hc, dim]
  const float* pre = nullptr;     // [n, hc]
  const float* weight = nullptr;  // [dim] or null
  float* x = nullptr;             // [n, dim]: the normalized collapse
  int64_t n = 0, hc = 4, dim = 0;  // dim <= kMaxCollapseNormDim
  float eps = 1e-6f;
};
constexpr int64_t kMaxCollapseNormDim = 8192;  // the row in shared memory (32 KB)
constexpr int64_t kOneLaunchMaxDim = 20 * 256;     // the one-launch norm keeps its row in registers
// The batch-1 small-kernel fusions, taken for batches of up to b1_fuse_max_n() rows: the
// model passes HcMixesArgs::counters and runs the q / kv norms in one launch (with the ring
// write), and rms_norm / norm_rope_quant calls of that many rows batch their single-block
// loads. DEEPINFER_B1_FUSE=0..8 sets it (read once; 0: the former launches), else
// kB1FuseDefault: 1, where it measured faster (NOTES 29: graph replay, batch 1 -6 us per
// layer; batch 8 unchanged within noise with 8).
constexpr int kB1FuseDefault = 1;
int b1_fuse_max_n();
inline bool b1_fuse_for(int64_t n) { return n >= 1 && n <= b1_fuse_max_n(); }
cudaError_t hc_collapse_norm(const HcCollapseNormArgs& a, cudaStream_t stream);

// hc_mixes(m) then hc_collapse_norm(cn) in two launches instead of three: the mixes'
// split sums, then one kernel whose blocks either finish m (8 tokens a block) or
// collapse + normalize one token with cn.pre (bitwise the separate kernels). A decode layer collapses with the
// previous site's weights while computing the next ones, so cn.pre must not be one of
// m's outputs (cudaErrorInvalidValue); cn.n must equal m.n.
cudaError_t hc_mixes_collapse_norm(const HcMixesArgs& m, const HcCollapseNormArgs& cn, cudaStream_t stream);
// Whether hc_[expand_]mixes_collapse_norm(m, cn) takes the one-launch site (m.counters set and
// the shape fits), i.e. whether m.defer_finish is honoured (elsewhere it is ignored: the two
// launches finish the mixes themselves).
bool hc_site_one_launch_applies(const HcMixesArgs& m, const HcCollapseNormArgs& cn);
// Where the one-launch site's finish runs in the decode layers (the model reads it per step):
// 0 = in the site's last block; 1 = deferred (defer_finish) to hc_mixes_finish on a concurrent
// stream that joins before the next reader of pre / post / comb (NOTES 51). hc_set_site_mode
// (-1: back to the environment) or DEEPINFER_HC_SITE=0..3 (read once; invalid: the model refuses
// it at load), else kHcSiteDefault. 2 = deferred and wide (HcMixesArgs::wide), 3 = 2 launched as
// a programmatic dependent (HcMixesArgs::pdl); the model reads the mode at load (1..3: the
// finish's stream) and per step (wide / pdl), so one model can compare 1..3. All modes give the
// same bits. The default was 1 from run 46 (the 7 layers at batch 1 1.620 / 1.617 -> 1.579 ms
// alone) and is 3 since run 48 (NOTES 55: 1.493 -> 1.477 ms; the whole test_model_cuda with it
// set). Modes 1..3 act where the one-launch site runs (one-row steps); elsewhere the two launches
// finish the mixes themselves.
constexpr int kHcSiteDefault = 3;
void hc_set_site_mode(int mode);
int hc_site_mode();

struct HcExpandArgs {
  float* h = nullptr;           // [n, hc, dim], updated in place
  const float* y = nullptr;     // [n, dim]
  const float* post = nullptr;  // [n, hc]
  const float* comb = nullptr;  // [n, hc, hc]
  int64_t n = 0, hc = 4, dim = 0;
};
cudaError_t hc_expand(const HcExpandArgs& a, cudaStream_t stream);

// hc_expand(e) then hc_mixes_collapse_norm(m, cn), still two launches: the expand runs
// inside the mixes' partial sums (whole columns per block), bitwise the three calls.
// e must update m's input (e.h == m.h, same n / hc / dim); e.post / e.comb may be
// m.post / m.comb (read by the first launch, written by the second).
cudaError_t hc_expand_mixes_collapse_norm(const HcExpandArgs& e, const HcMixesArgs& m, const HcCollapseNormArgs& cn,
                                          cudaStream_t stream);

}  // namespace deepinfer::kernels
