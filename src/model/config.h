// DeepSeek-V4.1 text-model configuration: parsed from config.json (the released
// composite form with `text_config`, or the flat `deepseek_v41_text` form that
// transformers' save_pretrained writes), with every default derived exactly as the
// reference configuration class derives it, then validated. See MODEL_V41.md §1.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace deepinfer {

struct RopeParams {
  double theta = 10000.0;
  // YaRN (only on the compress rope of V4.1): factor <= 1 or type "default" means off.
  // When on, the frequency blend follows transformers' `_compute_yarn_parameters` with
  // the correction range always truncated (floor/ceil): V4.1 nests its rope dicts, so
  // the `truncate` lookup on the outer dict never finds a value.
  bool yarn = false;
  double factor = 1.0;
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  int64_t original_max_position_embeddings = 0;
  // Multiplies cos and sin. 1.0 for the default rope and for the V4.1 compress rope
  // derived from `rope_scaling`; a nested `rope_parameters` dict without it gets
  // YaRN's mscale (0.1 ln(factor) + 1, or the mscale / mscale_all_dim ratio).
  double attention_factor = 1.0;
};

// Weight storage as declared by quantization_config (informational; the loader
// trusts the tensors' own dtypes and validates them against the expected shapes).
struct QuantConfig {
  bool present = false;
  std::string quant_method;             // "fp8"
  int64_t weight_block_rows = 128;      // weight_block_size[0]
  int64_t weight_block_cols = 128;      // weight_block_size[1]
  std::string scale_fmt;                // "ue8m0" or "float" (transformers' default)
  std::string expert_dtype;             // "fp4" or "fp8" (transformers' default)
  std::string activation_scheme;        // "dynamic" or "static"
};

struct ModelConfig {
  std::string model_type;  // "deepseek_v41_text" after unwrapping
  int64_t vocab_size = 129280;
  int64_t hidden_size = 5120;
  int64_t num_hidden_layers = 40;
  int64_t num_attention_heads = 64;
  int64_t num_key_value_heads = 1;
  int64_t head_dim = 512;
  int64_t qk_rope_head_dim = 64;
  int64_t q_lora_rank = 1280;
  int64_t o_groups = 8;
  int64_t o_lora_rank = 1024;
  int64_t sliding_window = 128;
  int64_t max_position_embeddings = 1048576;
  RopeParams main_rope;      // ratio-0 layers and DSpark
  RopeParams compress_rope;  // every ratio > 0 layer

  // Per layer, num_hidden_layers entries (the draft layers' entries are dropped).
  std::vector<int64_t> compress_ratios;
  std::vector<int64_t> kv_source_layer_ids;
  std::vector<int64_t> index_source_layer_ids;
  int64_t candidate_source_layer_id = -1;  // < 0 disables the candidate level
  int64_t candidate_topk_blocks = 2048;
  int64_t candidate_block_size = 8;
  int64_t index_n_heads = 32;
  int64_t index_head_dim = 128;
  int64_t index_topk = 512;

  int64_t moe_intermediate_size = 2304;
  int64_t n_routed_experts = 384;
  int64_t num_experts_per_tok = 6;
  int64_t n_shared_experts = 1;
  std::string scoring_func = "sqrtsoftplus";
  std::string topk_method = "noaux_tc";
  double gate_temp = 1.0;
  bool norm_topk_prob = true;
  double routed_scaling_factor = 1.5;
  double swiglu_limit = 10.0;
  std::string hidden_act = "silu";

  int64_t hc_mult = 4;
  int64_t hc_sinkhorn_iters = 20;
  double hc_eps = 1e-6;
  double rms_norm_eps = 1e-20;

  std::vector<int64_t> engram_layer_ids;
  std::vector<int64_t> engram_num_embeddings;
  int64_t engram_vocab_size = 16000000;
  int64_t engram_max_ngram_size = 4;
  int64_t engram_n_heads = 8;
  int64_t engram_head_dim = 256;
  int64_t engram_pad_id = 2;
  int64_t engram_compressed_vocab_size = 99092;

  int64_t num_nextn_predict_layers = 3;
  int64_t dspark_block_size = 5;
  int64_t dspark_noise_token_id = 128799;
  std::vector<int64_t> dspark_target_layer_ids;
  int64_t dspark_markov_rank = 256;
  int64_t dspark_n_routed_experts = 128;
  int64_t dspark_num_experts_per_tok = 3;

  int64_t bos_token_id = 0;
  int64_t eos_token_id = 1;               // the first of eos_token_ids
  std::vector<int64_t> eos_token_ids{1};  // config.json may give a list
  int64_t pad_token_id = -1;              // -1: none
  int64_t image_token_id = -1;            // composite configs only (default 129264)
  bool tie_word_embeddings = false;
  QuantConfig quant;

  // Derived helpers (valid after validation).
  bool is_kv_source(int64_t layer) const;
  bool is_index_source(int64_t layer) const;
  bool is_engram_layer(int64_t layer) const;
  // The nearest KV source <= layer (-1 if none); the nearest index source <= layer.
  int64_t kv_source_for(int64_t layer) const;
  int64_t index_source_for(int64_t layer) const;
  // 0 for layers out of range (the draft layers are sliding-window only).
  int64_t compress_ratio(int64_t layer) const;
  // The compress rope for ratio > 0 layers, the main rope otherwise.
  const RopeParams& rope_for(int64_t layer) const;
  // Position of `layer` in engram_layer_ids (its table and hash seed), or -1.
  int64_t engram_slot(int64_t layer) const;
  bool is_candidate_source(int64_t layer) const;
  // An index source after the candidate source scores only inside its candidate mask.
  bool uses_candidate_mask(int64_t layer) const;
};

// Parses and validates config.json text. Throws InputError naming the field and
// the rule it breaks. `origin` labels messages (usually the file path).
ModelConfig parse_model_config(const std::string& json_text, const std::string& origin);
ModelConfig load_model_config(const std::string& path);

}  // namespace deepinfer
