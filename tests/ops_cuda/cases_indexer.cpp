// Indexer scores and the selection (masking, level-1 candidates, top-k with ties).
#include <algorithm>
#include <bit>
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


// ---- the batched, paged indexer (the model's index layers) --------------------

struct Seq {
  int64_t n, keys;  // query rows, keys it sees (0: the sequence is skipped)
};

// A paged key pool: each sequence's keys sit in shuffled blocks of `epb` rows.
struct PagedKeys {
  std::vector<float> pool;                  // [blocks * epb, hd]
  std::vector<int64_t> tables, table_begin;  // concatenated tables, per sequence
  std::vector<std::vector<float>> contiguous;  // per sequence [keys, hd] (the CPU's view)
};

PagedKeys make_paged(Rng& rng, const std::vector<Seq>& seqs, int64_t hd, int64_t epb) {
  PagedKeys p;
  int64_t blocks = 3;  // spare blocks that no table uses
  for (const Seq& q : seqs) blocks += (q.keys + epb - 1) / epb;
  std::vector<int64_t> perm(blocks);
  for (int64_t i = 0; i < blocks; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  p.pool = randn(rng, size_t(blocks * epb * hd));
  int64_t next = 0;
  for (const Seq& q : seqs) {
    p.table_begin.push_back(int64_t(p.tables.size()));
    const int64_t nb = (q.keys + epb - 1) / epb;
    for (int64_t j = 0; j < nb; ++j) p.tables.push_back(perm[next++]);
    std::vector<float> c(static_cast<size_t>(q.keys * hd));
    for (int64_t e = 0; e < q.keys; ++e) {
      const int64_t row = p.tables[p.table_begin.back() + e / epb] * epb + e % epb;
      std::copy_n(p.pool.data() + row * hd, hd, c.data() + e * hd);
    }
    p.contiguous.push_back(std::move(c));
  }
  if (p.tables.empty()) p.tables.push_back(0);
  return p;
}

// row_info for rows laid out sequence after sequence, a gap of `gap` scores between
// sequences (so no row may rely on its neighbours' layout). Returns the buffer size.
int64_t make_rows(const std::vector<Seq>& seqs, const std::vector<int64_t>& table_begin, int64_t gap,
                  std::vector<int64_t>& info, int64_t& max_keys) {
  int64_t off = 0;
  max_keys = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    for (int64_t r = 0; r < seqs[i].n; ++r)
      info.insert(info.end(), {seqs[i].keys, off + r * seqs[i].keys, table_begin.empty() ? 0 : table_begin[i], -1});
    off += seqs[i].n * seqs[i].keys + gap;
    max_keys = std::max(max_keys, seqs[i].keys);
  }
  return std::max<int64_t>(off, 1);
}

std::vector<int64_t> float_bits(const std::vector<float>& v) {
  std::vector<int64_t> b(v.size());
  for (size_t i = 0; i < v.size(); ++i) b[i] = int64_t(std::bit_cast<uint32_t>(v[i]));
  return b;
}

// Scores of ragged sequences against their own paged keys vs the CPU op per
// sequence; and the first sequence alone gives the same bits as inside the batch.
OpCase paged_score_case(std::string name, std::vector<Seq> seqs, int64_t heads, int64_t hd, int64_t epb) {
  return {name, "indexer_score", [=](Rng& rng) {
            const PagedKeys pk = make_paged(rng, seqs, hd, epb);
            std::vector<int64_t> info;
            int64_t max_keys = 0;
            const int64_t size = make_rows(seqs, pk.table_begin, 5, info, max_keys);
            const int64_t rows = int64_t(info.size()) / 4;
            const auto q = randn(rng, size_t(rows * heads * hd));
            const auto w = randn(rng, size_t(rows * heads), 1.0f / std::sqrt(float(heads)));
            const float scale = 1.0f / std::sqrt(float(hd));
            std::vector<float> cpu, gpu;
            Dev<float> dq(q), dw(w), dpool(pk.pool), ds(static_cast<size_t>(size));
            Dev<int64_t> dtab(pk.tables), dinfo(info);
            ops::cuda::indexer_score_paged({dq.get(), dw.get(), dpool.get(), dtab.get(), dinfo.get(), rows, heads, hd, epb,
                                            max_keys, scale, ds.get()},
                                           nullptr);
            const auto all = ds.host();
            int64_t row0 = 0;
            for (size_t i = 0; i < seqs.size(); ++i) {
              const Seq& sq = seqs[i];
              std::vector<float> s(static_cast<size_t>(sq.n * sq.keys));
              ops::cpu::indexer_score({q.data() + row0 * heads * hd, w.data() + row0 * heads, pk.contiguous[i].data(),
                                       sq.n, heads, hd, sq.keys, scale, s.data()});
              cpu.insert(cpu.end(), s.begin(), s.end());
              const int64_t b0 = info[row0 * 4 + 1];
              gpu.insert(gpu.end(), all.begin() + b0, all.begin() + b0 + sq.n * sq.keys);
              row0 += sq.n;
            }
            // Sequence 0 alone: a one-sequence row_info over the same pool.
            const Seq& s0 = seqs[0];
            std::vector<int64_t> info0(info.begin(), info.begin() + s0.n * 4);
            Dev<int64_t> dinfo0(info0);
            Dev<float> ds0(static_cast<size_t>(std::max<int64_t>(1, s0.n * s0.keys)));
            ops::cuda::indexer_score_paged({dq.get(), dw.get(), dpool.get(), dtab.get(), dinfo0.get(), s0.n, heads, hd,
                                            epb, s0.keys, scale, ds0.get()},
                                           nullptr);
            const auto alone = ds0.host();
            Outputs o{{{"scores", cpu, gpu}}, {}};
            o.ints.push_back({"seq0_alone_vs_batched_bits",
                              float_bits(std::vector<float>(gpu.begin(), gpu.begin() + s0.n * s0.keys)),
                              float_bits(std::vector<float>(alone.begin(), alone.begin() + s0.n * s0.keys))});
            return o;
          }};
}

