#include "model/config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "common/check.h"

namespace deepinfer {
namespace {

using Json = nlohmann::json;

// The released DeepSeek-V4.1-Flash config.json (MODEL_V41.md §1.1), vision part trimmed.
Json released_composite() {
  Json ratios = Json::array({0, 0});
  for (int i = 0; i < 18; ++i) ratios.push_back(2);
  for (int i = 0; i < 20; ++i) ratios.push_back(1);
  for (int i = 0; i < 3; ++i) ratios.push_back(0);
  Json text = {
      {"model_type", "deepseek_v41_text"},
      {"vocab_size", 129280},
      {"hidden_size", 5120},
      {"num_hidden_layers", 40},
      {"num_attention_heads", 64},
      {"num_key_value_heads", 1},
      {"head_dim", 512},
      {"qk_rope_head_dim", 64},
      {"q_lora_rank", 1280},
      {"o_groups", 8},
      {"o_lora_rank", 1024},
      {"rope_theta", 10000},
      {"compress_rope_theta", 160000},
      {"rope_scaling",
       {{"rope_type", "yarn"},
        {"factor", 16},
        {"beta_fast", 32},
        {"beta_slow", 1},
        {"original_max_position_embeddings", 65536}}},
      {"max_position_embeddings", 1048576},
      {"sliding_window", 128},
      {"compress_ratios", ratios},
      {"kv_source_layer_ids", {2, 8, 14, 20}},
      {"index_source_layer_ids", {2, 8, 14, 20, 24, 28, 32, 36}},
      {"candidate_source_layer_id", 20},
      {"candidate_topk_blocks", 2048},
      {"candidate_block_size", 8},
      {"index_n_heads", 32},
      {"index_head_dim", 128},
      {"index_topk", 512},
      {"moe_intermediate_size", 2304},
      {"n_routed_experts", 384},
      {"num_experts_per_tok", 6},
      {"n_shared_experts", 1},
      {"scoring_func", "sqrtsoftplus"},
      {"topk_method", "noaux_tc"},
      {"norm_topk_prob", true},
      {"routed_scaling_factor", 1.5},
      {"swiglu_limit", 10.0},
      {"hc_mult", 4},
      {"hc_sinkhorn_iters", 20},
      {"hc_eps", 1e-6},
      {"rms_norm_eps", 1e-20},
      {"engram_layer_ids", {1, 14}},
      {"engram_num_embeddings", {384006168, 384016682}},
      {"engram_vocab_size", 16000000},
      {"engram_max_ngram_size", 4},
      {"engram_n_heads", 8},
      {"engram_head_dim", 256},
      {"engram_pad_token_id", 2},
      {"engram_compressed_vocab_size", 99092},
      {"num_nextn_predict_layers", 3},
      {"dspark_block_size", 5},
      {"dspark_noise_token_id", 128799},
      {"dspark_target_layer_ids", {37, 38, 39}},
      {"dspark_markov_rank", 256},
      {"dspark_n_routed_experts", 128},
      {"dspark_num_experts_per_tok", 3},
      {"hidden_act", "silu"},
      {"bos_token_id", 0},
      {"eos_token_id", 1},
      {"tie_word_embeddings", false},
  };
  return {
      {"architectures", {"DeepseekV41ForCausalLM"}},
      {"model_type", "deepseek_v41"},
      {"image_token_id", 129264},
      {"quantization_config",
       {{"quant_method", "fp8"},
        {"activation_scheme", "dynamic"},
        {"weight_block_size", {32, 32}},
        {"scale_fmt", "ue8m0"},
        {"expert_dtype", "fp4"}}},
      {"text_config", text},
      {"vision_config", {{"hidden_size", 1024}, {"num_hidden_layers", 32}, {"patch_size", 14}}},
  };
}

// A tiny flat config as transformers' save_pretrained writes it (nested rope
// parameters, compress_ratios including the draft entries, layer_types).
Json tiny_flat() {
  return Json::parse(R"({
    "model_type": "deepseek_v41_text",
    "architectures": ["DeepseekV41ForCausalLM"],
    "vocab_size": 512, "hidden_size": 64, "num_hidden_layers": 6,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64,
    "qk_rope_head_dim": 16, "q_lora_rank": 32, "o_groups": 2, "o_lora_rank": 16,
    "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
    "rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 64},
    "rope_parameters": {
      "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25},
      "compress": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 64,
                   "rope_theta": 160000.0, "partial_rotary_factor": 0.25, "attention_factor": 1.0}},
    "max_position_embeddings": 256, "sliding_window": 8,
    "compress_ratios": [0, 2, 2, 1, 1, 1, 0],
    "kv_source_layer_ids": [1, 3], "index_source_layer_ids": [1, 3, 5],
    "candidate_source_layer_id": 3, "candidate_topk_blocks": 4, "candidate_block_size": 2,
    "index_n_heads": 16, "index_head_dim": 32, "index_topk": 8,
    "moe_intermediate_size": 32, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "scoring_func": "sqrtsoftplus", "gate_temp": 1.0, "norm_topk_prob": true,
    "routed_scaling_factor": 1.5, "topk_method": "noaux_tc", "swiglu_limit": 10.0,
    "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-06,
    "engram_layer_ids": [], "engram_num_embeddings": [],
    "num_nextn_predict_layers": 1, "dspark_target_layer_ids": [2, 4, 5],
    "dspark_noise_token_id": 500, "dspark_n_routed_experts": 8, "dspark_num_experts_per_tok": 2,
    "hidden_act": "silu", "initializer_range": 0.02, "rms_norm_eps": 1e-20, "use_cache": true,
    "tie_word_embeddings": false, "pad_token_id": null, "bos_token_id": null, "eos_token_id": [1, 2],
    "layer_types": ["sliding_attention", "shared_compressed_attention", "sliding_attention",
                    "shared_compressed_attention", "sliding_attention", "sliding_attention"],
    "dtype": "float32", "transformers_version": "5.23.0"
  })");
}

