// The Engram n-gram hash (EngramHasher::hash) at a sequence's start and after a replay reset,
// on the tiny fixture's config and tokenizer (one Engram layer, 3-grams).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/v41/engram.h"

namespace deepinfer::v41 {
namespace {

const std::string kDir = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_f32";

// The rows depend on the n-gram's ids only, not on its position: a slot that holds no ids
// before `first_position` (a replay reset clears them) hashes the look-back past that point
// as padding, exactly as at position 0. Before NOTES 61 it read the ids vector at negative
// indices there (heap memory before it), so the rows changed from run to run.
TEST(EngramHash, LookBackStopsWhereTheSlotsIdsStart) {
  const ModelConfig cfg = load_model_config(kDir + "/config.json");
  ASSERT_FALSE(cfg.engram_layer_ids.empty());
  ASSERT_GE(cfg.engram_max_ngram_size, 3);
  const auto h = EngramHasher::create(cfg, kDir + "/tokenizer.json");
  const std::vector<int64_t> tokens = {17, 5, 230, 41, 9, 77};
  std::vector<int64_t> at_start, at_replay;
  const auto start = h->hash(tokens, 0, at_start);
  const auto replay = h->hash(tokens, 8064, at_replay);
  EXPECT_EQ(start, replay);
  EXPECT_EQ(at_start, at_replay);  // the ids kept for the next call

  // Continuing with the kept ids equals one call over the whole run.
  std::vector<int64_t> whole_recent, split_recent;
  const std::vector<int64_t> more = {3, 250, 64};
  std::vector<int64_t> all = tokens;
  all.insert(all.end(), more.begin(), more.end());
  const auto whole = h->hash(all, 100, whole_recent);
  auto split = h->hash(tokens, 100, split_recent);
  const auto rest = h->hash(more, 100 + int64_t(tokens.size()), split_recent);
  split.insert(split.end(), rest.begin(), rest.end());
  EXPECT_EQ(whole, split);
  EXPECT_EQ(whole_recent, split_recent);
}

}  // namespace
}  // namespace deepinfer::v41
