// Indexer scores and the selection (masking, level-1 candidates, top-k with ties).
#include <cmath>

#include "harness.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/indexer.h"

namespace deepinfer::testing_cuda {

namespace {

OpCase score_case(std::string name, int64_t n, int64_t heads, int64_t hd, int64_t keys) {
  return {name, "indexer_score", [=](Rng& rng) {
            const auto q = randn(rng, n * heads * hd);
            const auto w = randn(rng, n * heads, 1.0f / std::sqrt(float(heads)));
            const auto k = randn(rng, keys * hd);
            const float scale = 1.0f / std::sqrt(float(hd));
            std::vector<float> s(n * keys);
            ops::cpu::indexer_score({q.data(), w.data(), k.data(), n, heads, hd, keys, scale, s.data()});
            Dev<float> dq(q), dw(w), dk(k), ds(n * keys);
            ops::cuda::indexer_score({dq.get(), dw.get(), dk.get(), n, heads, hd, keys, scale, ds.get()}, nullptr);
            return Outputs{{{"scores", s, ds.host()}}, {}};
          }};
}

enum class Level { kPlain, kCandidateSource, kCandidateUser };

// Scores on a coarse grid (multiples of 1/8 in [-2, 2]) so exact ties are common;
// positions make some queries see nothing, some everything.
OpCase select_case(std::string name, Level level, int64_t n, int64_t keys, int64_t ratio, int64_t top_k,
                   int64_t topk_blocks = 0, int64_t block_size = 8) {
  return {name, "indexer_select", [=](Rng& rng) {
            std::vector<float> scores(n * keys);
            for (auto& s : scores) s = float(randint(rng, -16, 16)) / 8.0f;
            std::vector<int64_t> pos(n);
            // Valid inputs see at most every key: (pos + 1) / ratio <= num_keys. (A
            // position past that makes the CPU oracle pin block num_keys / bs, one past
            // its block array: the heap corruption that aborted the second H200 run.)
            for (auto& p : pos) p = randint(rng, 0, keys * ratio - 1);
            pos[0] = ratio - 2 >= 0 ? ratio - 2 : 0;  // nothing visible yet (ratio > 1)
            if (n > 1) pos[1] = keys * ratio - 1;      // everything visible
            std::vector<uint8_t> cand_in(n * keys);
            for (auto& c : cand_in) c = randint(rng, 0, 9) < 7;

            ops::IndexerSelectParams hp;
            hp.n = n;
            hp.num_keys = keys;
            hp.ratio = ratio;
            hp.top_k = top_k;
            std::vector<uint8_t> cand_out(level == Level::kCandidateSource ? n * keys : 0);
            if (level == Level::kCandidateSource) {
              hp.candidate_topk_blocks = topk_blocks;
              hp.candidate_block_size = block_size;
            }
            Dev<float> ds(scores);
            Dev<int64_t> dpos(pos);
            Dev<uint8_t> dcin(cand_in), dcout(std::max<int64_t>(1, n * keys));
            ops::IndexerSelectParams dp = hp;
            hp.scores = scores.data();
            hp.positions = pos.data();
            dp.scores = ds.get();
            dp.positions = dpos.get();
            if (level == Level::kCandidateSource) hp.candidates_out = cand_out.data(), dp.candidates_out = dcout.get();
            if (level == Level::kCandidateUser) hp.candidates_in = cand_in.data(), dp.candidates_in = dcin.get();

            const ops::Selection cs = ops::cpu::indexer_select(hp);
            const ops::Selection gs = ops::cuda::indexer_select(dp, nullptr);
            Outputs o;
            o.floats.push_back({"masked_scores", scores, ds.host()});
            o.ints.push_back({"offsets", cs.offsets, gs.offsets});
            o.ints.push_back({"ids", cs.ids, gs.ids});
            if (level == Level::kCandidateSource) {
              const auto g = dcout.host();
              o.ints.push_back({"candidates", std::vector<int64_t>(cand_out.begin(), cand_out.end()),
                                std::vector<int64_t>(g.begin(), g.begin() + n * keys)});
            }
            return o;
          }};
}

}  // namespace

std::vector<OpCase> indexer_cases() {
  return {
      score_case("indexer_score_v41", 4, 32, 128, 777),
      score_case("indexer_score_heads64", 3, 64, 128, 300),
      score_case("indexer_score_small", 2, 5, 24, 40),
      select_case("indexer_select_plain", Level::kPlain, 6, 3000, 4, 512),
      select_case("indexer_select_take_all", Level::kPlain, 4, 50, 4, 512),
      select_case("indexer_select_level1", Level::kCandidateSource, 5, 2000, 4, 128, 64, 8),
      select_case("indexer_select_level1_all_blocks", Level::kCandidateSource, 3, 100, 2, 16, 2048, 8),
      select_case("indexer_select_level2", Level::kCandidateUser, 5, 2000, 4, 256),
      select_case("indexer_select_ratio1_k0", Level::kPlain, 3, 64, 1, 0),
  };
}

}  // namespace deepinfer::testing_cuda
