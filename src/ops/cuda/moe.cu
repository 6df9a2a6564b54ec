// MoE router, SwiGLU expert and the device-routed grouped experts on the GPU
// (kernels/cuda/smxx_moe, smxx_moe_mma, smxx_linear).
#include <algorithm>
#include <climits>

#include "kernels/cuda/smxx_moe.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"

namespace deepinfer::ops::cuda {

namespace {
// Stream-ordered scratch, freed on the same stream when it goes out of scope.
struct Scratch {
  float* p = nullptr;
  cudaStream_t s;
  Scratch(int64_t count, cudaStream_t stream) : s(stream) {
    if (count > 0) CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&p), size_t(count) * sizeof(float), s));
  }
  ~Scratch() {
    if (p) cudaFreeAsync(p, s);  // no throw from a destructor; a failure resurfaces at the next check
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};
}  // namespace

namespace {
// The router's logits into `logits` ([n, experts]) and the selection's arguments over them.
kernels::RouterSelectArgs router_logits_then(const MoeRouterParams& p, float* logits, cudaStream_t stream) {
  const int64_t experts = p.gate.rows;
  kernels::RouterLogitsArgs la;
  la.x = p.x;
  la.n = p.n;
  la.gate = to_weight_args(p.gate);
  la.logits = logits;
  CUDA_CHECK(kernels::router_logits(la, stream));
  kernels::RouterSelectArgs sa;
  sa.logits = logits;
  sa.bias = p.bias;
  sa.n = p.n;
  sa.num_experts = experts;
  sa.top_k = p.top_k;
  sa.temp = p.temp;
  sa.norm_topk_prob = p.norm_topk_prob;
  sa.routed_scaling_factor = p.routed_scaling_factor;
  sa.expert_ids = p.expert_ids;
  sa.expert_weights = p.expert_weights;
  return sa;
}
}  // namespace

void moe_router(const MoeRouterParams& p, cudaStream_t stream) {
  CUDA_OP_CHECK(p.n >= 0 && p.top_k >= 1 && p.top_k <= p.gate.rows, "moe_router: bad top_k");
  if (p.n == 0) return;
  Scratch logits(p.n * p.gate.rows, stream);
  CUDA_CHECK(kernels::router_select(router_logits_then(p, logits.p, stream), stream));
}

void swiglu_expert(const SwigluExpertParams& p, cudaStream_t stream) {
  swiglu_expert(p, LinearMode::kAuto, stream);
}

void swiglu_expert(const SwigluExpertParams& p, LinearMode mode, cudaStream_t stream) {
  const int64_t inter = p.w1.rows, dim = p.w1.cols;
  CUDA_OP_CHECK(p.w3.rows == inter && p.w3.cols == dim && p.w2.rows == dim && p.w2.cols == inter,
                "swiglu_expert: w1/w3 [inter, dim] and w2 [dim, inter] disagree");
  if (p.n == 0) return;
  Scratch gate(p.n * inter, stream), up(p.n * inter, stream);
  // Under Activations::kBF16 linear rounds its x to bf16: x before w1 / w3, the scaled
  // SwiGLU output before w2 (the CPU op's semantics).
  // kFP8 (the model's fp8 mode): per weight, kFP8 where it can take it, else bf16
  // (ops::activations_for), as the CPU op.
  linear({p.x, gate.p, p.n, p.w1, 0, -1, activations_for(p.act, p.w1)}, mode, stream);
  linear({p.x, up.p, p.n, p.w3, 0, -1, activations_for(p.act, p.w3)}, mode, stream);
  CUDA_CHECK(kernels::swiglu_act({gate.p, up.p, p.route_weight, p.n, inter, p.swiglu_limit}, stream));
  linear({gate.p, p.y, p.n, p.w2, 0, -1, activations_for(p.act, p.w2)}, mode, stream);
}

// ---------------------------------------------------------------------------
// Grouped experts.
// ---------------------------------------------------------------------------

