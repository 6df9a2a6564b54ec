// Writes a random V4.1 checkpoint (transformers names, fp32 or bf16) for a given
// flat config JSON, so model properties can be tested on shapes the goldens do not
// cover (long sequences that wrap the window, binding candidate top-k, ...).
#pragma once

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "common/numeric.h"
#include "io/safetensors.h"
#include "model/config.h"

namespace deepinfer::testing {

class RandomCheckpointWriter {
 public:
  explicit RandomCheckpointWriter(uint32_t seed) : rng_(seed) {}

  void add(const std::string& name, std::vector<int64_t> shape, float mean, float stddev, bool bf16 = false) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    std::normal_distribution<float> dist(mean, stddev);
    TensorToWrite t{name, bf16 ? DType::BF16 : DType::F32, shape, {}};
    t.bytes.resize(n * (bf16 ? 2 : 4));
    for (int64_t i = 0; i < n; ++i) {
      float v = dist(rng_);
      if (bf16) {
        uint16_t b = float_to_bf16(v);
        std::memcpy(t.bytes.data() + 2 * i, &b, 2);
      } else {
        std::memcpy(t.bytes.data() + 4 * i, &v, 4);
      }
    }
    tensors_.push_back(std::move(t));
  }

  // All tensors of the text model for `c` (no engram).
  void add_model(const ModelConfig& c) {
    const int64_t d = c.hidden_size, hd = c.head_dim, h = c.num_attention_heads;
    const float s_in = 1.0f / std::sqrt(float(d));
    add("model.embed.weight", {c.vocab_size, d}, 0, 1);
    add("lm_head.weight", {c.vocab_size, d}, 0, s_in);
    add("model.norm.weight", {d}, 1, 0.1f);
    const int64_t mix = (2 + c.hc_mult) * c.hc_mult;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l);
      add(p + ".attn_norm.weight", {d}, 1, 0.1f);
      add(p + ".ffn_norm.weight", {d}, 1, 0.1f);
      for (const char* site : {".hc_attn", ".hc_ffn"}) {
        add(p + site + "_fn", {mix, c.hc_mult * d}, 0, 0.05f);
        add(p + site + "_base", {mix}, 0, 0.5f);
        add(p + site + "_scale", {3}, 1, 0.2f);
      }
      const std::string a = p + ".attn";
      add(a + ".wq_a.weight", {c.q_lora_rank, d}, 0, s_in);
      add(a + ".q_norm.weight", {c.q_lora_rank}, 1, 0.1f);
      add(a + ".wq_b.weight", {h * hd, c.q_lora_rank}, 0, 1.0f / std::sqrt(float(c.q_lora_rank)));
      add(a + ".wkv.weight", {hd, d}, 0, s_in);
      add(a + ".kv_norm.weight", {hd}, 1, 0.1f);
      add(a + ".wo_a.weight", {c.o_groups * c.o_lora_rank, h * hd / c.o_groups}, 0, 0.05f);
      add(a + ".wo_b.weight", {d, c.o_groups * c.o_lora_rank}, 0, 0.1f);
      add(a + ".attn_sink", {h}, 0, 1);
      if (c.is_kv_source(l)) {
        add(a + ".compressor.wkv.weight", {hd, d}, 0, s_in);
        if (c.compress_ratios[l] > 1) add(a + ".compressor.wgate.weight", {hd, d}, 0, s_in);
        add(a + ".compressor.norm.weight", {hd}, 1, 0.1f);
        if (c.is_index_source(l)) {
          add(a + ".indexer.wk.weight", {c.index_head_dim, hd}, 0, 1.0f / std::sqrt(float(hd)));
          add(a + ".indexer.k_norm.weight", {c.index_head_dim}, 1, 0.1f);
        }
      }
      if (c.is_index_source(l)) {
        add(a + ".indexer.wq_b.weight", {c.index_n_heads * c.index_head_dim, c.q_lora_rank}, 0,
            1.0f / std::sqrt(float(c.q_lora_rank)));
        add(a + ".indexer.weights_proj.weight", {c.index_n_heads, d}, 0, s_in);
      }
      add(p + ".ffn.gate.weight", {c.n_routed_experts, d}, 0, s_in);
      add(p + ".ffn.gate.bias", {c.n_routed_experts}, 0, 0.1f);
      auto expert = [&](const std::string& e) {
        add(e + ".w1.weight", {c.moe_intermediate_size, d}, 0, s_in);
        add(e + ".w3.weight", {c.moe_intermediate_size, d}, 0, s_in);
        add(e + ".w2.weight", {d, c.moe_intermediate_size}, 0, 1.0f / std::sqrt(float(c.moe_intermediate_size)));
      };
      for (int64_t e = 0; e < c.n_routed_experts; ++e) expert(p + ".ffn.experts." + std::to_string(e));
      expert(p + ".ffn.shared_experts");
    }
  }

  void write(const std::string& dir, const nlohmann::json& config) {
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/config.json") << config.dump(2);
    write_safetensors(dir + "/model.safetensors", tensors_);
  }

 private:
  std::mt19937 rng_;
  std::vector<TensorToWrite> tensors_;
};

}  // namespace deepinfer::testing
