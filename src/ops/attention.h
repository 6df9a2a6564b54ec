// sink_attention: shared-KV (K = V) attention with a per-head learnable sink, over
// an explicit per-query entry list (sliding window + selected compressed entries).
// For query t and head h: logits_j = scale * q[t,h] . kv[e_j]; the sink joins the
// softmax as one extra logit with no value, so it only enlarges the denominator and
// a query with no entries still gets a finite (zero) output.
//
// Two precisions (SinkAttentionParams::act, the model's --activations):
//   kF32: the exact mode: fp32 inputs, the oracle sums in double.
//   kBF16: the tensor-core mode, after HF's bf16 run (MODEL_V41.md §3.6: QK and PV in
//     bf16, the softmax in fp32, probabilities cast to bf16 before PV):
//       q and the entries rounded to bf16 (the model's entries are FP8 / FP4
//         fake-quantized, so exact already), so every product is exact;
//       y_j = fp32(q . k_j) * log2_scale, y_s = sink * log2(e)   (base-2 logits);
//       M = ceil(max(y_s, y_j)): an INTEGER max, so p_j = bf16(2^(y_j - M)) is the same
//         value whichever running max an online softmax used (rescaling by a power of two
//         commutes with rounding to bf16), and a tiled kernel rounds what the oracle rounds;
//       D = 2^(y_s - M) + sum_j 2^(y_j - M) (fp32 values, not rounded);
//       out = (sum_j p_j k_j) / D.
//     Only the fp32 summation orders differ between the CPU and a kernel (and, rarely,
//     a p_j next to a bf16 rounding boundary). HF rounds the logits themselves to bf16
//     and the normalized probabilities; this mode keeps fp32 logits (more accurate) and
//     rounds the unnormalized ones, the form an online softmax can reproduce.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/linear.h"

namespace deepinfer::ops {

struct SinkAttentionParams {
  const float* q = nullptr;      // [n, heads, dim]
  const float* kv = nullptr;     // [num_entries, dim]
  const int64_t* offsets = nullptr;  // [n + 1]: entries of query t are ids[offsets[t] : offsets[t+1]]
  const int64_t* ids = nullptr;      // indices into kv
  const float* sink = nullptr;   // [heads]
  float scale = 1.0f;
  float* out = nullptr;          // [n, heads, dim]
  int64_t n = 0, heads = 0, dim = 0;
  Activations act = Activations::kF32;  // kBF16: the bf16 mode above
  // CUDA only (the CPU ignores it): kernels::SinkAttentionArgs::path. 0 = one kernel and
  // one order for every n (batch-invariant); 1 = the small-batch kernel at small n (the
  // model outside its batch-invariant mode); 2 = the small-batch kernel at every n.
  int gpu_path = 0;
  // CUDA only, with the small-batch kernel (kernels::SinkAttentionArgs::rope_dim): q given
  // unrotated, RoPE applied to it and the inverse to the output inside the kernel. The CPU
  // op does not take it (rope_dim must be 0 there).
  const int64_t* positions = nullptr;
  const float* inv_freq = nullptr;
  int64_t rope_dim = 0;
  float rope_factor = 1.0f;
  // Rows of kv that ids may name; 0 = unknown. The GPU's bf16 mode uses it to round a
  // shared pool to bf16 once (kernels::SinkAttentionArgs::kv_rows); results do not depend on it.
  int64_t kv_rows = 0;
};

// log2(e) as the bf16 mode uses it (fp32), and the fp32 factor that turns q . k into a
// base-2 logit: one rounding of scale * log2(e), computed the same way for every device.
constexpr float kAttnLog2e = 1.44269504088896340736f;
inline float attention_log2_scale(float scale) { return float(double(scale) * 1.44269504088896340736); }

namespace cpu {
void sink_attention(const SinkAttentionParams& p);
}

}  // namespace deepinfer::ops
