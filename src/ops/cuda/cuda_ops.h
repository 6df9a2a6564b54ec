// The CUDA backend: the ops of src/ops/*.h under the same names, taking the same
// Params structs with DEVICE pointers (weights included), plus a stream. Every op
// is enqueued on the stream and returns without synchronizing, except the
// host-result overload of indexer_select. Scratch space comes from the stream-
// ordered allocator (cudaMallocAsync) for now; the step arena of DESIGN 2.8 will
// replace it.
//
// Activations are fp32, the CPU oracle's precision, so tests compare tightly.
// bf16 activations (half the bytes between ops, tensor-core GEMMs) come next and
// will add overloads with bf16 pointers, not change these.
//
// Errors: bad arguments and failed CUDA calls throw std::runtime_error naming the
// file and line (cuda_check.h).
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "ops/attention.h"
#include "ops/hyper_connection.h"
#include "ops/indexer.h"
#include "ops/linear.h"
#include "ops/moe.h"
#include "ops/norm.h"
#include "ops/quant.h"
#include "ops/rope.h"
#include "kernels/cuda/smxx_types.h"

namespace deepinfer::ops::cuda {

void rms_norm(const RmsNormParams& p, cudaStream_t stream);
void rope(const RopeParamsOp& p, cudaStream_t stream);
void fake_quant_fp8(const FakeQuantParams& p, cudaStream_t stream);
void fake_quant_fp4(const FakeQuantParams& p, Fp4Scale scale_kind, cudaStream_t stream);

void hc_mixes(const HcMixesParams& p, cudaStream_t stream);
void hc_collapse(const HcCollapseParams& p, cudaStream_t stream);
void hc_expand(const HcExpandParams& p, cudaStream_t stream);

void sink_attention(const SinkAttentionParams& p, cudaStream_t stream);

void linear(const LinearParams& p, cudaStream_t stream);

// Which linear kernel runs. kAuto picks by batch size (gemv up to 8 rows, then the
// tensor-core mma or the tiled GEMM), so a row's rounding depends on how many rows
// share the call. kInvariant runs one kernel for every n, so a row's result is the
// same bits in any batch (the batch-invariant mode, FEATURES.md): the gemv kernel on
// chunks of 8 tokens where the weight allows it (its per-row sums do not depend on
// the token count), else the tiled SIMT GEMM (fixed K order per row, no split-K).
// Not mma: besides depending on n through the gemv switch, its 3-term bf16 products
// drift ~2e-5 relative from the CPU oracle, which flips more of the model's FP8 /
// FP4 rounding decisions; gemv stays within ~5e-7. Cost: decode as fast as the
// default; a prefill reads every weight once per 8 tokens.
enum class LinearMode { kAuto, kInvariant };
void linear(const LinearParams& p, LinearMode mode, cudaStream_t stream);

// Under Activations::kBF16 (LinearParams::act) every kernel rounds x to bf16 first:
// gemv and tiled on load, mma with one bf16 MMA per tile instead of three; and in
// kAuto mode a batch of n >= linear_gemm_min_n() tokens runs a bf16 GEMM through cuBLASLt
// (fp32 accumulation and output) when a workspace is given: x -> bf16 into the
// workspace, an FP8 / FP4 weight dequantized exactly into bf16 there (BF16 weights are
// read in place), then cublasLtMatmul. The algorithm is the heuristic's first choice
// for the shape, cached (same shape, same algorithm, same bits on every call), split-K
// only with a separate reduction step; nothing is allocated, so the call can be
// captured in a CUDA graph. A workspace too small for the weight, or a shape without
// an algorithm, falls back to the kernels above; x larger than the workspace runs in
// token pieces. kInvariant never takes it (cuBLASLt's result depends on n).
//
// Workspace layout: cuBLASLt's own kLinearGemmLtBytes, the dequantized weight (rows x
// cols bf16 of the call's rows), then bf16 x. linear_gemm_workspace_bytes(largest
// rows * cols to dequantize, largest n * cols to convert at once) sizes it.
constexpr size_t kLinearGemmLtBytes = size_t(32) << 20;  // cuBLASLt's workspace (NVIDIA's advice for sm_90)
struct LinearWorkspace {
  void* data = nullptr;  // device memory, 256-byte aligned
  size_t bytes = 0;
  int64_t min_n = 0;     // > 0: the GEMM path from this n on instead of linear_gemm_min_n() (tests)
};
// The n from which kAuto takes the GEMM for this weight (rows: the call's output rows);
// INT64_MAX for weights it cannot take. Measured on the H200 at the Flash shapes
// (bench/results/2026-11-30-bf16-gemm.md): BF16 weights, read in place, from n = 8 (the
// head at n = 8: gemv 1.48 ms, GEMM 0.31 ms; n = 1 stays on the bandwidth-bound gemv);
// FP8 / FP4 weights, dequantized per call (~5 bytes of traffic per element), from n = 64
// (there 2-5x faster than the one-MMA tiles on wq_a, wo_b, shared_w1), but from 128 for
// >= 16384 rows, which fill the GPU with mma tiles (wq_b n = 64: tiles 0.064 ms, GEMM
// 0.108; n = 256: 0.244 vs 0.120).
int64_t linear_gemm_min_n(const WeightRef& w, int64_t rows);
size_t linear_gemm_workspace_bytes(int64_t max_weight_elems, int64_t max_x_elems);
// Persistent bf16 copies (--bf16-weights): WeightRef::bf16, when set, is the weight's
// whole bf16 image on the device, and the GEMM path multiplies it in place instead of
// dequantizing the weight into the workspace first. The image is the same bits the
// per-call dequantization writes (same kernel) and the call keeps the workspace layout,
// token pieces and cached algorithm of the per-call path, so results are bitwise the same
// with or without the copy; only the dequant kernel (~5 bytes of traffic per weight
// element, 2-3x the GEMM at n = 64-256 on the Flash shapes) is gone. The thresholds
// (linear_gemm_min_n) are unchanged, so no call changes path either.
// linear_bf16_copy_bytes: bytes of the image for a weight the GEMM path dequantizes
// (FP8 / FP4 with no or ue8m0 scales); 0 for every other weight (BF16 is read in place,
// F32 / F16 / fp32-scaled weights never take the GEMM path).
size_t linear_bf16_copy_bytes(const WeightRef& w);
// Writes that image (linear_bf16_copy_bytes(w) bytes, 16-byte aligned) into `out`.
void linear_make_bf16_copy(const WeightRef& w, uint16_t* out, cudaStream_t stream);
// Creates the current device's cuBLASLt handle (before any graph capture).
void linear_gemm_init();
// Process-wide counts of the GEMM path (diagnostics, tests): calls that ran it, and calls
// it declined for want of an algorithm for the shape (those ran the kernels above).
// Of the calls on FP8 / FP4 weights: `dequantized` converted the weight into the
// workspace, `bf16_copy` read its persistent copy (WeightRef::bf16).
struct LinearGemmStats {
  int64_t calls = 0, no_algorithm = 0, dequantized = 0, bf16_copy = 0;
};
LinearGemmStats linear_gemm_stats();
// Which kernel runs: kAuto as above; the others force one (tests, benchmarks) and throw
// when it cannot take the arguments. kGemm needs Activations::kBF16 or kFP8 and a
// workspace; kFp8Mma needs Activations::kFP8.
// kFp8Gemv: Activations::kFP8's decode kernel (n <= 8; see below).
enum class LinearKernel { kAuto, kGemv, kMma, kTiled, kGemm, kFp8Mma, kFp8Gemv };
// Activations::kFP8 (ops/linear.h; FP8 e4m3 weights with no or 32-multiple ue8m0 scale
// blocks, else the call throws): x is quantized per 32-K block on the device, bit for bit
// as the CPU does, then
//   - kAuto with a workspace from n >= linear_gemm_min_n() (or ws.min_n), or kGemm forced:
//     the bf16 cuBLASLt GEMM above on code * scale in bf16 (exact: <= 4 significant bits)
//     against the weight's exact bf16 image (per call or the persistent copy): the FP8
//     GEMM's products, added in fp32 in cuBLASLt's order. kAuto prefers it because it is
//     accurate where the wgmma FP8 kernels (deleted in session 8) were not: they added
//     each block's 32 products on the tensor core with a truncated alignment (worst error
//     2e-5..1e-4 of S in the op
//     cases, 1.5e-7 for mma.sync), which on the trained model moved fp8 mode's logits as
//     far from the CPU as fp8 mode is from bf16 (run 21). With the bf16 copies it is also
//     1.9-4.5x faster (bench/results/2026-11-30-h200-flash-layers.md runs 17 and 20): V4.1's
//     32 x 32 ue8m0 blocks need a promotion after every k32 MMA, which costs the FP8
//     kernels as much issue as the MMAs, and cuBLASLt 13 refuses its 32-block FP8 mode
//     (VEC32_UE8M0) on Hopper;
//   - else at 4 <= n <= 8 (kAuto; DEEPINFER_FP8_GEMV=1: from n = 1, =0: never), or forced
//     with kFp8Gemv at n <= 8: one
//     launch that quantizes x in the kernel and runs mma.sync m16n8k32 e4m3 per 16 rows x
//     32-K block, promoted with s_w * s_x (kernels::linear_fp8_gemv; NOTES 31); batch
//     invariant (the K split from the weight's shape only); kAuto falls back below when the
//     weight or x does not fit it (K % 32, alignment);
//   - else from n >= linear_fp8_min_n() tokens (kAuto), or forced with kFp8Mma: a GEMM on
//     the FP8 tensor cores (kernels/cuda/smxx_linear_fp8.cuh: mma.sync, one k32 MMA per
//     32-block from zero, promoted to fp32 with s_x * s_w; exact products, fp32 sums). The
//     session-6 wgmma FP8 kernels that kAuto took here were deleted in session 8 (less
//     accurate, and off the model's path since the cuBLASLt path above; NOTES 16, 24);
//     needs K % 32 == 0, 32-row weight scale blocks and a slice starting on one; kAuto
//     falls back to the path below when these do not hold;
//   - else (kAuto below the threshold, or kGemv / kMma / kTiled forced): the dequantized
//     codes (code * scale, exact in fp32) go through that fp32 kernel, whose products
//     are exact, so only its fp32 summation order differs from the oracle.
// Scratch (codes and scales, or the fp32 values) comes from ws when it is large enough
// (linear_fp8_workspace_bytes), else from the stream-ordered allocator.
// kInvariant mode: the gemv chunks on the dequantized codes (same bits in any batch).
int64_t linear_fp8_min_n();  // 64: from there the GEMM beat the fp32 path on every Flash shape
size_t linear_fp8_workspace_bytes(int64_t n, int64_t cols);
void linear(const LinearParams& p, LinearMode mode, cudaStream_t stream, const LinearWorkspace& ws,
            LinearKernel kernel = LinearKernel::kAuto);

// count (<= 4) linears as linear(ps[k], mode, stream, ws) would run them, in one gemv
// launch where each of them would take the gemv path alone (n <= 8 tokens, not kFP8,
// below the cuBLASLt threshold; all with the same weight format, n and act): each
// output bitwise what its own call gives (kernels::linear_gemv_multi), except kAuto's
// one-token bf16-x FP8 pairs of one x on the tensor-map kernel (kernels::gemv_tmap_pair_takes,
// NOTES 47: bitwise that kernel on each weight alone at the pair's split, which kAuto's own
// single call may not run). Otherwise one linear() per entry, in order. For projections of the same x (wq_a and wkv, the
// shared expert's w1 and w3, the compressor's wkv and wgate): fewer launches at decode.
void linear_multi(const LinearParams* ps, int count, LinearMode mode, cudaStream_t stream, const LinearWorkspace& ws);
// Whether linear(p, mode, stream, ws) may touch ws (the cuBLASLt path's dequant / bf16 x
// room, or Activations::kFP8's codes): a caller that runs linears on two streams at once
// shares one workspace between them only where this is false for one side (the model's
// concurrent branches). Conservative: true where the call might take the GEMM path.
bool linear_may_use_workspace(const LinearParams& p, LinearMode mode, const LinearWorkspace& ws);

void moe_router(const MoeRouterParams& p, cudaStream_t stream);
void swiglu_expert(const SwigluExpertParams& p, cudaStream_t stream);
void swiglu_expert(const SwigluExpertParams& p, LinearMode mode, cudaStream_t stream);

// The routed experts of one MoE layer as the grouped kernels read them: a device table
// of per-expert weight pointers, uploaded once (at load), and the layout they share
// (one format, shape and scale layout for all experts; checked here).
class MoeExpertTable {
 public:
  MoeExpertTable() = default;
  explicit MoeExpertTable(const std::vector<MoeExpertRef>& experts);  // WeightRefs in device memory
  ~MoeExpertTable();
  MoeExpertTable(MoeExpertTable&& o) noexcept { *this = std::move(o); }
  MoeExpertTable& operator=(MoeExpertTable&& o) noexcept;
  MoeExpertTable(const MoeExpertTable&) = delete;
  MoeExpertTable& operator=(const MoeExpertTable&) = delete;