ModelConfig parse(const Json& j) { return parse_model_config(j.dump(), "test.json"); }

// Parses `j`, expecting InputError whose message names `field`.
void expect_error(const Json& j, const std::string& field) {
  try {
    parse(j);
    ADD_FAILURE() << "no error for field " << field << " in " << j.dump().substr(0, 200);
  } catch (const InputError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("test.json: "), std::string::npos) << msg;
    EXPECT_NE(msg.find("'" + field + "'"), std::string::npos) << "expected field " << field << " in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(ModelConfig, ReleasedCompositeParses) {
  ModelConfig c = parse(released_composite());
  EXPECT_EQ(c.model_type, "deepseek_v41_text");
  EXPECT_EQ(c.vocab_size, 129280);
  EXPECT_EQ(c.hidden_size, 5120);
  EXPECT_EQ(c.num_hidden_layers, 40);
  EXPECT_EQ(c.q_lora_rank, 1280);
  EXPECT_EQ(c.index_n_heads, 32);
  EXPECT_EQ(c.n_routed_experts, 384);
  EXPECT_EQ(c.moe_intermediate_size, 2304);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-20);
  EXPECT_DOUBLE_EQ(c.gate_temp, 1.0);
  ASSERT_EQ(c.compress_ratios.size(), 40u);
  EXPECT_EQ(c.compress_ratios[0], 0);
  EXPECT_EQ(c.compress_ratios[1], 0);
  EXPECT_EQ(c.compress_ratios[2], 2);
  EXPECT_EQ(c.compress_ratios[19], 2);
  EXPECT_EQ(c.compress_ratios[20], 1);
  EXPECT_EQ(c.compress_ratios[39], 1);
  EXPECT_EQ(c.kv_source_layer_ids, (std::vector<int64_t>{2, 8, 14, 20}));
  EXPECT_EQ(c.index_source_layer_ids, (std::vector<int64_t>{2, 8, 14, 20, 24, 28, 32, 36}));
  EXPECT_EQ(c.candidate_source_layer_id, 20);
  EXPECT_EQ(c.engram_layer_ids, (std::vector<int64_t>{1, 14}));
  EXPECT_EQ(c.engram_num_embeddings, (std::vector<int64_t>{384006168, 384016682}));
  EXPECT_EQ(c.engram_pad_id, 2);
  EXPECT_EQ(c.dspark_target_layer_ids, (std::vector<int64_t>{37, 38, 39}));
  EXPECT_EQ(c.num_nextn_predict_layers, 3);
  EXPECT_EQ(c.image_token_id, 129264);
  EXPECT_EQ(c.eos_token_id, 1);

  EXPECT_DOUBLE_EQ(c.main_rope.theta, 10000.0);
  EXPECT_FALSE(c.main_rope.yarn);
  EXPECT_DOUBLE_EQ(c.compress_rope.theta, 160000.0);
  EXPECT_TRUE(c.compress_rope.yarn);
  EXPECT_DOUBLE_EQ(c.compress_rope.factor, 16.0);
  EXPECT_DOUBLE_EQ(c.compress_rope.beta_fast, 32.0);
  EXPECT_DOUBLE_EQ(c.compress_rope.beta_slow, 1.0);
  EXPECT_EQ(c.compress_rope.original_max_position_embeddings, 65536);
  EXPECT_DOUBLE_EQ(c.compress_rope.attention_factor, 1.0);

  EXPECT_TRUE(c.quant.present);
  EXPECT_EQ(c.quant.quant_method, "fp8");
  EXPECT_EQ(c.quant.weight_block_rows, 32);
  EXPECT_EQ(c.quant.weight_block_cols, 32);
  EXPECT_EQ(c.quant.scale_fmt, "ue8m0");
  EXPECT_EQ(c.quant.expert_dtype, "fp4");
}

