// sink_attention: shared-KV (K = V) attention with a per-head learnable sink, over
// an explicit per-query entry list (sliding window + selected compressed entries).
// For query t and head h: logits_j = scale * q[t,h] . kv[e_j]; the sink joins the
// softmax as one extra logit with no value, so it only enlarges the denominator and
// a query with no entries still gets a finite (zero) output.
#pragma once

#include <cstdint>

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
};

namespace cpu {
void sink_attention(const SinkAttentionParams& p);
}

}  // namespace deepinfer::ops
