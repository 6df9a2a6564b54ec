// The engram hash layout: the real V4.1 values (MODEL_V41.md §5.2-5.3) and small
// layouts, all computed with numpy (default_rng) and a Python prime search.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "common/check.h"
#include "model/config.h"
#include "model/v41/engram_layout.h"

namespace deepinfer::v41 {
namespace {

using Table = std::vector<std::vector<int64_t>>;

ModelConfig engram_config(std::vector<int64_t> layers, std::vector<int64_t> sums, int64_t vocab, int64_t max_ngram,
                          int64_t heads) {
  ModelConfig cfg;
  cfg.engram_layer_ids = std::move(layers);
  cfg.engram_num_embeddings = std::move(sums);
  cfg.engram_vocab_size = vocab;
  cfg.engram_max_ngram_size = max_ngram;
  cfg.engram_n_heads = heads;
  return cfg;
}

TEST(EngramLayoutTest, RealV41) {
  const ModelConfig cfg = engram_config({1, 14}, {384006168, 384016682}, 16000000, 4, 8);
  const EngramLayout layout = build_engram_layout(cfg, 99092);
  const Table primes = {
      {16000057, 16000079, 16000081, 16000097, 16000121, 16000129, 16000133, 16000183,
       16000189, 16000207, 16000211, 16000253, 16000277, 16000289, 16000307, 16000321,
       16000339, 16000381, 16000393, 16000399, 16000403, 16000409, 16000447, 16000463},
      {16000477, 16000487, 16000499, 16000507, 16000511, 16000573, 16000609, 16000627,
       16000667, 16000669, 16000693, 16000697, 16000711, 16000729, 16000759, 16000769,
       16000781, 16000799, 16000813, 16000819, 16000841, 16000877, 16000879, 16000889}};
  EXPECT_EQ(layout.primes, primes);
  EXPECT_EQ(layout.num_embeddings, (std::vector<int64_t>{384006168, 384016682}));
  EXPECT_EQ(layout.multipliers,
            (Table{{76632096046245, 4839876093313, 35959672319349, 73987337458391},
                   {67716810739261, 51510806800915, 30921347202721, 82619226485591}}));
  for (size_t l = 0; l < 2; ++l) {
    int64_t sum = 0;
    for (size_t c = 0; c < 24; ++c) {
      EXPECT_EQ(layout.offsets[l][c], sum);
      sum += primes[l][c];
    }
  }
  EXPECT_EQ(layout.layer_ids, (std::vector<int64_t>{1, 14}));
  EXPECT_EQ(layout.max_ngram_size, 4);
  EXPECT_EQ(layout.n_heads, 8);
}

TEST(EngramLayoutTest, SmallLayoutsMatchNumpy) {
  {
    const EngramLayout l = build_engram_layout(engram_config({0, 3}, {420, 508}, 100, 3, 2), 379);
    EXPECT_EQ(l.primes, (Table{{101, 103, 107, 109}, {113, 127, 131, 137}}));
    EXPECT_EQ(l.offsets, (Table{{0, 101, 204, 311}, {0, 113, 240, 371}}));
    EXPECT_EQ(l.multipliers, (Table{{15501146742449965, 6565549423864447, 997134709563319},
                                    {7197105832795145, 21350336497231971, 2844105429105963}}));
  }
  {
    // bound = 2^31 - 1: numpy's 32-bit buffered path; a prime equal to the vocab size.
    const EngramLayout l = build_engram_layout(engram_config({2}, {10}, 2, 2, 3), int64_t(1) << 31);
    EXPECT_EQ(l.primes, (Table{{2, 3, 5}}));
    EXPECT_EQ(l.multipliers, (Table{{2755590489, 3530307759}}));
  }
  {
    // bound = 1: every draw is 0.
    const EngramLayout l = build_engram_layout(engram_config({5, 6, 7}, {2, 3, 5}, 1, 2, 1), int64_t(1) << 62);
    EXPECT_EQ(l.primes, (Table{{2}, {3}, {5}}));
    EXPECT_EQ(l.multipliers, (Table{{1, 1}, {1, 1}, {1, 1}}));
  }
  EXPECT_TRUE(build_engram_layout(engram_config({}, {}, 100, 3, 2), 10).primes.empty());
}

TEST(EngramLayoutTest, NumpyIntegers) {
  // numpy.random.default_rng(seed).integers(0, high, size=n, dtype=np.int64).
  EXPECT_EQ(numpy_rng_integers(0, 1000, 5), (std::vector<int64_t>{850, 636, 511, 269, 307}));
  EXPECT_EQ(numpy_rng_integers(12345, int64_t(1) << 33, 3),
            (std::vector<int64_t>{1952801563, 2720933419, 6849317124}));
  EXPECT_EQ(numpy_rng_integers(7, int64_t(1) << 32, 3), (std::vector<int64_t>{4058335883, 2684764585, 2938530453}));
  EXPECT_EQ(numpy_rng_integers(uint64_t(1) << 40, 2147483648, 3),
            (std::vector<int64_t>{1980958400, 774832658, 815192561}));
}

TEST(EngramLayoutTest, RejectsBadConfigs) {
  // engram_num_embeddings must equal the prime sums; the message names the layer.
  try {
    build_engram_layout(engram_config({1, 14}, {384006168, 384016683}, 16000000, 4, 8), 99092);
    ADD_FAILURE() << "no error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("engram layer 14"), std::string::npos) << e.what();
  }
  EXPECT_THROW(build_engram_layout(engram_config({1}, {}, 100, 3, 2), 10), InputError);
  EXPECT_THROW(build_engram_layout(engram_config({1}, {420}, (int64_t(1) << 40) + 1, 3, 2), 10), InputError);
  EXPECT_THROW(build_engram_layout(engram_config({1}, {420}, 0, 3, 2), 10), InputError);
  EXPECT_THROW(build_engram_layout(engram_config({1}, {420}, 100, 1, 2), 10), InputError);
  EXPECT_THROW(build_engram_layout(engram_config({1}, {420}, 100, 3, 0), 10), InputError);
  EXPECT_THROW(build_engram_layout(engram_config({-1}, {420}, 100, 3, 2), 10), InputError);
  EXPECT_THROW(build_engram_layout(engram_config({0, 3}, {420, 508}, 100, 3, 2), 0), InputError);
}

}  // namespace
}  // namespace deepinfer::v41