// The batched selection over ragged sequences vs the CPU op run per sequence, on
// coarse-grid scores (exact ties everywhere).
OpCase batch_select_case(std::string name, Level level, std::vector<Seq> seqs, int64_t ratio, int64_t top_k,
                         int64_t topk_blocks = 0, int64_t block_size = 8) {
  return {name, "indexer_select", [=](Rng& rng) {
            std::vector<int64_t> info;
            int64_t max_keys = 0;
            const int64_t size = make_rows(seqs, {}, 3, info, max_keys);
            const int64_t rows = int64_t(info.size()) / 4;
            std::vector<float> scores(static_cast<size_t>(size));
            for (auto& v : scores) v = float(randint(rng, -16, 16)) / 8.0f;
            std::vector<int64_t> pos(static_cast<size_t>(rows));
            // Level-2 masks in their own buffer, sequences in reverse order; every
            // third sequence has none (cand_begin -1).
            int64_t cand_size = 0;
            std::vector<int64_t> cand_off(seqs.size(), -1);
            for (size_t i = seqs.size(); i-- > 0;)
              if (i % 3 != 2) cand_off[i] = cand_size, cand_size += seqs[i].n * seqs[i].keys + 1;
            std::vector<uint8_t> cand_in(static_cast<size_t>(std::max<int64_t>(1, cand_size)));
            for (auto& c : cand_in) c = randint(rng, 0, 9) < 7;
            int64_t row0 = 0;
            for (size_t i = 0; i < seqs.size(); ++i) {
              const Seq& sq = seqs[i];
              for (int64_t r = 0; r < sq.n; ++r) {
                int64_t& p = pos[row0 + r];
                p = sq.keys > 0 ? randint(rng, 0, sq.keys * ratio - 1) : 0;
                if (r == 0) p = std::max<int64_t>(0, ratio - 2);        // nothing visible yet (ratio > 1)
                if (r == 1 && sq.keys > 0) p = sq.keys * ratio - 1;     // everything visible
                if (level == Level::kCandidateUser && cand_off[i] >= 0)
                  info[(row0 + r) * 4 + 3] = cand_off[i] + r * sq.keys;
              }
              row0 += sq.n;
            }
            Dev<float> ds(scores);
            Dev<int64_t> dinfo(info), dpos(pos), dsel(static_cast<size_t>(rows * (1 + top_k)));
            Dev<uint8_t> dcin(cand_in), dcout(static_cast<size_t>(size));
            ops::cuda::IndexerSelectBatchParams dp;
            dp.scores = ds.get();
            dp.row_info = dinfo.get();
            dp.rows = rows;
            dp.max_keys = max_keys;
            dp.positions = dpos.get();
            dp.ratio = ratio;
            dp.top_k = top_k;
            dp.counts = dsel.get();
            dp.ids = dsel.get() + rows;
            if (level == Level::kCandidateSource) {
              dp.candidates_out = dcout.get();
              dp.candidate_topk_blocks = topk_blocks;
              dp.candidate_block_size = block_size;
            }
            if (level == Level::kCandidateUser) dp.candidates_in = dcin.get();
            ops::cuda::indexer_select_batch(dp, nullptr);
            const auto g_scores = ds.host();
            const auto g_sel = dsel.host();
            const auto g_cand = dcout.host();

            Outputs o;
            FloatOut masked{"masked_scores", {}, {}};
            IntOut offsets{"offsets", {0}, {0}}, ids{"ids", {}, {}}, cands{"candidates", {}, {}};
            row0 = 0;
            for (size_t i = 0; i < seqs.size(); ++i) {
              const Seq& sq = seqs[i];
              const int64_t b0 = info[row0 * 4 + 1], cnt = sq.n * sq.keys;
              std::vector<float> s(scores.begin() + b0, scores.begin() + b0 + cnt);
              std::vector<uint8_t> cout(static_cast<size_t>(cnt));
              ops::IndexerSelectParams hp;
              hp.scores = s.data();
              hp.n = sq.n;
              hp.num_keys = sq.keys;
              hp.positions = pos.data() + row0;
              hp.ratio = ratio;
              hp.top_k = std::min(top_k, sq.keys);
              if (level == Level::kCandidateSource) {
                hp.candidates_out = cout.data();
                hp.candidate_topk_blocks = topk_blocks;
                hp.candidate_block_size = block_size;
              }
              if (level == Level::kCandidateUser && cand_off[i] >= 0) hp.candidates_in = cand_in.data() + cand_off[i];
              const ops::Selection cs = ops::cpu::indexer_select(hp);
              masked.cpu.insert(masked.cpu.end(), s.begin(), s.end());
              masked.gpu.insert(masked.gpu.end(), g_scores.begin() + b0, g_scores.begin() + b0 + cnt);
              for (int64_t r = 0; r < sq.n; ++r) {
                offsets.cpu.push_back(int64_t(ids.cpu.size()) + cs.offsets[r + 1] - cs.offsets[r]);
                ids.cpu.insert(ids.cpu.end(), cs.ids.begin() + cs.offsets[r], cs.ids.begin() + cs.offsets[r + 1]);
                const int64_t t = row0 + r, c = g_sel[t];
                offsets.gpu.push_back(offsets.gpu.back() + c);
                if (c >= 0 && c <= top_k)
                  ids.gpu.insert(ids.gpu.end(), g_sel.begin() + rows + t * top_k, g_sel.begin() + rows + t * top_k + c);
              }
              if (level == Level::kCandidateSource) {
                cands.cpu.insert(cands.cpu.end(), cout.begin(), cout.end());
                cands.gpu.insert(cands.gpu.end(), g_cand.begin() + b0, g_cand.begin() + b0 + cnt);
              }
              row0 += sq.n;
            }
            o.floats.push_back(std::move(masked));
            o.ints.push_back(std::move(offsets));
            o.ints.push_back(std::move(ids));
            if (level == Level::kCandidateSource) o.ints.push_back(std::move(cands));
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
      // Batched / paged: ragged sequences (1..64 queries, 0..32K keys), shuffled blocks.
      paged_score_case("indexer_score_paged_v41", {{1, 1}, {3, 777}, {1, 4096}, {2, 0}, {5, 130}}, 32, 128, 16),
      paged_score_case("indexer_score_paged_32k", {{1, 32768}, {2, 20000}, {64, 300}, {1, 1}, {3, 0}}, 4, 32, 64),
      paged_score_case("indexer_score_paged_64q", {{64, 200}, {17, 513}, {1, 64}}, 32, 128, 32),
      batch_select_case("indexer_select_batch_plain", Level::kPlain,
                        {{1, 32768}, {3, 3000}, {64, 600}, {2, 0}, {1, 1}, {5, 50}}, 4, 512),
      batch_select_case("indexer_select_batch_level1", Level::kCandidateSource,
                        {{1, 32768}, {2, 20000}, {4, 100}, {1, 0}, {7, 4000}}, 1, 512, 2048, 8),
      batch_select_case("indexer_select_batch_level1_small", Level::kCandidateSource, {{5, 2000}, {3, 100}, {64, 77}},
                        2, 128, 64, 8),
      batch_select_case("indexer_select_batch_level2", Level::kCandidateUser,
                        {{1, 32768}, {8, 3000}, {2, 500}, {1, 0}, {3, 17}, {64, 40}}, 1, 512),
      batch_select_case("indexer_select_batch_k0", Level::kPlain, {{3, 64}, {1, 5}}, 1, 0),
  };
}

}  // namespace deepinfer::testing_cuda
