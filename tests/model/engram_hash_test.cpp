// The Engram n-gram hash (EngramHasher::hash) at a sequence's start and after a replay reset,
// on the tiny fixture's config and tokenizer (one Engram layer, 3-grams).
#include <gtest/gtest.h>

#include <cstdint>
#include <span>
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

// A replay reset that keeps recent_ids(the tokens before the replay's start) hashes the
// replayed tokens as the uninterrupted sequence does: the engine passes those tokens
// (RunChunk::preceding), so a replay's first n-grams reach back past its start.
TEST(EngramHash, ReplayWithThePrecedingTokensContinuesTheSequence) {
  const ModelConfig cfg = load_model_config(kDir + "/config.json");
  const auto h = EngramHasher::create(cfg, kDir + "/tokenizer.json");
  ASSERT_EQ(h->lookback(), cfg.engram_max_ngram_size - 1);
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < 40; ++i) tokens.push_back((i * 37 + 11) % 300);
  std::vector<int64_t> recent;
  const auto whole = h->hash(tokens, 0, recent);
  const int64_t per_token = int64_t(whole.size() / tokens.size());
  for (int64_t start : {1, 2, 3, 17}) {
    std::vector<int64_t> kept = h->recent_ids(std::span<const int64_t>(tokens.data(), size_t(start)));
    EXPECT_EQ(int64_t(kept.size()), std::min<int64_t>(start, h->lookback()));
    const std::vector<int64_t> rest(tokens.begin() + start, tokens.end());
    const auto replay = h->hash(rest, start, kept);
    EXPECT_EQ(replay, std::vector<int64_t>(whole.begin() + start * per_token, whole.end())) << start;
  }
  // Tokens the tokenizer does not cover (a vocab larger than it) keep padding ids, as in hash().
  const std::vector<int64_t> outside = {1 << 30, 5};
  EXPECT_EQ(h->recent_ids(outside).size(), size_t(std::min<int64_t>(2, h->lookback())));
}

}  // namespace
}  // namespace deepinfer::v41