  int64_t num_experts() const { return num_experts_; }
  const void* table() const { return table_; }
  const kernels::WeightArgs& w13() const { return w13_; }
  const kernels::WeightArgs& w2() const { return w2_; }

 private:
  void* table_ = nullptr;
  int64_t num_experts_ = 0;
  kernels::WeightArgs w13_, w2_;
};

// moe_experts (ops/moe.h) for a whole step without a host round trip: the expert
// ids / weights stay on the device (a permutation plan, grouped GEMMs over tile lists
// sized from n * top_k, a combine in each token's fixed order); a fixed launch count.
// p.experts is not read (the table holds the experts); p.num_experts must match it.
// Kernels: experts with <= 8 rows in the step run the grouped gemv; in kAuto mode
// experts with more rows run the tensor-core path (FP8 / FP4 experts). kInvariant
// runs the gemv for every expert, so a token's bits do not depend on the batch.
// workspace: moe_experts_workspace_bytes() of device memory (16-byte aligned), or
// null to allocate it on the stream.
size_t moe_experts_workspace_bytes(int64_t n, int64_t top_k, const MoeExpertTable& t, LinearMode mode);
void moe_experts(const MoeExpertsParams& p, const MoeExpertTable& t, LinearMode mode, cudaStream_t stream,
                 void* workspace = nullptr);
// moe_router(r) then moe_experts(p) (r's expert_ids / expert_weights are p's; n, top_k and
// the expert count agree), with the router's selection folded into the plan's launch
// where the one-launch plan runs (n * top_k <= kernels::moe_plan_single_launch_max(),
// n <= 32): one launch fewer per MoE layer at decode sizes. Bitwise the two calls' ids,
// weights and output (kernels::moe_plan_set_select(false) runs them as two launches).
// residual_ready (optional): an event the stream waits for right before the combine, the
// one launch that reads p.residual, so the residual (the model's shared expert) can be
// computed on another stream while the router, plan and expert tiles run (model_cuda.cpp,
// CudaModelOptions::overlap). Nothing else changes: same launches, same bits.
void moe_route_experts(const MoeRouterParams& r, const MoeExpertsParams& p, const MoeExpertTable& t, LinearMode mode,
                       cudaStream_t stream, void* workspace = nullptr, cudaEvent_t residual_ready = nullptr);

void indexer_score(const IndexerScoreParams& p, cudaStream_t stream);
// Masks p.scores in place and writes the selection to device memory: ids [n, top_k]
// ascending with -1 padding, counts [n]. Writes p.candidates_out when set.
void indexer_select(const IndexerSelectParams& p, int64_t* ids, int64_t* counts, cudaStream_t stream);
// The same, copied back into the CPU's CSR form (synchronizes the stream).
Selection indexer_select(const IndexerSelectParams& p, cudaStream_t stream);

// The batched indexer of a decode / prefill step (the model's index layers): every
// query row of every sequence in one launch per kernel, keys read in place from the
// paged history, the selection left on the device. CUDA only; each row computes what
// indexer_score / indexer_select compute for its sequence alone (tests/ops_cuda holds
// them against the CPU ops run per sequence), independent of the other rows.
//
// row_info [rows, 4], per query row t: {num_keys, score_begin, table_begin, cand_begin}
//   num_keys     keys of its sequence it scores (0: row skipped, count 0)
//   score_begin  its scores in the ragged buffer: scores[score_begin .. + num_keys)
//   table_begin  its sequence's block table: key e is pool row
//                tables[table_begin + e / entries_per_block] * entries_per_block + e % entries_per_block
//   cand_begin   its level-2 candidate mask at candidates_in[cand_begin ..), -1: none
struct IndexerScorePagedParams {
  const float* q = nullptr;         // [rows, heads, head_dim], 16-byte aligned
  const float* w = nullptr;         // [rows, heads] (already times heads^-0.5)
  const float* keys = nullptr;      // paged pool [*, head_dim], 16-byte aligned
  const int64_t* tables = nullptr;  // concatenated block tables
  const int64_t* row_info = nullptr;
  int64_t rows = 0, heads = 0, head_dim = 0, entries_per_block = 1;
  int64_t max_keys = 0;  // >= every row's num_keys
  float softmax_scale = 1.0f;
  float* scores = nullptr;  // ragged
  // Optional [rows]: scores of keys at or past a row's visible count (positions + 1) / ratio
  // may be left unwritten (the selection's mask sets them to -inf).
  const int64_t* positions = nullptr;
  int64_t ratio = 1;
};
void indexer_score_paged(const IndexerScorePagedParams& p, cudaStream_t stream);

struct IndexerSelectBatchParams {
  float* scores = nullptr;  // ragged (row_info), masked in place
  const int64_t* row_info = nullptr;
  int64_t rows = 0, max_keys = 0;
  const int64_t* positions = nullptr;  // [rows]
  int64_t ratio = 1;
  // Level 1: candidates_out in the scores' layout (may alias nothing else).
  uint8_t* candidates_out = nullptr;
  int64_t candidate_topk_blocks = 0, candidate_block_size = 1;
  // Level 2 (ignored with candidates_out): per row at cand_begin.
  const uint8_t* candidates_in = nullptr;
  int64_t top_k = 0;
  int64_t* ids = nullptr;     // [rows, top_k] ascending, -1 padding
  int64_t* counts = nullptr;  // [rows]
};
void indexer_select_batch(const IndexerSelectBatchParams& p, cudaStream_t stream);

}  // namespace deepinfer::ops::cuda
