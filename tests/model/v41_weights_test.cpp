// Weight binding validates names, shapes, dtypes and scales, and reports the key.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/check.h"
#include "model/v41/model.h"
#include "random_checkpoint.h"

namespace deepinfer {
namespace {

nlohmann::json small_config() {
  return {{"model_type", "deepseek_v41_text"}, {"vocab_size", 32}, {"hidden_size", 32},
          {"num_hidden_layers", 3}, {"num_attention_heads", 2}, {"head_dim", 32},
          {"qk_rope_head_dim", 16}, {"q_lora_rank", 16}, {"o_groups", 2},
          {"o_lora_rank", 8}, {"sliding_window", 4}, {"compress_ratios", {0, 2, 1}},
          {"kv_source_layer_ids", {1, 2}}, {"index_source_layer_ids", {1, 2}},
          {"candidate_source_layer_id", 2}, {"index_n_heads", 2}, {"index_head_dim", 32},
          {"index_topk", 4}, {"n_routed_experts", 2}, {"num_experts_per_tok", 1},
          {"moe_intermediate_size", 16}, {"num_nextn_predict_layers", 0},
          {"engram_layer_ids", nlohmann::json::array()}};
}

// Writes the small model, letting `edit` drop or replace tensors first.
std::string write_model(const std::string& name, const std::function<void(std::vector<TensorToWrite>&)>& edit) {
  const std::string dir = ::testing::TempDir() + "/" + name;
  std::filesystem::remove_all(dir);
  nlohmann::json cfg = small_config();
  testing::RandomCheckpointWriter w(5);
  w.add_model(parse_model_config(cfg.dump(), "test"));
  w.write(dir, cfg);
  auto file = SafetensorsFile::open(dir + "/model.safetensors");
  std::vector<TensorToWrite> tensors;
  for (const auto& [n, t] : file->tensors())
    tensors.push_back({n, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes)});
  file.reset();
  edit(tensors);
  write_safetensors(dir + "/model.safetensors", tensors);
  return dir;
}

std::string load_error(const std::string& dir) {
  try {
    v41::Model::load(dir);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(V41Weights, LoadsValidModel) {
  std::string dir = write_model("w_ok", [](auto&) {});
  EXPECT_EQ(load_error(dir), "");
}

TEST(V41Weights, MissingTensorIsNamed) {
  std::string dir = write_model("w_missing", [](auto& ts) {
    std::erase_if(ts, [](const TensorToWrite& t) { return t.name == "model.layers.1.attn.wq_b.weight"; });
  });
  std::string err = load_error(dir);
  EXPECT_NE(err.find("layers.1.attn.wq_b.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("missing"), std::string::npos) << err;
}

TEST(V41Weights, WrongShapeIsNamed) {
  std::string dir = write_model("w_shape", [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "model.layers.2.attn.kv_norm.weight") {
        t.shape = {16};
        t.bytes.resize(64);
      }
  });
  std::string err = load_error(dir);
  EXPECT_NE(err.find("layers.2.attn.kv_norm.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("[32]"), std::string::npos) << err;
}

TEST(V41Weights, Fp8WithoutScaleIsAnError) {
  std::string dir = write_model("w_noscale", [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "model.layers.0.attn.wkv.weight") {
        t.dtype = DType::F8_E4M3;
        t.bytes.assign(32 * 32, 0x38);
      }
  });
  std::string err = load_error(dir);
  EXPECT_NE(err.find("layers.0.attn.wkv"), std::string::npos) << err;
  EXPECT_NE(err.find("scale"), std::string::npos) << err;
}

TEST(V41Weights, Fp8ScaleWithWrongShapeIsAnError) {
  std::string dir = write_model("w_badscale", [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "model.layers.0.attn.wkv.weight") {
        t.dtype = DType::F8_E4M3;
        t.bytes.assign(32 * 32, 0x38);
      }
    ts.push_back({"model.layers.0.attn.wkv.scale", DType::F8_E8M0, {3, 3}, std::vector<uint8_t>(9, 127)});
  });
  EXPECT_NE(load_error(dir).find("scale"), std::string::npos);
}

TEST(V41Weights, UnsupportedDtypeIsAnError) {
  std::string dir = write_model("w_dtype", [](auto& ts) {
    for (auto& t : ts)
      if (t.name == "lm_head.weight") {
        t.dtype = DType::I32;
      }
  });
  std::string err = load_error(dir);
  EXPECT_NE(err.find("lm_head.weight"), std::string::npos) << err;
  EXPECT_NE(err.find("dtype"), std::string::npos) << err;
}

TEST(V41Weights, MissingConfigOrDirectory) {
  EXPECT_NE(load_error("/nonexistent/model").find("does not exist"), std::string::npos);
  std::string dir = ::testing::TempDir() + "/w_noconfig";
  std::filesystem::create_directories(dir);
  EXPECT_NE(load_error(dir), "");
}

}  // namespace
}  // namespace deepinfer
