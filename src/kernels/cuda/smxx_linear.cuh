// y[n, num_rows] = x[n, cols] . W[row0 : row0 + num_rows, :]^T with W in any
// checkpoint format (F32, BF16, F16, FP8 e4m3, packed FP4 e2m1; optional e8m0 or
// fp32 block scales), dequantized in the kernel, fp32 activations and fp32
// accumulation.
//
// Three paths:
//   gemv  (n <= 8, 16-byte aligned rows, power-of-two scale blocks): memory-bound
//         decode path. Each warp takes 16-byte weight vectors of four rows (streamed
//         from global memory, or from a shared-memory ring that TMA bulk copies fill:
//         GemvKind below), decodes them in registers (hardware e4m3->f16 conversion,
//         a PRMT table for e2m1) and applies the block scale once per vector.
//   mma   (n > 8; FP8 / FP4 with e8m0 scales or BF16; K % 32 == 0): tensor cores
//         (mma.sync bf16) on exactly-dequantized weights and x split into three
//         bf16 terms, so the result keeps fp32 accuracy (smxx_linear_mma.cuh).
//   tiled (everything else): a shared-memory SIMT GEMM with fp32 FMAs, weights
//         dequantized while staged. Correct for every format and shape.
// Under bf16_x every path rounds x to bf16 first; the large-n bf16 GEMM through
// cuBLASLt (ops/cuda/linear.cu) uses the two helpers at the end of this file.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/smxx_types.h"

