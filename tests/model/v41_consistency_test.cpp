// Properties of the CPU forward on random checkpoints: one call, any chunking and
// token-by-token decode give the same logits, on sequences long enough to wrap the
// sliding window, fill candidate blocks and make every top-k bind.
#include <gtest/gtest.h>

#include <cmath>
#include <span>

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

namespace deepinfer {
namespace {

struct BatchFixture {
  std::unique_ptr<v41::Model> model;
  BatchFixture() {
    const std::string dir = ::testing::TempDir() + "/v41_batch";
    nlohmann::json cfg_json = tiny_config();
    testing::RandomCheckpointWriter w(99);
    w.add_model(parse_model_config(cfg_json.dump(), "test"));
    w.write(dir, cfg_json);
    model = v41::Model::load(dir);
  }
};

std::vector<int64_t> random_tokens(uint32_t seed, size_t n) {
  std::mt19937 rng(seed);
  std::vector<int64_t> t(n);
  for (auto& v : t) v = int64_t(rng() % 96);
  return t;
}

// A sequence's logits do not depend on what else is in the batch: four sequences
// at different stages run together give bitwise the logits each gives alone.
TEST(V41Batch, RaggedBatchIsBitwiseInvariant) {
  BatchFixture f;
  const auto& cfg = f.model->config();
  const int64_t bs = 8;
  std::vector<std::vector<int64_t>> prompts = {random_tokens(1, 13), random_tokens(2, 5), random_tokens(3, 30),
                                               random_tokens(4, 1)};
  // Alone.
  std::vector<std::vector<float>> alone;
  for (const auto& p : prompts) {
    auto seq = f.model->new_sequence(bs);
    alone.push_back(f.model->forward(seq, p));
  }
  // Together, in one shared pool, with interleaved block tables.
  const int64_t blocks_per_seq = 8;
  v41::HistoryPool pool(cfg, bs, blocks_per_seq * int64_t(prompts.size()));
  std::vector<v41::StateSlot> slots;
  std::vector<std::vector<int64_t>> tables(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    slots.push_back(v41::StateSlot::create(cfg));
    for (int64_t k = 0; k < blocks_per_seq; ++k) tables[i].push_back(k * int64_t(prompts.size()) + int64_t(i));
  }
  // Feed in two rounds of different chunk sizes, all sequences in each batch.
  std::vector<std::vector<float>> together(prompts.size());
  std::vector<size_t> fed(prompts.size(), 0);
  for (size_t chunk : {7u, 100u}) {
    std::vector<v41::BatchItem> items;
    std::vector<size_t> which;
    for (size_t i = 0; i < prompts.size(); ++i) {
      if (fed[i] == prompts[i].size()) continue;
      size_t take = std::min(chunk, prompts[i].size() - fed[i]);
      v41::BatchItem it;
      it.seq = {&slots[i], &tables[i]};
      it.tokens.assign(prompts[i].begin() + fed[i], prompts[i].begin() + fed[i] + take);
      it.all_logits = true;
      items.push_back(it);
      which.push_back(i);
      fed[i] += take;
    }
    auto logits = f.model->forward_batch(pool, items);
    size_t off = 0;
    for (size_t k = 0; k < items.size(); ++k) {
      size_t len = items[k].tokens.size() * cfg.vocab_size;
      together[which[k]].insert(together[which[k]].end(), logits.begin() + off, logits.begin() + off + len);
      off += len;
    }
  }
  for (size_t i = 0; i < prompts.size(); ++i) {
    ASSERT_EQ(alone[i].size(), together[i].size());
    EXPECT_EQ(max_diff(alone[i], together[i]), 0.0) << "sequence " << i;
  }
}

// Exact prefix reuse: a second sequence that shares the first one's history blocks
// and replays the causal cone W + (L-1)(W-1) before the hit point continues with
// bitwise the logits of the first.
TEST(V41Batch, CausalConeReplayIsExact) {
  BatchFixture f;
  const auto& cfg = f.model->config();
  const int64_t bs = 8, hit = 64;
  const int64_t cone = cfg.sliding_window + (cfg.num_hidden_layers - 1) * (cfg.sliding_window - 1);
  const int64_t replay_start = (hit - cone) / 2 * 2;  // aligned to every ratio; one less is not exact
  ASSERT_GT(replay_start, 0);
  auto tokens = random_tokens(11, hit + 6);
  auto cold = f.model->new_sequence(bs);
  cold.ensure_capacity(hit + 6);
  std::vector<int64_t> prefix(tokens.begin(), tokens.begin() + hit), tail(tokens.begin() + hit, tokens.end());
  f.model->forward(cold, prefix);
  auto cold_tail = f.model->forward(cold, tail);

  // The warm sequence shares blocks [0, hit) and owns copies for the rest.
  v41::HistoryPool& pool = cold.pool;
  const int64_t shared_blocks = hit / bs;
  std::vector<int64_t> table(cold.block_table.begin(), cold.block_table.begin() + shared_blocks);
  const int64_t first_new = pool.num_blocks();
  pool.grow(2);
  table.push_back(first_new);
  table.push_back(first_new + 1);
  v41::StateSlot slot = v41::StateSlot::create(cfg);
  // As the engine: the ids of the tokens before the replay's start (RunChunk::preceding).
  slot.reset_for_replay(cfg, replay_start, hit,
                        f.model->replay_recent_ids(std::span<const int64_t>(tokens.data(), size_t(replay_start))));
  std::vector<v41::BatchItem> items(1);
  items[0].seq = {&slot, &table};
  items[0].tokens.assign(tokens.begin() + replay_start, tokens.begin() + hit);
  f.model->forward_batch(pool, items);
  items[0].tokens = tail;
  items[0].all_logits = true;
  auto warm_tail = f.model->forward_batch(pool, items);
  EXPECT_EQ(max_diff(cold_tail, warm_tail), 0.0);
}

}  // namespace
}  // namespace deepinfer
