// Sink attention over an explicit per-query entry list (CSR), shared K = V
// (MODEL_V41.md §3): out[t, h] = sum_j p_j kv[ids_j], p = softmax over
// {scale * q[t, h] . kv[ids_j]} plus one sink logit per head that has no value.
//
// Flash-decoding for one shared KV head (MQA): a block takes one query, a group
// of its heads and one of kAttnSplits slices of its entry list; it stages the
// slice's entries in shared memory once for all heads of the group and keeps an
// fp32 online softmax per head. The kAttnSplits blocks of a (query, head group)
// form a thread-block cluster (sm_90) and merge their partial (max, sum, acc)
// through distributed shared memory in a fixed order. The slices depend only on
// the query's own entry count, and every head runs the same arithmetic whatever
// the group size, so a query's output is bitwise the same alone or in any batch.
//
// The bf16 mode (SinkAttentionArgs::bf16) runs a tensor-core kernel instead: one block
// per query and 64 heads, the heads as the M of mma.sync, the entries in tiles of 32 in
// list order (smxx_attention_tc.cu); where the caller names the pool size (kv_rows) and
// many queries share it (a prefill chunk), the same chains on wgmma from a bf16 copy of
// the pool (smxx_attention_wgmma.cu: bitwise the mma.sync kernel's output, 2x faster at
// the 8K prefill chunk).
//
// Files: smxx_attention.cu (sink_attention: checks and the choice of kernel), one file
// per kernel family (smxx_attention_simt.cu: the kernel above; _tc.cu, _wgmma.cu,
// _small.cu) and smxx_attention_common.cuh (their shared helpers and launchers).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace deepinfer::kernels {

constexpr int64_t kAttnMaxDim = 512;  // V4.1 head_dim; a lane keeps 16 channels of a row
constexpr int kAttnSplits = 8;        // entry slices per query = cluster size
constexpr float kAttnLog2eDev = 1.44269504088896340736f;  // = ops::kAttnLog2e (the bf16 mode's log2(e))

struct SinkAttentionArgs {
  const float* q = nullptr;          // [n, heads, dim]
  const float* kv = nullptr;         // [num_entries, dim]
  const int64_t* offsets = nullptr;  // [n + 1], non-decreasing
  const int64_t* ids = nullptr;      // [offsets[n]] indices into kv
  const float* sink = nullptr;       // [heads]
  float scale = 1.0f;
  float* out = nullptr;              // [n, heads, dim]
  int64_t n = 0, heads = 0, dim = 0;  // dim <= kAttnMaxDim
  // The bf16 mode (ops/attention.h, Activations::kBF16): q and the entries rounded to
  // bf16, base-2 logits q . k * log2_scale with an integer max, probabilities rounded to
  // bf16 before PV; one tensor-core kernel for every n. log2_scale replaces scale there.
  bool bf16 = false;
  float log2_scale = 0.0f;
  // 0: one order for every n (the batch-invariant mode): the SIMT kernel (f32) or the
  //    tensor-core kernel (bf16), as above;
  // 1: by n: up to attention_small_max_n(bf16) queries the small-batch kernel
  //    (smxx_attention_small.cu: a query's entries over 8 x 8 warps, both precisions),
  //    else as 0;
  // 2: the small-batch kernel at every n (A/B tests and benchmarks).
  // Each kernel alone is batch-invariant; 1 is not (the kernels sum in other orders). The
  // small kernel's former version (NOTES section 13, once path 3) is test code now
  // (tests/ops_cuda/former_kernels.cu).
  int path = 0;
  // RoPE folded in, the small-batch kernel only (cudaErrorInvalidValue on the others or
  // with an odd dim): q is taken unrotated, the last rope_dim channels of each head
  // rotated by positions[t] as kernels::rope does, and the output rotated back: bitwise
  // rope(q) -> attention -> inverse rope(out), two launches fewer. rope_dim = 0: none.
  const int64_t* positions = nullptr;  // [n]
  const float* inv_freq = nullptr;     // [rope_dim / 2]
  int64_t rope_dim = 0;                // even, <= dim
  float rope_factor = 1.0f;            // RopeArgs::attention_factor (both directions)
  // Rows of kv that ids may name (0 = unknown). Where many queries share few rows (a
  // prefill chunk: ~640 entries per query over ~12K pool rows), the bf16 mode rounds
  // the kv_rows rows to bf16 once and a wgmma kernel gathers half the bytes
  // (smxx_attention_wgmma.cu); unknown keeps the mma.sync kernel.
  int64_t kv_rows = 0;
};
// Path 1 takes the small-batch kernel up to this many queries (outside the batch-invariant
// mode only: the model never takes path 1 there, so this changes no invariant-mode bits).
// A query is ceil(heads / 5) clusters of 8 one-SM blocks (13 at 64 heads; 5 heads x 8
// slices per cluster), of which the H200 holds 15 at once (attention_small_max_clusters),
// so n queries run in ceil(13 n / 15) waves. The 4-head kernel (16 clusters, NOTES 23) at
// 640 entries, us: n = 1 / 2 / 4 / 8 f32 23.7 / 34.5 / 56.1 / 99, bf16 25.2 / 36.8 / 59.9 /
// 106, against the SIMT kernel's 39.5 / 58.3 / 33.4 / 64.6 (f32) and the mma.sync kernel's
// 119-129 up to n = 16 (bf16). f32: 2 (one wave fewer with 5 heads: 2 instead of 3 at
// n = 2). bf16 stays 4: n = 5..8 would win at 640 entries (106 vs 126 measured) but the
// mma.sync kernel at the ratio-0 layers' 128 entries (4 tiles instead of 20) was not
// measured, and the small kernel there costs ~65 us at n = 8 (NOTES 25).
constexpr int64_t attention_small_max_n(bool bf16) { return bf16 ? 4 : 2; }
cudaError_t sink_attention(const SinkAttentionArgs& a, cudaStream_t stream);
// cudaOccupancyMaxActiveClusters of the small-batch kernel at its launch shape (its
// registers, shared memory and cluster size), -1 on error: its clusters of 8 one-SM blocks
// need 8 free SMs of one GPC, so fewer than n x ceil(heads / heads per block) of them means
// a second wave (printed by the benchmark).
int attention_small_max_clusters(bool bf16);
// Heads per block (= per cluster) of the small-batch kernel: 5.
int attention_small_heads_per_block();

// Which bf16-mode kernel sink_attention runs: kAuto picks by shape (the wgmma kernel
// where a bf16 copy of kv pays, see kv_rows), kMma always the one-block mma.sync kernel,
// kWgmma the wgmma kernel whenever kv_rows is known, kWgmmaOverlap its variant that runs
// the next tile's QK under the current tile's softmax. All compute the same chains in the
// same order (op cases sink_attention_bf16_wgmma*_vs_mma compare the bits): for A/B runs.
enum class AttnBf16Path { kAuto, kMma, kWgmma, kWgmmaOverlap };
void sink_attention_set_bf16_path(AttnBf16Path p);
AttnBf16Path sink_attention_bf16_path();

}  // namespace deepinfer::kernels
