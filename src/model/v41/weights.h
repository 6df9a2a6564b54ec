// Typed weights of the DeepSeek-V4.1 text model, bound from a checkpoint and
// validated at load (STYLE.md 2.7): after binding, code refers to struct fields,
// never to tensor names. Both naming schemes are accepted: the released DeepSeek
// names (`embed.weight`, `layers.N.attn.wq_a.weight` + `.scale`, `head.weight`) and
// the transformers names (`model.` prefix, `lm_head.weight`). A missing or
// misshapen tensor is an InputError naming the key and the expected shape.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/config.h"
#include "ops/linear.h"

namespace deepinfer::v41 {

using ops::WeightRef;

struct AttentionWeights {
  WeightRef wq_a;             // [q_lora_rank, hidden]
  std::vector<float> q_norm;  // [q_lora_rank]
  WeightRef wq_b;             // [heads * head_dim, q_lora_rank]
  WeightRef wkv;              // [head_dim, hidden]
  std::vector<float> kv_norm;  // [head_dim]
  WeightRef wo_a;             // [o_groups * o_lora_rank, heads * head_dim / o_groups]
  WeightRef wo_b;             // [hidden, o_groups * o_lora_rank]
  std::vector<float> attn_sink;  // [heads]
  // KV sources only.
  WeightRef compressor_wkv;    // [head_dim, hidden]
  WeightRef compressor_wgate;  // [head_dim, hidden], ratio > 1 only
  std::vector<float> compressor_norm;  // [head_dim]
  WeightRef indexer_wk;        // [index_head_dim, head_dim]
  std::vector<float> indexer_k_norm;  // [index_head_dim]
  // Index sources only.
  WeightRef indexer_wq_b;          // [index_heads * index_head_dim, q_lora_rank]
  WeightRef indexer_weights_proj;  // [index_heads, hidden]
};

struct ExpertWeights {
  WeightRef w1, w3;  // [inter, hidden]
  WeightRef w2;      // [hidden, inter]
};

struct MoeWeights {
  WeightRef gate;                 // [experts, hidden]
  std::vector<float> gate_bias;   // [experts]
  std::vector<ExpertWeights> experts;
  ExpertWeights shared;
};

struct HcSiteWeights {
  std::vector<float> fn;     // [(2 + hc) * hc, hc * hidden]
  std::vector<float> base;   // [(2 + hc) * hc]
  std::vector<float> scale;  // [3]
};

struct EngramWeights {
  WeightRef table;  // [rows, engram_head_dim] (F8_E4M3 + 1x32 ue8m0 scales, or float)
  WeightRef wkv;    // [hidden * (hc + 1), n_cols * engram_head_dim]
  std::vector<float> gate_weight;  // [hc, hidden] = q_weight * k_weight
};

struct LayerWeights {
  std::vector<float> attn_norm, ffn_norm;  // [hidden]
  HcSiteWeights hc_attn, hc_ffn;
  AttentionWeights attn;
  MoeWeights ffn;
  bool has_engram = false;
  EngramWeights engram;
};

struct ModelWeights {
  WeightRef embed;  // [vocab, hidden]
  WeightRef head;   // [vocab, hidden]
  std::vector<float> norm;  // [hidden]
  std::vector<LayerWeights> layers;
};

// Binds every tensor the config implies; the checkpoint must outlive the result.
ModelWeights bind_weights(const ModelConfig& cfg, const Checkpoint& ckpt);

}  // namespace deepinfer::v41