namespace {
bool same_layout(const kernels::WeightArgs& a, const kernels::WeightArgs& b) {
  return a.format == b.format && a.rows == b.rows && a.cols == b.cols && a.scale_format == b.scale_format &&
         a.scale_cols == b.scale_cols && a.block_rows == b.block_rows && a.block_cols == b.block_cols;
}
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
size_t round_up(size_t v) { return (v + 255) / 256 * 256; }

// The big-tile (tensor-core) path runs only in kAuto mode, for FP8 / FP4 experts, and
// only for batches where an expert can get more than kMoeSmallRows rows (n > 8 with the
// router's distinct ids; repeated ids below that just make more small tiles).
bool use_big_tiles(int64_t n, const MoeExpertTable& t, LinearMode mode) {
  return mode == LinearMode::kAuto && n > kernels::kMoeSmallRows && kernels::moe_mma_eligible(t.w13()) &&
         kernels::moe_mma_eligible(t.w2());
}

// The tensor-core FP4 tiles (moe_tc) take every tile of e2m1 experts with 1x32 ue8m0
// scales (the released format); other formats keep the SIMT gemv + 3-term mma tiles.
bool use_tc(const MoeExpertTable& t) { return kernels::moe_tc_eligible(t.w13(), t.w2()); }

// Workspace layout, in order; every piece 256-byte aligned. xt / ht: the bf16 planes of
// x and h for moe_tc (sized for 3 planes, the kF32 split); xp: bf16 x in the wgmma
// tiles' column order (moe_split_perm); xr: bf16-rounded x for the SIMT paths under
// kBF16. Sizes do not depend on the activation mode.
struct MoeLayout {
  size_t counts, offsets, chunk_base, row_token, row_weight, slot_row, small_tiles, big_tiles, num_tiles, h, up, y,
      xt, ht, xp, xr, sync, total;
  MoeLayout(int64_t n, int64_t k, const MoeExpertTable& t, LinearMode mode) {
    const int64_t nk = n * k, E = t.num_experts(), inter = t.w13().rows, dim = t.w2().rows;
    const bool big = use_big_tiles(n, t, mode), tc = use_tc(t);
    size_t at = 0;
    auto take = [&](size_t bytes) {
      const size_t o = at;
      at += round_up(bytes);
      return o;
    };
    counts = take(size_t(E) * 4);
    offsets = take(size_t(E + 1) * 4);
    chunk_base = take(size_t(kernels::moe_plan_chunks(nk) * E) * 4);
    row_token = take(size_t(nk) * 4);
    row_weight = take(size_t(nk) * 4);
    slot_row = take(size_t(nk) * 4);
    small_tiles = take(size_t(kernels::moe_small_tile_bound(nk, E, kernels::moe_small_tile_rows(n))) *
                       sizeof(kernels::MoeTile));
    big_tiles = take(big ? size_t(kernels::moe_big_tile_bound(nk, E)) * sizeof(kernels::MoeTile) : 0);
    num_tiles = take(2 * 4);
    h = take(size_t(nk * inter) * 4);
    up = take(big ? size_t(nk * inter) * 4 : 0);
    y = take(size_t(nk * dim) * 4);
    xt = take(tc ? size_t(n * dim) * 2 * 3 : 0);
    ht = take(tc ? size_t(nk * inter) * 2 * 3 : 0);
    xp = take(tc ? size_t(n * dim) * 2 : 0);
    xr = take(tc ? 0 : size_t(n * dim) * 4);
    // moe_tc_fused's ticket + per-small-tile counters (zeroed by the plan).
    sync = take(tc ? size_t(kernels::moe_tc_fused_sync_count(kernels::moe_small_tile_bound(
                                  nk, E, kernels::moe_small_tile_rows(n)))) * 4
                   : 0);
    total = at;
  }
};
}  // namespace