TEST(ModelConfig, ReleasedSchedule) {
  ModelConfig c = parse(released_composite());
  // MODEL_V41.md §1.2.
  EXPECT_EQ(c.kv_source_for(0), -1);
  EXPECT_EQ(c.kv_source_for(2), 2);
  EXPECT_EQ(c.kv_source_for(5), 2);
  EXPECT_EQ(c.kv_source_for(13), 8);
  EXPECT_EQ(c.kv_source_for(19), 14);
  EXPECT_EQ(c.kv_source_for(25), 20);
  EXPECT_EQ(c.kv_source_for(39), 20);
  EXPECT_EQ(c.index_source_for(1), -1);
  EXPECT_EQ(c.index_source_for(7), 2);
  EXPECT_EQ(c.index_source_for(23), 20);
  EXPECT_EQ(c.index_source_for(25), 24);
  EXPECT_EQ(c.index_source_for(31), 28);
  EXPECT_EQ(c.index_source_for(39), 36);
  EXPECT_TRUE(c.is_kv_source(14));
  EXPECT_FALSE(c.is_kv_source(24));
  EXPECT_TRUE(c.is_index_source(24));
  EXPECT_FALSE(c.is_index_source(25));
  EXPECT_TRUE(c.is_engram_layer(1));
  EXPECT_TRUE(c.is_engram_layer(14));
  EXPECT_FALSE(c.is_engram_layer(2));
  EXPECT_EQ(c.engram_slot(14), 1);
  EXPECT_EQ(c.engram_slot(3), -1);
  EXPECT_TRUE(c.is_candidate_source(20));
  EXPECT_FALSE(c.uses_candidate_mask(20));
  EXPECT_TRUE(c.uses_candidate_mask(24));
  EXPECT_FALSE(c.uses_candidate_mask(25));
  EXPECT_FALSE(c.uses_candidate_mask(14));
  EXPECT_EQ(c.compress_ratio(1), 0);
  EXPECT_EQ(c.compress_ratio(40), 0);
  EXPECT_EQ(&c.rope_for(1), &c.main_rope);
  EXPECT_EQ(&c.rope_for(2), &c.compress_rope);
}