namespace deepinfer::kernels {

enum class LinearPath : int { kAuto, kGemv, kMma, kTiled };

struct LinearArgs {
  const float* x = nullptr;  // [n, w.cols]
  float* y = nullptr;        // [n, num_rows]
  int64_t n = 0;
  WeightArgs w;
  int64_t row0 = 0, num_rows = 0;  // 0 <= row0, row0 + num_rows <= w.rows
  LinearPath path = LinearPath::kAuto;
  // Gemv path only: x rows x_stride floats apart (0: w.cols), and grouped inputs:
  // output rows [g * x_group_rows, (g + 1) * x_group_rows) read x + g * x_group_step
  // (0: one group). One launch then runs a block-diagonal projection such as V4.1's
  // grouped wo_a (8 groups of heads, each through its own rows) without copying
  // each group's slice of x out first. x_group_rows a multiple of 4 (a warp's rows).
  int64_t x_stride = 0, x_group_rows = 0, x_group_step = 0;
  // Activations::kBF16 (ops/linear.h): x rounded to bf16 (RNE) as it is read. gemv and
  // tiled round on load; mma then needs one bf16 MMA per tile instead of three.
  bool bf16_x = false;
  // The caller needs one kernel for every n (LinearMode::kInvariant: a token's bits must not
  // depend on the batch). GemvKind::kAuto takes the tensor-core gemv from 2 tokens only and
  // the stream kernel at 1, two sum orders, so it keeps the stream kernel for such calls.
  bool one_kernel = false;
};
cudaError_t linear(const LinearArgs& a, cudaStream_t stream);

// Several gemv products in one launch (the gemv path's bulk kernel, smxx_linear_gemv.cuh):
// count (1 .. kGemvMaxMulti) calls with the same weight format, n and bf16_x, each
// gemv-eligible (path kAuto or kGemv); each output is bitwise what kernels::linear gives
// for that call alone. Where the bulk kernel cannot take them (GemvKind::kStream, a tile
// over its stage size) they run one after the other. cudaErrorInvalidValue otherwise.
constexpr int kGemvMaxMulti = 4;
cudaError_t linear_gemv_multi(const LinearArgs* calls, int count, cudaStream_t stream);

// Which gemv kernel runs (process-wide; for A/B measurements and tests). kStream: the
// former kernel (threads streaming their rows' vectors from global memory, one block per
// 4 .. 32 rows; several calls run one after another). kBulk: the bulk kernel (TMA copies
// of whole-row tiles into a shared-memory ring) only; a call it cannot take fails with
// cudaErrorInvalidValue. kPersist: the persistent kernel (one wave of blocks, each
// streaming a contiguous range of row tiles with its next steps' loads in flight) for
// 1 .. 4 tokens, single or several calls per launch; at 5 .. 8 tokens what kAuto0 runs.
// kAuto0: the policy before the persistent kernel (the bulk kernel for several calls and
// for 5 .. 8 tokens, the former one for a single call of 1 .. 4 tokens or a tile over the
// bulk kernel's stage). kAuto (the default): kAuto0, but the persistent kernel for several
// FP8 calls of 3 .. 4 tokens (where it measured faster, H200; bench/flash/NOTES.md 19),
// and the tensor-core kernel (below) for FP8 calls under bf16_x from 2 tokens unless
// LinearArgs::one_kernel (3.6-5.7x the stream kernel at 8 tokens, 0.9-1.1x at 1: NOTES 26),
// and at one token the x-in-shared-memory kernel (kXs, same bits) for a single FP8 call of
// <= 4096 columns and >= 8 rows per block (1.04-1.21x there: NOTES 27).
// Every kernel above but the tensor-core one gives the same bits. kTensor: FP8 e4m3 calls
// (e8m0 or no scales) under bf16_x take the tensor-core kernel at every n
// (smxx_linear_gemv_tc.cu: mma.sync bf16 on exactly decoded weights, fp32 sums in another
// order, checked against the CPU oracle; batch-invariant per token); every other call
// runs what kAuto0 runs.
// kXs (A/B): every FP8 e4m3 call at one token that it can take runs the kernel with x staged
// once per block in shared memory (gemv_xs_kernel, smxx_linear_gemv.cuh), same bits as
// kStream; every other call runs what kAuto0 runs (bench/flash/NOTES.md 27).
// kTmap (opt-in; bench/flash/NOTES.md 38): a single FP8 e4m3 call at one token under bf16_x
// (e8m0 blocks of >= 16 x 16 or no scales) takes the kernel fed by 2-D tensor-map TMA
// (smxx_linear_gemv_tmap.cu: one CTA per SM, a ring of 32 KB stages, mma.sync bf16 on exactly
// decoded weights, K split over thread-block clusters; fp32 sums in another order than the
// SIMT kernels, checked against the CPU oracle); every other call runs what kAuto runs.
enum class GemvKind : int { kAuto, kStream, kBulk, kPersist, kAuto0, kTensor, kXs, kTmap };
void gemv_set_kind(GemvKind k);
GemvKind gemv_kind();
// Programmatic dependent launch for the gemv kernels (process-wide, off by default): each
// gemv launch may start while the kernel before it drains (prefetching its first weights;
// x is read after griddepcontrol.wait), and the small kernels that precede gemvs signal
// early (pdl_trigger). Same values either way.
// The persistent kernel's ring of loads in flight per thread (depth 2 or 3: two steps of
// one 16-byte vector per row in registers; 4, 5: four slots in shared memory filled by
// cp.async; >= 6: six slots at one token, four at more; <= 0: the default, 4) and at most
// blocks_per_sm resident blocks per SM in its grid (0: as many as fit). For measurements
// and tests (flash_layers --gemv-persist).
void gemv_set_persist(int depth, int blocks_per_sm);
int gemv_persist_depth();
int gemv_persist_blocks();
void gemv_set_pdl(bool on);
bool gemv_pdl();
// Tests only: at most this many blocks per bulk launch (0: no cap, the default), so
// each block loops over many tiles and its ring of stages wraps many times.
void gemv_set_bulk_grid_cap(int blocks);
int gemv_bulk_grid_cap();
// This host thread's bulk launches keep at most blocks_per_sm resident blocks per SM (0:
// as many as fit, the default). The model sets it around a concurrent branch's linears
// (CudaModelOptions::branch_bulk_per_sm), so the branch leaves room on every SM for the
// critical path's blocks; the tiles and their sums are the same (more tiles per block).
void gemv_set_bulk_blocks_per_sm(int blocks_per_sm);
int gemv_bulk_blocks_per_sm();

// Whether the gemv / mma paths can take these arguments (format, alignment, block layout).
bool linear_gemv_eligible(const LinearArgs& a);
bool linear_mma_eligible(const LinearArgs& a);
// Whether GemvKind::kTensor runs the tensor-core kernel for a (gemv-eligible, e4m3 with
// e8m0 or no scales, bf16_x, x_group_rows a multiple of 16); else it runs kAuto0's kernel.
bool linear_gemv_tc_eligible(const LinearArgs& a);
// Whether GemvKind::kXs runs the x-in-shared-memory kernel for a call (one token,
// e4m3, x row within 48 KB, each block's rows in one input group; smxx_linear_gemv.cuh).
bool linear_gemv_xs_eligible(const LinearArgs& a);
// Whether GemvKind::kTmap runs the tensor-map kernel for a call (one token, bf16_x, e4m3 with
// e8m0 blocks >= 16 x 16 on 16-aligned rows or no scales, cols % 16 == 0, groups of rows a
// multiple of 64, the driver's tensor-map encoder available, a plan that fits shared memory).
bool linear_gemv_tmap_eligible(const LinearArgs& a);
// kAuto's own use of the tensor-map kernel (NOTES 41, run 33): a single call of at least this many
// weight bytes (wq_b, wo_a, wo_b; the 12 MB shared-expert weights measured slower than kXs there)
// at one token under bf16 x, outside the batch-invariant mode, runs the slim consumer on a
// 4-stage ring (a fixed configuration, whatever the kTmap A/B settings say).
constexpr int64_t kGemvTmapAutoMinBytes = int64_t(30) << 20;
bool gemv_tmap_auto_takes(const LinearArgs& a);
// kAuto's pairs (NOTES 47): whether linear_gemv_multi runs calls[0..count) as one launch of the
// slim tensor-map kernel (two calls of one x at one token under bf16 x, outside the batch-invariant
// mode, each weight's tiles as its own single launch under the pair's split; the mode in
// smxx_linear_tmap.h, gemv_set_tmap_pair). By default pairs of at most this many weight bytes
// (wq_a + wkv, 9.2 MB: the layers at batch 1 -0.7%; the shared expert's w1 + w3, 23.6 MB, runs on the
// concurrent branch beside the routed experts and keeps the bulk kernel there).
constexpr int64_t kGemvTmapPairMaxBytes = int64_t(16) << 20;
bool gemv_tmap_pair_takes(const LinearArgs* calls, int count);
// The tensor-map kernel's ring depth (stages of 32 KB, 2 .. 8; <= 0: the default, 6) and its
// ring-only probe (consumers wait and release each stage, no arithmetic, y not written: the
// copy engine's fill rate; flash_layers --gemv-variants tmapprobe). Process-wide, for A/B.
void gemv_set_tmap(int stages, bool probe);
int gemv_tmap_stages();
bool gemv_tmap_probe();
// The tensor-map kernel's split of a call (rows per CTA tile, CTAs per cluster, clusters,
// stages); tr = 0 when it does not take the call.
void gemv_tmap_plan(const LinearArgs& a, int* tr, int* cs, int* nclusters, int* stages);

// For the cuBLASLt path: x [n, cols] fp32 -> bf16 (RNE), and rows row0 .. row0 + rows
// of an e4m3 / e2m1 weight (e8m0 or no scales) dequantized exactly into bf16 [rows, cols].
cudaError_t round_rows_bf16(const float* x, uint16_t* out, int64_t count, cudaStream_t stream);
cudaError_t dequant_weight_bf16(const WeightArgs& w, int64_t row0, int64_t rows, uint16_t* out, cudaStream_t stream);

}  // namespace deepinfer::kernels