MoeExpertTable::MoeExpertTable(const std::vector<MoeExpertRef>& experts) {
  CUDA_OP_CHECK(!experts.empty() && experts.size() <= 4096, "moe table: 1..4096 experts");
  w13_ = to_weight_args(experts[0].w1);
  w2_ = to_weight_args(experts[0].w2);
  CUDA_OP_CHECK(w2_.rows == w13_.cols && w2_.cols == w13_.rows, "moe table: w1 [inter, dim] and w2 [dim, inter] disagree");
  CUDA_OP_CHECK(kernels::moe_gemv_eligible(w13_) && kernels::moe_gemv_eligible(w2_),
                "moe table: expert layout not supported by the grouped kernels (row bytes a multiple of 16, "
                "power-of-two scale blocks at least one 16-byte vector wide)");
  std::vector<kernels::MoeExpertPtrs> h(experts.size());
  for (size_t e = 0; e < experts.size(); ++e) {
    const kernels::WeightArgs a1 = to_weight_args(experts[e].w1), a3 = to_weight_args(experts[e].w3),
                              a2 = to_weight_args(experts[e].w2);
    CUDA_OP_CHECK(same_layout(a1, w13_) && same_layout(a3, w13_) && same_layout(a2, w2_),
                  "moe table: every expert needs the same format, shape and scale layout");
    CUDA_OP_CHECK(aligned16(a1.data) && aligned16(a3.data) && aligned16(a2.data), "moe table: weights not 16-byte aligned");
    h[e] = {{a1.data, a3.data, a2.data}, {a1.scale, a3.scale, a2.scale}};
  }
  const size_t bytes = h.size() * sizeof(kernels::MoeExpertPtrs);
  CUDA_CHECK(cudaMalloc(&table_, bytes));
  const cudaError_t err = cudaMemcpy(table_, h.data(), bytes, cudaMemcpyHostToDevice);
  if (err != cudaSuccess) {
    cudaFree(table_);
    table_ = nullptr;
    CUDA_CHECK(err);
  }
  num_experts_ = int64_t(experts.size());
}

MoeExpertTable::~MoeExpertTable() {
  if (table_) cudaFree(table_);
}

MoeExpertTable& MoeExpertTable::operator=(MoeExpertTable&& o) noexcept {
  if (this != &o) {
    if (table_) cudaFree(table_);
    table_ = std::exchange(o.table_, nullptr);
    num_experts_ = std::exchange(o.num_experts_, 0);
    w13_ = o.w13_;
    w2_ = o.w2_;
  }
  return *this;
}

namespace {
void combine(const MoeExpertsParams& p, const MoeExpertTable& t, const kernels::MoePlanArgs& pa, const float* y,
             cudaStream_t stream) {
  kernels::MoeCombineArgs ca;
  ca.y = y;
  ca.expert_ids = p.expert_ids;
  ca.slot_row = pa.slot_row;
  ca.residual = p.residual;
  ca.out = p.y;
  ca.n = int32_t(p.n);
  ca.k = int32_t(p.top_k);
  ca.dim = int32_t(t.w2().rows);
  CUDA_CHECK(kernels::moe_combine(ca, stream));
}
}  // namespace

size_t moe_experts_workspace_bytes(int64_t n, int64_t top_k, const MoeExpertTable& t, LinearMode mode) {
  return MoeLayout(n, top_k, t, mode).total;
}

namespace {
void moe_experts_impl(const MoeExpertsParams& p, const MoeExpertTable& t, LinearMode mode, cudaStream_t stream,
                      void* workspace, const kernels::RouterSelectArgs* select, cudaEvent_t residual_ready);
}  // namespace

void moe_experts(const MoeExpertsParams& p, const MoeExpertTable& t, LinearMode mode, cudaStream_t stream,
                 void* workspace) {
  moe_experts_impl(p, t, mode, stream, workspace, nullptr, nullptr);
}

void moe_route_experts(const MoeRouterParams& r, const MoeExpertsParams& p, const MoeExpertTable& t, LinearMode mode,
                       cudaStream_t stream, void* workspace, cudaEvent_t residual_ready) {
  CUDA_OP_CHECK(r.n >= 0 && r.top_k >= 1 && r.top_k <= r.gate.rows, "moe_route_experts: bad top_k");
  CUDA_OP_CHECK(r.n == p.n && r.top_k == p.top_k && r.gate.rows == p.num_experts && r.expert_ids == p.expert_ids &&
                    r.expert_weights == p.expert_weights,
                "moe_route_experts: the router's n, top_k, experts and id / weight buffers must be the experts' own");
  CUDA_OP_CHECK(r.expert_ids && r.expert_weights, "moe_route_experts: null pointer");
  if (p.n == 0) {
    // No launch, but the caller's branch still joins this stream (a capture needs it).
    if (residual_ready) CUDA_CHECK(cudaStreamWaitEvent(stream, residual_ready, 0));
    return;
  }
  Scratch logits(r.n * r.gate.rows, stream);
  const kernels::RouterSelectArgs sa = router_logits_then(r, logits.p, stream);
  moe_experts_impl(p, t, mode, stream, workspace, &sa, residual_ready);
}