TEST(ModelConfig, CompositeWithoutListsUsesReleasedDefaults) {
  Json j = released_composite();
  for (const char* k : {"compress_ratios", "kv_source_layer_ids", "index_source_layer_ids",
                        "candidate_source_layer_id", "dspark_target_layer_ids"}) {
    j["text_config"].erase(k);
  }
  ModelConfig c = parse(j);
  ModelConfig r = parse(released_composite());
  EXPECT_EQ(c.compress_ratios, r.compress_ratios);
  EXPECT_EQ(c.kv_source_layer_ids, r.kv_source_layer_ids);
  EXPECT_EQ(c.index_source_layer_ids, r.index_source_layer_ids);
  EXPECT_EQ(c.candidate_source_layer_id, 20);
  EXPECT_EQ(c.dspark_target_layer_ids, (std::vector<int64_t>{37, 38, 39}));
}

TEST(ModelConfig, TinyFlatSavePretrained) {
  ModelConfig c = parse(tiny_flat());
  EXPECT_EQ(c.num_hidden_layers, 6);
  EXPECT_EQ(c.compress_ratios, (std::vector<int64_t>{0, 2, 2, 1, 1, 1}));
  EXPECT_EQ(c.kv_source_for(2), 1);
  EXPECT_EQ(c.kv_source_for(5), 3);
  EXPECT_EQ(c.index_source_for(4), 3);
  EXPECT_EQ(c.index_source_for(5), 5);
  EXPECT_TRUE(c.uses_candidate_mask(5));
  EXPECT_TRUE(c.compress_rope.yarn);
  EXPECT_DOUBLE_EQ(c.compress_rope.factor, 4.0);
  EXPECT_EQ(c.compress_rope.original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(c.compress_rope.attention_factor, 1.0);
  EXPECT_FALSE(c.main_rope.yarn);
  EXPECT_EQ(c.bos_token_id, 0);  // null keeps the default
  EXPECT_EQ(c.pad_token_id, -1);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(c.eos_token_id, 1);
  EXPECT_FALSE(c.quant.present);
  EXPECT_EQ(c.image_token_id, -1);
  EXPECT_TRUE(c.engram_layer_ids.empty());
}

TEST(ModelConfig, DefaultsForEightLayers) {
  Json j = {{"model_type", "deepseek_v41_text"}, {"num_hidden_layers", 8}};
  ModelConfig c = parse(j);
  // n_slide = 2, n_enc = (8 - 2 + 1) / 2 = 3, the rest ratio 1.
  EXPECT_EQ(c.compress_ratios, (std::vector<int64_t>{0, 0, 2, 2, 2, 1, 1, 1}));
  EXPECT_EQ(c.kv_source_layer_ids, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(c.index_source_layer_ids, (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(c.candidate_source_layer_id, 5);
  EXPECT_EQ(c.dspark_target_layer_ids, (std::vector<int64_t>{4, 6, 7}));
  EXPECT_TRUE(c.engram_layer_ids.empty());
  EXPECT_FALSE(c.compress_rope.yarn);
  EXPECT_DOUBLE_EQ(c.compress_rope.theta, 160000.0);
  EXPECT_DOUBLE_EQ(c.main_rope.theta, 10000.0);
  EXPECT_EQ(c.hidden_size, 5120);
}

TEST(ModelConfig, DefaultsForSmallLayerCounts) {
  // Up to 3 layers the derived ratios are a prefix of the released schedule, so the
  // reference picks the released KV sources [2, 8, 14, 20] and rejects them.
  for (int n : {1, 2, 3}) {
    expect_error({{"model_type", "deepseek_v41_text"}, {"num_hidden_layers", n}}, "kv_source_layer_ids");
  }
  ModelConfig one = parse({{"model_type", "deepseek_v41_text"},
                           {"num_hidden_layers", 1},
                           {"kv_source_layer_ids", Json::array()}});
  EXPECT_EQ(one.compress_ratios, (std::vector<int64_t>{0}));
  EXPECT_TRUE(one.kv_source_layer_ids.empty());
  EXPECT_EQ(one.candidate_source_layer_id, -1);
  EXPECT_EQ(one.dspark_target_layer_ids, (std::vector<int64_t>{0}));
  ModelConfig four = parse({{"model_type", "deepseek_v41_text"}, {"num_hidden_layers", 4}});
  EXPECT_EQ(four.compress_ratios, (std::vector<int64_t>{0, 0, 2, 1}));
  EXPECT_EQ(four.kv_source_layer_ids, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(four.dspark_target_layer_ids, (std::vector<int64_t>{0, 1}));
}

TEST(ModelConfig, RopeFromFlatFields) {
  Json j = {{"model_type", "deepseek_v41_text"}, {"num_hidden_layers", 4}};
  // V4's "type" spelling is not read on this path: transformers runs without YaRN.
  j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", 64}};
  EXPECT_FALSE(parse(j).compress_rope.yarn);
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4}, {"original_max_position_embeddings", 64},
                       {"beta_fast", 0}, {"rope_theta", 5}};
  ModelConfig c = parse(j);
  EXPECT_TRUE(c.compress_rope.yarn);
  EXPECT_DOUBLE_EQ(c.compress_rope.beta_fast, 32.0);         // `or 32`
  EXPECT_DOUBLE_EQ(c.compress_rope.theta, 160000.0);         // compress_rope_theta wins
  EXPECT_DOUBLE_EQ(c.compress_rope.attention_factor, 1.0);   // forced on this path
}

TEST(ModelConfig, RopeFromNestedParameters) {
  Json j = tiny_flat();
  auto& comp = j["rope_parameters"]["compress"];
  comp.erase("rope_type");
  comp["type"] = "yarn";  // honoured by the nested standardization
  comp.erase("attention_factor");
  comp.erase("original_max_position_embeddings");
  comp.erase("rope_theta");
  ModelConfig c = parse(j);
  EXPECT_TRUE(c.compress_rope.yarn);
  EXPECT_DOUBLE_EQ(c.compress_rope.theta, 10000.0);  // filled from top-level rope_theta
  EXPECT_EQ(c.compress_rope.original_max_position_embeddings, 256);
  EXPECT_NEAR(c.compress_rope.attention_factor, 0.1 * std::log(4.0) + 1.0, 1e-12);
  // Only one nested dict: the reference rebuilds both from the flat fields.
  j["rope_parameters"].erase("main");
  c = parse(j);
  EXPECT_DOUBLE_EQ(c.compress_rope.theta, 160000.0);
  EXPECT_DOUBLE_EQ(c.compress_rope.attention_factor, 1.0);
}

TEST(ModelConfig, PadIdAliases) {
  Json j = tiny_flat();
  j["engram_pad_id"] = 7;
  EXPECT_EQ(parse(j).engram_pad_id, 7);
  j.erase("engram_pad_id");
  j["engram_pad_token_id"] = 9;
  EXPECT_EQ(parse(j).engram_pad_id, 9);
  j["engram_pad_id"] = 8;
  expect_error(j, "engram_pad_token_id");
}

TEST(ModelConfig, LoadFromFile) {
  auto dir = std::filesystem::temp_directory_path() / "deepinfer_config_test";
  std::filesystem::create_directories(dir);
  auto path = (dir / "config.json").string();
  {
    std::ofstream out(path);
    out << tiny_flat().dump(2);
  }
  EXPECT_EQ(load_model_config(path).num_hidden_layers, 6);
  EXPECT_THROW(load_model_config((dir / "missing.json").string()), InputError);
  EXPECT_THROW(load_model_config(dir.string()), InputError);
  std::filesystem::remove_all(dir);
}

TEST(ModelConfigErrors, NotJsonOrNotObject) {
  EXPECT_THROW(parse_model_config("{\"model_type\": ", "x.json"), InputError);
  EXPECT_THROW(parse_model_config("", "x.json"), InputError);
  EXPECT_THROW(parse_model_config("[1, 2]", "x.json"), InputError);
  EXPECT_THROW(parse_model_config("\"deepseek_v41\"", "x.json"), InputError);
  try {
    parse_model_config("not json", "x.json");
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("x.json"), std::string::npos);
  }
}

TEST(ModelConfigErrors, ModelType) {
  Json j = tiny_flat();
  j.erase("model_type");
  expect_error(j, "model_type");
  j["model_type"] = "llama";
  expect_error(j, "model_type");
  j["model_type"] = 41;
  expect_error(j, "model_type");
  j["model_type"] = "deepseek_v4";
  try {
    parse(j);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("not yet supported"), std::string::npos) << e.what();
  }
}

TEST(ModelConfigErrors, Composite) {
  Json j = released_composite();
  j.erase("text_config");
  expect_error(j, "text_config");
  j["text_config"] = "x";
  expect_error(j, "text_config");
  j = released_composite();
  j["text_config"]["model_type"] = "deepseek_v3";
  expect_error(j, "text_config.model_type");
  j = released_composite();
  j["text_config"]["hidden_size"] = -5;
  expect_error(j, "text_config.hidden_size");
}

TEST(ModelConfigErrors, IntegerFields) {
  for (const char* field : {"hidden_size", "vocab_size", "num_hidden_layers", "head_dim", "index_topk",
                            "n_routed_experts", "hc_mult", "sliding_window"}) {
    SCOPED_TRACE(field);
    Json j = tiny_flat();
    j[field] = -1;
    expect_error(j, field);
    j[field] = 0;
    expect_error(j, field);
    j[field] = "64";
    expect_error(j, field);
    j[field] = 64.0;
    expect_error(j, field);
    j[field] = 64.5;
    expect_error(j, field);
    j[field] = true;
    expect_error(j, field);
    j[field] = nullptr;
    expect_error(j, field);
    j[field] = Json::array({64});
    expect_error(j, field);
  }
  Json j = tiny_flat();
  j["hidden_size"] = 18446744073709551615ull;
  expect_error(j, "hidden_size");
  j = tiny_flat();
  j["num_hidden_layers"] = 1000000000;
  expect_error(j, "num_hidden_layers");
}

TEST(ModelConfigErrors, OtherFieldTypes) {
  Json j = tiny_flat();
  j["norm_topk_prob"] = 1;
  expect_error(j, "norm_topk_prob");
  j = tiny_flat();
  j["rms_norm_eps"] = "1e-20";
  expect_error(j, "rms_norm_eps");
  j = tiny_flat();
  j["scoring_func"] = "relu";
  expect_error(j, "scoring_func");
  j = tiny_flat();
  j["hidden_act"] = "gelu";
  expect_error(j, "hidden_act");
  j = tiny_flat();
  j["gate_temp"] = 0;
  expect_error(j, "gate_temp");
  j = tiny_flat();
  j["eos_token_id"] = Json::array({1, "2"});
  expect_error(j, "eos_token_id[1]");
}

TEST(ModelConfigErrors, CompressRatios) {
  Json j = tiny_flat();
  j["compress_ratios"] = {0, 2, 2, 1, 1};  // shorter than num_hidden_layers
  expect_error(j, "compress_ratios");
  j["compress_ratios"] = {0, 2, 2, 1, 1, 1, 0, 0};  // more than 6 + 1 draft entries
  expect_error(j, "compress_ratios");
  j["compress_ratios"] = {0, 2, 2, 1, 1, -1, 0};
  expect_error(j, "compress_ratios");
  j["compress_ratios"] = {0, 2, 2, 1, 1, 1, 2};  // draft layers are window-only
  expect_error(j, "compress_ratios");
  j["compress_ratios"] = {0, 2, 3, 1, 1, 1, 0};  // layer 2 reads layer 1, of ratio 2
  expect_error(j, "compress_ratios");
  j["compress_ratios"] = "0,2,2";
  expect_error(j, "compress_ratios");
  j["compress_ratios"] = {0, 2, 2, 1, 1.5, 1, 0};
  expect_error(j, "compress_ratios[4]");
}

TEST(ModelConfigErrors, Sources) {
  Json j = tiny_flat();
  j["kv_source_layer_ids"] = {0, 3};  // layer 0 has ratio 0
  expect_error(j, "kv_source_layer_ids");
  j = tiny_flat();
  j["kv_source_layer_ids"] = {1, 9};
  expect_error(j, "kv_source_layer_ids");
  j = tiny_flat();
  j["kv_source_layer_ids"] = {3, 1};
  expect_error(j, "kv_source_layer_ids");
  j = tiny_flat();
  j["kv_source_layer_ids"] = {3};  // layers 1 and 2 have no source
  j["index_source_layer_ids"] = {3, 5};
  expect_error(j, "kv_source_layer_ids");
  j = tiny_flat();
  j["kv_source_layer_ids"] = {3};
  j["index_source_layer_ids"] = {1, 3, 5};  // index source 1 without a KV source
  expect_error(j, "index_source_layer_ids");
  j = tiny_flat();
  j["index_source_layer_ids"] = {1, 5};  // KV source 3 does not index
  j["candidate_source_layer_id"] = -1;
  expect_error(j, "index_source_layer_ids");
  j = tiny_flat();
  j["index_source_layer_ids"] = {0, 1, 3};  // ratio 0
  expect_error(j, "index_source_layer_ids");
  j = tiny_flat();
  j["index_source_layer_ids"] = {-1, 1, 3};
  expect_error(j, "index_source_layer_ids");
  j = tiny_flat();
  j["candidate_source_layer_id"] = 4;  // not an index source
  expect_error(j, "candidate_source_layer_id");
  j = tiny_flat();
  j["candidate_source_layer_id"] = 1;  // index sources 3, 5 read another KV source
  expect_error(j, "candidate_source_layer_id");
  j = tiny_flat();
  j["candidate_source_layer_id"] = -7;
  EXPECT_EQ(parse(j).candidate_source_layer_id, -1);
  j = tiny_flat();
  j["dspark_target_layer_ids"] = {2, 4, 6};
  expect_error(j, "dspark_target_layer_ids");
}

TEST(ModelConfigErrors, Dimensions) {
  Json j = tiny_flat();
  j["num_experts_per_tok"] = 9;
  expect_error(j, "num_experts_per_tok");
  j = tiny_flat();
  j["head_dim"] = 63;
  expect_error(j, "head_dim");
  j = tiny_flat();
  j["qk_rope_head_dim"] = 128;
  expect_error(j, "qk_rope_head_dim");
  j = tiny_flat();
  j["qk_rope_head_dim"] = 15;
  expect_error(j, "qk_rope_head_dim");
  j = tiny_flat();
  j["index_head_dim"] = 8;
  expect_error(j, "index_head_dim");
  j = tiny_flat();
  j["o_groups"] = 3;
  expect_error(j, "o_groups");
  j = tiny_flat();
  j["dspark_num_experts_per_tok"] = 9;
  expect_error(j, "dspark_num_experts_per_tok");
  j = tiny_flat();
  j["dspark_noise_token_id"] = 512;
  expect_error(j, "dspark_noise_token_id");
  j = tiny_flat();
  j["num_nextn_predict_layers"] = 0;
  j["compress_ratios"] = {0, 2, 2, 1, 1, 1};
  j["dspark_noise_token_id"] = 128799;  // unused without draft layers
  EXPECT_EQ(parse(j).dspark_noise_token_id, 128799);
  j = tiny_flat();
  j["engram_pad_id"] = 512;  // unused without engram layers
  EXPECT_EQ(parse(j).engram_pad_id, 512);
  j["engram_layer_ids"] = {1};
  j["engram_num_embeddings"] = {1000};
  expect_error(j, "engram_pad_id");
  j["engram_pad_id"] = -1;
  expect_error(j, "engram_pad_id");
}

TEST(ModelConfigErrors, Engram) {
  Json j = tiny_flat();
  j["engram_layer_ids"] = {1, 4};
  j["engram_num_embeddings"] = {1000};
  expect_error(j, "engram_num_embeddings");
  j["engram_num_embeddings"] = {1000, 0};
  expect_error(j, "engram_num_embeddings");
  j.erase("engram_num_embeddings");  // the reference's zero default cannot be looked up
  expect_error(j, "engram_num_embeddings");
  j["engram_num_embeddings"] = {1000, 2000};
  EXPECT_EQ(parse(j).engram_slot(4), 1);
  j["engram_layer_ids"] = {1, 6};
  expect_error(j, "engram_layer_ids");
  j["engram_layer_ids"] = {4, 1};
  expect_error(j, "engram_layer_ids");
}

TEST(ModelConfigErrors, Rope) {
  Json j = tiny_flat();
  j["rope_parameters"]["compress"]["rope_type"] = "llama3";
  expect_error(j, "rope_parameters.compress.rope_type");
  j = tiny_flat();
  j["rope_parameters"]["compress"].erase("factor");
  expect_error(j, "rope_parameters.compress.factor");
  j = tiny_flat();
  j["rope_parameters"]["compress"]["factor"] = -2;
  expect_error(j, "rope_parameters.compress.factor");
  j = tiny_flat();
  j["rope_parameters"]["main"].erase("partial_rotary_factor");  // would rotate the whole head
  expect_error(j, "rope_parameters.main.partial_rotary_factor");
  j = tiny_flat();
  j["rope_parameters"]["main"] = 5;
  expect_error(j, "rope_parameters.main");
  j = tiny_flat();
  j.erase("rope_parameters");
  j["rope_scaling"].erase("original_max_position_embeddings");
  expect_error(j, "rope_scaling.original_max_position_embeddings");
  j = tiny_flat();
  j.erase("rope_parameters");
  j["rope_scaling"] = Json::array();
  expect_error(j, "rope_scaling");
  j = tiny_flat();
  j["compress_rope_theta"] = 0;
  expect_error(j, "compress_rope_theta");
}

TEST(ModelConfigErrors, Quantization) {
  Json j = released_composite();
  j["quantization_config"]["weight_block_size"] = {32};
  expect_error(j, "quantization_config.weight_block_size");
  j["quantization_config"]["weight_block_size"] = {32, 0};
  expect_error(j, "quantization_config.weight_block_size");
  j["quantization_config"]["weight_block_size"] = {32, "32"};
  expect_error(j, "quantization_config.weight_block_size");
  j["quantization_config"]["weight_block_size"] = nullptr;
  expect_error(j, "quantization_config.weight_block_size");
  j = released_composite();
  j["quantization_config"]["quant_method"] = "gptq";
  expect_error(j, "quantization_config.quant_method");
  j = released_composite();
  j["quantization_config"]["scale_fmt"] = "e5m2";
  expect_error(j, "quantization_config.scale_fmt");
  j = released_composite();
  j["quantization_config"]["expert_dtype"] = "int4";
  expect_error(j, "quantization_config.expert_dtype");
  j = released_composite();
  j["quantization_config"] = 3;
  expect_error(j, "quantization_config");
  j = released_composite();
  j["quantization_config"] = {{"quant_method", "fp8"}};
  ModelConfig c = parse(j);
  EXPECT_EQ(c.quant.weight_block_rows, 128);
  EXPECT_EQ(c.quant.scale_fmt, "float");
  EXPECT_EQ(c.quant.expert_dtype, "fp8");
}

TEST(ModelConfigErrors, HostileValues) {
  // Deep nesting in a field value must not overflow the stack when it is reported.
  std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string text = R"({"model_type": "deepseek_v41_text", "hidden_size": )" + deep + "}";
  EXPECT_THROW(parse_model_config(text, "deep.json"), InputError);
  EXPECT_THROW(parse_model_config(R"({"model_type": "deepseek_v41_text", "hidden_size": 1e999})", "x.json"),
               InputError);
  Json j = tiny_flat();
  j["scoring_func"] = std::string(10000, 'x');
  try {
    parse(j);
    ADD_FAILURE();
  } catch (const InputError& e) {
    EXPECT_LT(std::string(e.what()).size(), 300u);
  }
}

TEST(ModelConfig, FixtureConfigsParse) {
  std::filesystem::path root = DEEPINFER_FIXTURES;
  ASSERT_TRUE(std::filesystem::is_directory(root)) << root;  // committed with the repository
  int parsed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(root)) {
    auto path = entry.path() / "config.json";
    if (!entry.is_directory() || !std::filesystem::is_regular_file(path)) continue;
    SCOPED_TRACE(path.string());
    ModelConfig c = load_model_config(path.string());
    EXPECT_EQ(c.compress_ratios.size(), size_t(c.num_hidden_layers));
    ++parsed;
  }
  EXPECT_GE(parsed, 2);  // v41_tiny_f32 and v41_tiny_quant at least
}

}  // namespace
}  // namespace deepinfer
