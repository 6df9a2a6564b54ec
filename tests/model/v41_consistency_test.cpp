// Properties of the CPU forward on random checkpoints: one call, any chunking and
// token-by-token decode give the same logits, on sequences long enough to wrap the
// sliding window, fill candidate blocks and make every top-k bind.
#include <gtest/gtest.h>

#include <cmath>

#include "common/check.h"
#include "model/v41/model.h"
#include "random_checkpoint.h"

namespace deepinfer {
namespace {

nlohmann::json tiny_config() {
  return {{"model_type", "deepseek_v41_text"},
          {"vocab_size", 96},
          {"hidden_size", 64},
          {"num_hidden_layers", 8},
          {"num_attention_heads", 4},
          {"head_dim", 64},
          {"qk_rope_head_dim", 32},
          {"q_lora_rank", 32},
          {"o_groups", 2},
          {"o_lora_rank", 16},
          {"sliding_window", 6},
          {"compress_ratios", {0, 0, 2, 2, 1, 1, 1, 1}},
          {"kv_source_layer_ids", {2, 4}},
          {"index_source_layer_ids", {2, 4, 6}},
          {"candidate_source_layer_id", 4},
          {"candidate_topk_blocks", 2},
          {"candidate_block_size", 4},
          {"index_n_heads", 16},
          {"index_head_dim", 64},
          {"index_topk", 5},
          {"n_routed_experts", 6},
          {"num_experts_per_tok", 2},
          {"moe_intermediate_size", 32},
          {"num_nextn_predict_layers", 0},
          {"engram_layer_ids", nlohmann::json::array()},
          {"rope_theta", 10000.0},
          {"compress_rope_theta", 160000.0},
          {"rope_scaling",
           {{"type", "yarn"}, {"factor", 16.0}, {"beta_fast", 32.0}, {"beta_slow", 1.0},
            {"original_max_position_embeddings", 16}}}};
}

struct Runner {
  std::unique_ptr<v41::Model> model;
  std::vector<float> run(const std::vector<int64_t>& tokens, const std::vector<size_t>& sizes) {
    auto seq = model->new_sequence();
    std::vector<float> out;
    size_t i = 0;
    for (size_t s : sizes) {
      auto l = model->forward(seq, std::vector<int64_t>(tokens.begin() + i, tokens.begin() + i + s));
      out.insert(out.end(), l.begin(), l.end());
      i += s;
    }
    return out;
  }
};

double max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, double(std::fabs(a[i] - b[i])));
  return m;
}

TEST(V41Consistency, FeedingModesAgreeOnLongSequence) {
  const std::string dir = ::testing::TempDir() + "/v41_consistency";
  nlohmann::json cfg_json = tiny_config();
  ModelConfig cfg = parse_model_config(cfg_json.dump(), "test");
  testing::RandomCheckpointWriter w(1234);
  w.add_model(cfg);
  w.write(dir, cfg_json);
  Runner r{v41::Model::load(dir)};

  std::mt19937 rng(7);
  std::vector<int64_t> tokens(41);
  for (auto& t : tokens) t = int64_t(rng() % 96);
  const size_t n = tokens.size();
  auto full = r.run(tokens, {n});
  for (float v : full) ASSERT_TRUE(std::isfinite(v));
  auto chunks3 = r.run(tokens, {3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 3, 2});
  auto odd = r.run(tokens, {1, 7, 2, 13, 18});
  std::vector<size_t> ones(n, 1);
  auto stepped = r.run(tokens, ones);
  // The CPU backend computes every token with the same arithmetic in the same order
  // whatever the chunking, so the modes agree bitwise, not just within a tolerance.
  EXPECT_EQ(max_diff(full, chunks3), 0.0);
  EXPECT_EQ(max_diff(full, odd), 0.0);
  EXPECT_EQ(max_diff(full, stepped), 0.0);
}

TEST(V41Consistency, RejectsOutOfRangeTokens) {
  const std::string dir = ::testing::TempDir() + "/v41_consistency_bad";
  nlohmann::json cfg_json = tiny_config();
  ModelConfig cfg = parse_model_config(cfg_json.dump(), "test");
  testing::RandomCheckpointWriter w(1);
  w.add_model(cfg);
  w.write(dir, cfg_json);
  auto model = v41::Model::load(dir);
  auto seq = model->new_sequence();
  EXPECT_THROW(model->forward(seq, {96}), InputError);
  EXPECT_THROW(model->forward(seq, {-1}), InputError);
  EXPECT_THROW(model->forward(seq, {}), InputError);
}

}  // namespace
}  // namespace deepinfer