namespace {
void moe_experts_impl(const MoeExpertsParams& p, const MoeExpertTable& t, LinearMode mode, cudaStream_t stream,
                      void* workspace, const kernels::RouterSelectArgs* select, cudaEvent_t residual_ready) {
  CUDA_OP_CHECK(t.table() != nullptr, "moe_experts: empty expert table");
  CUDA_OP_CHECK(p.num_experts == t.num_experts(), "moe_experts: num_experts differs from the table's");
  CUDA_OP_CHECK(p.n >= 0 && p.top_k >= 1 && p.top_k <= 16, "moe_experts: need n >= 0 and 1 <= top_k <= 16");
  CUDA_OP_CHECK(p.n * p.top_k <= INT32_MAX / 2, "moe_experts: too many assignments");
  if (p.n == 0) return;
  CUDA_OP_CHECK(p.x && p.expert_ids && p.expert_weights && p.y, "moe_experts: null pointer");
  CUDA_OP_CHECK(aligned16(p.x), "moe_experts: x must be 16-byte aligned");
  const int64_t nk = p.n * p.top_k, E = t.num_experts();
  const MoeLayout lay(p.n, p.top_k, t, mode);
  Scratch own(workspace ? 0 : int64_t(lay.total / 4 + 1), stream);
  uint8_t* ws = static_cast<uint8_t*>(workspace ? workspace : static_cast<void*>(own.p));
  CUDA_OP_CHECK(aligned16(ws), "moe_experts: workspace must be 16-byte aligned");
  const bool big = use_big_tiles(p.n, t, mode);
  auto at = [&](size_t off) { return ws + off; };

  kernels::MoePlanArgs pa;
  pa.expert_ids = p.expert_ids;
  pa.expert_weights = p.expert_weights;
  if (select) pa.select = *select;  // the router's selection first, in the plan's launch where it fits
  pa.n = int32_t(p.n);
  pa.k = int32_t(p.top_k);
  pa.num_experts = int32_t(E);
  // kF32 e2m1 experts: the small tiles up to moe_tc_f32_big_threshold rows (their big
  // tiles are the slower 3-term fp32 block); otherwise every expert above the small height.
  pa.big_threshold = !big ? INT32_MAX
                     : use_tc(t) && p.act == Activations::kF32 ? kernels::moe_tc_f32_big_threshold()
                                                                : kernels::kMoeSmallRows;
  pa.small_rows = int32_t(kernels::moe_small_tile_rows(p.n));
  // The big tiles of e2m1 experts under kBF16 go to moe_tc; its wide kernel takes taller
  // tiles (kMoeTcWideRows: one tile per expert at prefill sizes, smxx_moe.cuh).
  // kAuto: the wgmma tiles with the scale ring at prefill sizes, the wide kernel below (the
  // same bits every way).
  const kernels::MoeTcBig big_kind =
      kernels::moe_tc_big() != kernels::MoeTcBig::kAuto ? kernels::moe_tc_big()
      : p.n >= kernels::kMoeTcWgmmaMinTokens           ? kernels::MoeTcBig::kWgmmaWsS
                                                        : kernels::MoeTcBig::kWide;
  const bool wide = big && use_tc(t) && p.act == Activations::kBF16;
  // kWgmmaWsS (sm_90a only; kWide elsewhere): tiles of kMoeTcWgmmaRows, x from permuted planes.
  const bool wg = wide && big_kind == kernels::MoeTcBig::kWgmmaWsS && kernels::moe_tc_wgmma_supported();
  pa.big_rows = wg ? kernels::kMoeTcWgmmaRows : wide ? kernels::kMoeTcWideRows : kernels::kMoeBigRows;
  pa.counts = reinterpret_cast<int32_t*>(at(lay.counts));
  pa.offsets = reinterpret_cast<int32_t*>(at(lay.offsets));
  pa.chunk_base = reinterpret_cast<int32_t*>(at(lay.chunk_base));
  pa.row_token = reinterpret_cast<int32_t*>(at(lay.row_token));
  pa.row_weight = reinterpret_cast<float*>(at(lay.row_weight));
  pa.slot_row = reinterpret_cast<int32_t*>(at(lay.slot_row));
  pa.small_tiles = reinterpret_cast<kernels::MoeTile*>(at(lay.small_tiles));
  pa.big_tiles = big ? reinterpret_cast<kernels::MoeTile*>(at(lay.big_tiles)) : nullptr;
  pa.num_tiles = reinterpret_cast<int32_t*>(at(lay.num_tiles));
  const bool bf16 = p.act == Activations::kBF16;
  const int64_t dim = t.w2().rows, inter = t.w13().rows;
  // The small-tile kernel: kernels::moe_tc_set_small, kAuto (default) resolved per batch
  // by moe_tc_small_for (the kernel measured fastest, bench/results/2026-11-30-moe-decode.md). kFused (opt-in; slower):
  // the plan's histogram launch also splits x into the bf16 planes, and the plan zeroes
  // the fused kernel's counters, so the small tiles' split + two stages are one launch.
  // kLean4 / kLean8 / kLean4T: the split folded into the plan the same way (one launch fewer), then
  // one lean moe_tc launch per stage. kFormer: split, then one launch per stage.
  const kernels::MoeTcSmall small_kind =
      kernels::moe_tc_small_for(p.n, p.act == Activations::kBF16, mode == LinearMode::kInvariant);
  const bool fused = use_tc(t) && small_kind == kernels::MoeTcSmall::kFused;
  const bool folded_split =
      fused || (use_tc(t) && (small_kind == kernels::MoeTcSmall::kLean4 || small_kind == kernels::MoeTcSmall::kLean8 ||
                              small_kind == kernels::MoeTcSmall::kLean4T));
  const int terms = bf16 ? 1 : 3;
  int32_t* sync = reinterpret_cast<int32_t*>(at(lay.sync));
  if (folded_split) {
    pa.split_x = p.x;
    pa.split_out = reinterpret_cast<uint16_t*>(at(lay.xt));
    pa.split_count = p.n * dim;
    pa.split_terms = terms;
  }
  if (fused) {
    pa.sync = sync;
    pa.sync_count = kernels::moe_tc_fused_sync_count(kernels::moe_small_tile_bound(nk, E, pa.small_rows));
  }
  CUDA_CHECK(kernels::moe_plan(pa, stream));

  float* h = reinterpret_cast<float*>(at(lay.h));
  float* y = reinterpret_cast<float*>(at(lay.y));
  kernels::MoeGroupedArgs g;
  g.experts = static_cast<const kernels::MoeExpertPtrs*>(t.table());
  g.w13 = t.w13();
  g.w2 = t.w2();
  g.row_token = pa.row_token;
  g.row_weight = pa.row_weight;
  g.limit = p.swiglu_limit;
  kernels::MoeGroupedArgs small = g, large = g;
  small.tiles = pa.small_tiles;
  small.num_tiles = pa.num_tiles;
  small.max_tiles = kernels::moe_small_tile_bound(nk, E, pa.small_rows);
  small.tile_rows = pa.small_rows;
  small.small_kernel = int(small_kind);
  large.tiles = pa.big_tiles;
  large.num_tiles = pa.num_tiles + 1;
  large.max_tiles = big ? kernels::moe_big_tile_bound(nk, E) : 0;
  large.up = big ? reinterpret_cast<float*>(at(lay.up)) : nullptr;

  if (use_tc(t)) {
    // x -> bf16 planes once; every tile of both stages on the tensor cores, except the
    // big tiles of the exact mode, which keep the 3-term mma block (moe_mma) on fp32 h.
    uint16_t* xt = reinterpret_cast<uint16_t*>(at(lay.xt));
    uint16_t* ht = reinterpret_cast<uint16_t*>(at(lay.ht));
    if (!folded_split) CUDA_CHECK(kernels::moe_split_terms(p.x, xt, p.n * dim, terms, stream));
    kernels::MoeGroupedArgs ts = small, tl = large;
    tl.tile_rows = pa.big_rows;
    for (kernels::MoeGroupedArgs* s : {&ts, &tl}) {
      s->terms = terms;
      s->stage = 1;
      s->xt = xt;
      s->xt_plane = p.n * dim;
      s->ht = ht;
      s->ht_plane = nk * inter;
    }
    if (wg) {  // the wgmma tiles read x in their own column order (and write h in it for stage 2)
      uint16_t* xp = reinterpret_cast<uint16_t*>(at(lay.xp));
      CUDA_CHECK(kernels::moe_split_perm(p.x, xp, p.n * dim, dim, stream));
      tl.xt = xp;
    }
    const bool big_tc = big && bf16;
    // The small tiles' stage 2 arguments (the fused kernel takes both stages at once).
    kernels::MoeGroupedArgs ts2 = ts;
    ts2.stage = 2;
    ts2.xt = ht;
    ts2.xt_plane = nk * inter;
    ts2.y = y;
    bool small_done = false;
    if (fused) {
      const cudaError_t e = kernels::moe_tc_fused(ts, ts2, sync, stream);
      if (e != cudaErrorNotSupported) {  // not supported (a K split wider than its block): the two launches
        CUDA_CHECK(e);
        small_done = true;
      }
    }
    if (!small_done) CUDA_CHECK(kernels::moe_tc(ts, stream));
    if (big_tc) CUDA_CHECK(kernels::moe_tc(tl, stream));
    if (big && !big_tc) {
      large.stage = 1;
      large.x = p.x;
      large.y = h;
      CUDA_CHECK(kernels::moe_mma(large, stream));
      CUDA_CHECK(kernels::moe_act(large, stream));
    }
    for (kernels::MoeGroupedArgs* s : {&ts, &tl}) {
      s->stage = 2;
      s->xt = ht;
      s->xt_plane = nk * inter;
      s->y = y;
    }
    if (!small_done) CUDA_CHECK(kernels::moe_tc(ts2, stream));
    if (big_tc) CUDA_CHECK(kernels::moe_tc(tl, stream));
    if (big && !big_tc) {
      large.stage = 2;
      large.x = h;
      large.y = y;
      CUDA_CHECK(kernels::moe_mma(large, stream));
    }
    if (residual_ready) CUDA_CHECK(cudaStreamWaitEvent(stream, residual_ready, 0));
    combine(p, t, pa, y, stream);
    return;
  }

  // SIMT gemv / 3-term mma tiles. Under kBF16: x rounded first, h rounded as written.
  const float* x = p.x;
  if (bf16) {
    float* xr = reinterpret_cast<float*>(at(lay.xr));
    CUDA_CHECK(kernels::moe_round_bf16(p.x, xr, p.n * dim, stream));
    x = xr;
    small.round_h = large.round_h = true;
  }
  // Stage 1: x -> h = route_weight * SwiGLU(w1 x, w3 x), per permuted row.
  for (kernels::MoeGroupedArgs* s : {&small, &large}) {
    s->stage = 1;
    s->x = x;
    s->y = h;
  }
  CUDA_CHECK(kernels::moe_gemv(small, stream));
  if (big) {
    CUDA_CHECK(kernels::moe_mma(large, stream));
    CUDA_CHECK(kernels::moe_act(large, stream));
  }
  // Stage 2: h -> y = w2 h.
  for (kernels::MoeGroupedArgs* s : {&small, &large}) {
    s->stage = 2;
    s->x = h;
    s->y = y;
  }
  CUDA_CHECK(kernels::moe_gemv(small, stream));
  if (big) CUDA_CHECK(kernels::moe_mma(large, stream));
  if (residual_ready) CUDA_CHECK(cudaStreamWaitEvent(stream, residual_ready, 0));
  combine(p, t, pa, y, stream);
}
}  // namespace

}  // namespace deepinfer::ops::cuda
