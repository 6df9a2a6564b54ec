// Indexer scores and the selection (masking, level-1 candidates, top-k with ties).
#include <algorithm>
#include <bit>
#include <cmath>

#include "harness.h"
#include "kernels/cuda/smxx_indexer.cuh"
#include "kernels/cuda/smxx_topk.cuh"
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

// FP4 fake-quantized values as the model feeds the indexer: e2m1 codes times a power
// of two per block of 32 (MODEL_V41.md 4.3), exact in bf16.
void to_fp4_grid(Rng& rng, std::vector<float>& v) {
  static const float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  float scale = 1.0f;
  for (size_t i = 0; i < v.size(); ++i) {
    if (i % 32 == 0) scale = std::ldexp(1.0f, int(randint(rng, -4, 1)));
    v[i] = (randint(rng, 0, 1) ? -1.0f : 1.0f) * kE2m1[randint(rng, 0, 7)] * scale;
  }
}

// The kernel's arguments for V4.1-like paged scores (scale 1 / sqrt(hd)).
kernels::PagedIndexerScoreArgs paged_args(const float* q, const float* w, const float* pool, const int64_t* tables,
                                          const int64_t* row_info, int64_t rows, int64_t heads, int64_t hd,
                                          int64_t epb, int64_t max_keys, float* out, kernels::IndexerScorePath path) {
  kernels::PagedIndexerScoreArgs a;
  a.q = q;
  a.w = w;
  a.keys = pool;
  a.tables = tables;
  a.row_info = row_info;
  a.rows = rows;
  a.heads = heads;
  a.head_dim = hd;
  a.entries_per_block = epb;
  a.max_keys = max_keys;
  a.softmax_scale = 1.0f / std::sqrt(float(hd));
  a.scores = out;
  a.path = path;
  return a;
}

// Scores of ragged sequences against their own paged keys vs the CPU op per
// sequence; and the first sequence alone gives the same bits as inside the batch.
// `path` forces the kernel's SIMT or tensor-core path (kAuto: through the op);
// `fp4` puts q and the keys on the FP4 grid (the tensor-core path's one-MMA case).
OpCase paged_score_case(std::string name, std::vector<Seq> seqs, int64_t heads, int64_t hd, int64_t epb,
                        kernels::IndexerScorePath path = kernels::IndexerScorePath::kAuto, bool fp4 = false) {
  return {name, "indexer_score", [=](Rng& rng) {
            PagedKeys pk = make_paged(rng, seqs, hd, epb);
            std::vector<int64_t> info;
            int64_t max_keys = 0;
            const int64_t size = make_rows(seqs, pk.table_begin, 5, info, max_keys);
            const int64_t rows = int64_t(info.size()) / 4;
            auto q = randn(rng, size_t(rows * heads * hd));
            if (fp4) {
              to_fp4_grid(rng, q);
              to_fp4_grid(rng, pk.pool);
              for (size_t i = 0; i < seqs.size(); ++i)  // the CPU's contiguous copies of the keys
                for (int64_t e = 0; e < seqs[i].keys; ++e) {
                  const int64_t row = pk.tables[pk.table_begin[i] + e / epb] * epb + e % epb;
                  std::copy_n(pk.pool.data() + row * hd, hd, pk.contiguous[i].data() + e * hd);
                }
            }
            const auto w = randn(rng, size_t(rows * heads), 1.0f / std::sqrt(float(heads)));
            const float scale = 1.0f / std::sqrt(float(hd));
            std::vector<float> cpu, gpu;
            Dev<float> dq(q), dw(w), dpool(pk.pool), ds(static_cast<size_t>(size));
            Dev<int64_t> dtab(pk.tables), dinfo(info);
            auto score = [&](const int64_t* row_info, int64_t n, int64_t mk, float* out) {
              if (path == kernels::IndexerScorePath::kAuto) {
                ops::cuda::indexer_score_paged(
                    {dq.get(), dw.get(), dpool.get(), dtab.get(), row_info, n, heads, hd, epb, mk, scale, out}, nullptr);
                return;
              }
              const auto a = paged_args(dq.get(), dw.get(), dpool.get(), dtab.get(), row_info, n, heads, hd, epb, mk, out, path);
              check_cuda(kernels::indexer_score_paged(a, nullptr), "indexer_score_paged");
            };
            score(dinfo.get(), rows, max_keys, ds.get());
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
            score(dinfo0.get(), s0.n, s0.keys, ds0.get());
            const auto alone = ds0.host();
            Outputs o{{{"scores", cpu, gpu}}, {}};
            // FP4-grid operands make every dot exact, and the tensor-core path sums the
            // heads in the CPU's order without contraction: the CPU's bits.
            const bool mma = path == kernels::IndexerScorePath::kMma || path == kernels::IndexerScorePath::kMmaRows ||
                             path == kernels::IndexerScorePath::kWgmma;
            if (fp4 && mma) o.ints.push_back({"bits_vs_cpu", float_bits(cpu), float_bits(gpu)});
            o.ints.push_back({"seq0_alone_vs_batched_bits",
                              float_bits(std::vector<float>(gpu.begin(), gpu.begin() + s0.n * s0.keys)),
                              float_bits(std::vector<float>(alone.begin(), alone.begin() + s0.n * s0.keys))});
            return o;
          }};
}

// The grouped-rows kernel (kMmaRows) against the per-row one (kMma): bitwise, on rows
// whose key counts differ inside a sequence as in a causal prefill chunk (row r of a
// sequence of n rows sees keys - (n - 1 - r) keys), groups of four rows that straddle
// sequences, and both operand kinds (FP4-grid: one MMA; random fp32: the split). The
// buffers start from the same poison, so unwritten scores must stay unwritten too.
OpCase rows_vs_per_row_case(std::string name, std::vector<Seq> seqs, int64_t epb, bool fp4) {
  return {name, "indexer_score", [=](Rng& rng) {
            constexpr int64_t heads = 32, hd = 128;
            PagedKeys pk = make_paged(rng, seqs, hd, epb);
            std::vector<int64_t> info;
            int64_t max_keys = 0;
            const int64_t size = make_rows(seqs, pk.table_begin, 5, info, max_keys);
            const int64_t rows = int64_t(info.size()) / 4;
            for (int64_t t = 0, i = 0; i < int64_t(seqs.size()); ++i)  // causal counts
              for (int64_t r = 0; r < seqs[size_t(i)].n; ++r, ++t)
                info[size_t(t * 4)] = std::max<int64_t>(0, seqs[size_t(i)].keys - (seqs[size_t(i)].n - 1 - r));
            auto q = randn(rng, size_t(rows * heads * hd));
            if (fp4) {
              to_fp4_grid(rng, q);
              to_fp4_grid(rng, pk.pool);
            }
            const auto w = randn(rng, size_t(rows * heads), 1.0f / std::sqrt(float(heads)));
            Dev<float> dq(q), dw(w), dpool(pk.pool), d_rows(static_cast<size_t>(size)), d_one(static_cast<size_t>(size));
            Dev<int64_t> dtab(pk.tables), dinfo(info);
            for (auto [path, out] : {std::pair{kernels::IndexerScorePath::kMmaRows, d_rows.get()},
                                     std::pair{kernels::IndexerScorePath::kMma, d_one.get()}}) {
              const auto a = paged_args(dq.get(), dw.get(), dpool.get(), dtab.get(), dinfo.get(), rows, heads, hd, epb,
                                        max_keys, out, path);
              check_cuda(kernels::indexer_score_paged(a, nullptr), "indexer_score_paged");
            }
            Outputs o;
            o.ints.push_back({"rows_kernel_vs_per_row_bits", float_bits(d_one.host()), float_bits(d_rows.host())});
            return o;
          }};
}

// The wgmma kernel (kWgmma) against the grouped-rows one (kMmaRows), bitwise. Operands:
// kFp4 the model's FP4 grid (every k16 step exact), kFp4Wide FP4 codes under scales 2^-24..2^8
// per 32 channels (the running fp32 sums round: the bits then rest on wgmma's k16 step
// rounding as mma.sync's), kF32 random fp32 (every tile takes the split fallback), kMixed FP4
// with one inexact q value in one row and a few inexact keys (exact and fallback tiles in one
// call). Causal counts as in a prefill chunk (row r of n sees keys - (n - 1 - r) / ratio):
// in row_info (positions off), or, as the model passes them, through positions with every
// row's row_info count at the sequence's keys; then the keys a row cannot see must stay
// unwritten (poison) and the visible ones match the grouped kernel's bits.
enum class Operands { kFp4, kFp4Wide, kF32, kMixed };
OpCase wgmma_vs_rows_case(std::string name, std::vector<Seq> seqs, int64_t epb, Operands kind, int64_t ratio,
                          bool positions) {
  return {name, "indexer_score", [=](Rng& rng) {
            constexpr int64_t heads = 32, hd = 128;
            PagedKeys pk = make_paged(rng, seqs, hd, epb);
            std::vector<int64_t> info;
            int64_t max_keys = 0;
            const int64_t size = make_rows(seqs, pk.table_begin, 5, info, max_keys);
            const int64_t rows = int64_t(info.size()) / 4;
            std::vector<int64_t> pos(static_cast<size_t>(std::max<int64_t>(1, rows))), visible(pos.size());
            for (int64_t t = 0, i = 0; i < int64_t(seqs.size()); ++i)
              for (int64_t r = 0; r < seqs[size_t(i)].n; ++r, ++t) {
                const Seq& sq = seqs[size_t(i)];
                pos[size_t(t)] = sq.keys * ratio - 1 - (sq.n - 1 - r);  // may be negative: nothing visible
                visible[size_t(t)] = std::clamp<int64_t>((pos[size_t(t)] + 1) / ratio, 0, sq.keys);
                if (!positions) info[size_t(t * 4)] = visible[size_t(t)];
              }
            auto q = randn(rng, size_t(rows * heads * hd));
            auto grid = [&](std::vector<float>& v, int lo, int hi) {
              static const float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
              float sc = 1.0f;
              for (size_t i = 0; i < v.size(); ++i) {
                if (i % 32 == 0) sc = std::ldexp(1.0f, int(randint(rng, lo, hi)));
                v[i] = (randint(rng, 0, 1) ? -1.0f : 1.0f) * kE2m1[randint(rng, 0, 7)] * sc;
              }
            };
            if (kind == Operands::kFp4 || kind == Operands::kMixed) grid(q, -4, 1), grid(pk.pool, -4, 1);
            if (kind == Operands::kFp4Wide) grid(q, -24, 8), grid(pk.pool, -24, 8);
            if (kind == Operands::kMixed) {
              if (rows > 20) q[size_t(20 * heads * hd + 77)] += 1e-3f;
              for (int k = 0; k < 3; ++k) pk.pool[size_t(randint(rng, 0, int64_t(pk.pool.size()) - 1))] += 1e-3f;
            }
            const auto w = randn(rng, size_t(rows * heads), 1.0f / std::sqrt(float(heads)));
            Dev<float> dq(q), dw(w), dpool(pk.pool), d_rows(static_cast<size_t>(size)), d_wg(static_cast<size_t>(size));
            Dev<int64_t> dtab(pk.tables), dinfo(info), dpos(pos);
            auto a = paged_args(dq.get(), dw.get(), dpool.get(), dtab.get(), dinfo.get(), rows, heads, hd, epb, max_keys,
                                d_rows.get(), kernels::IndexerScorePath::kMmaRows);
            check_cuda(kernels::indexer_score_paged(a, nullptr), "indexer_score_paged rows");
            a.path = kernels::IndexerScorePath::kWgmma;
            a.scores = d_wg.get();
            if (positions) a.positions = dpos.get(), a.ratio = ratio;
            check_cuda(kernels::indexer_score_paged(a, nullptr), "indexer_score_paged wgmma");
            std::vector<float> want = d_rows.host();
            const std::vector<float> got = d_wg.host();
            for (int64_t t = 0; t < rows; ++t)  // invisible keys: the wgmma kernel leaves them
              for (int64_t s = 0; s < info[size_t(t * 4)]; ++s) {
                if (s >= visible[size_t(t)]) want[size_t(info[size_t(t * 4 + 1)] + s)] = std::bit_cast<float>(~0u);
              }
            Outputs o;
            o.ints.push_back({"wgmma_vs_rows_bits", float_bits(want), float_bits(got)});
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


// ---- top-k kernel itself, each path forced ----------------------------------------

enum class Data { kGauss, kGrid, kConst, kSparse, kSpecial };

float draw(Rng& rng, Data d) {
  switch (d) {
    case Data::kGauss: return std::normal_distribution<float>(0.0f, 1.0f)(rng);
    case Data::kGrid: return float(randint(rng, -16, 16)) / 8.0f;  // exact ties everywhere
    case Data::kConst: return 0.75f;
    case Data::kSparse: return randint(rng, 0, 9) < 7 ? -INFINITY : float(randint(rng, -16, 16)) / 8.0f;
    case Data::kSpecial:
      switch (randint(rng, 0, 9)) {
        case 0: return std::bit_cast<float>(0x7fc00000u);  // +NaN
        case 1: return std::bit_cast<float>(0xffc00001u);  // -NaN (a payload, too)
        case 2: return INFINITY;
        case 3: return -INFINITY;
        case 4: return -0.0f;
        case 5: return 0.0f;
        default: return float(randint(rng, -16, 16)) / 8.0f;
      }
  }
  return 0.0f;
}

// The kernel's documented order, written independently: NaN above +inf, -0 == +0,
// ties to the lower index, -inf never kept, the kept ids ascending.
std::vector<int64_t> reference_topk(const float* v, int64_t size, int64_t k) {
  auto rank = [](float f) { return std::isnan(f) ? std::make_pair(1, 0.0f) : std::make_pair(0, f == 0.0f ? 0.0f : f); };
  std::vector<int64_t> order;
  for (int64_t i = 0; i < size; ++i)
    if (!(v[i] == -INFINITY)) order.push_back(i);
  const size_t kk = std::min<size_t>(size_t(k), order.size());
  std::partial_sort(order.begin(), order.begin() + kk, order.end(), [&](int64_t a, int64_t b) {
    const auto ra = rank(v[a]), rb = rank(v[b]);
    return ra > rb || (ra == rb && a < b);
  });
  order.resize(kk);
  std::sort(order.begin(), order.end());
  return order;
}

// rows x keys scores (ragged: each row its own length <= keys and a start at an odd
// offset, so vectors straddle row ends), top-k through kernels::topk_rows with `algo`,
// against the CPU op (NaN-free data) and the reference above. Shapes pick the
// cluster size (1 block per row .. 8).
OpCase topk_case(std::string name, kernels::TopkAlgo algo, Data data, int64_t rows, int64_t keys, int64_t k,
                 bool ragged = false, int cluster = 0) {
  return {name, "indexer_select", [=](Rng& rng) {
            std::vector<int64_t> begin(rows), size(rows);
            int64_t total = 0;
            for (int64_t r = 0; r < rows; ++r) {
              total += ragged ? randint(rng, 0, 3) : 0;
              begin[r] = total;
              size[r] = ragged ? (r == 0 ? 0 : r == 1 ? keys : randint(rng, 0, keys)) : keys;
              total += ragged ? size[r] : keys;
            }
            std::vector<float> v(static_cast<size_t>(std::max<int64_t>(1, total)));
            for (auto& x : v) x = draw(rng, data);
            Dev<float> dv(v);
            Dev<int64_t> dids(static_cast<size_t>(rows * k)), dcounts(static_cast<size_t>(rows));
            Dev<int64_t> dbegin(begin), dsize(size);
            kernels::TopkArgs a;
            a.v = dv.get();
            a.rows = rows;
            a.size = keys;
            a.ld = keys;
            a.k = k;
            a.ids = dids.get();
            a.counts = dcounts.get();
            if (ragged) a.row_begin = dbegin.get(), a.row_size = dsize.get();
            a.algo = algo;
            a.cluster = cluster;
            check_cuda(kernels::topk_rows(a, nullptr), "topk_rows");
            const auto g_ids = dids.host();
            const auto g_counts = dcounts.host();
            IntOut ref{"ids_vs_reference", {}, {}}, cpu{"ids_vs_cpu_op", {}, {}}, pad{"padding", {}, {}};
            for (int64_t r = 0; r < rows; ++r) {
              const float* row = v.data() + begin[r];
              const auto want = reference_topk(row, size[r], k);
              ref.cpu.push_back(int64_t(want.size()));
              ref.cpu.insert(ref.cpu.end(), want.begin(), want.end());
              const int64_t c = g_counts[r];
              ref.gpu.push_back(c);
              if (c >= 0 && c <= k) {
                ref.gpu.insert(ref.gpu.end(), g_ids.begin() + r * k, g_ids.begin() + r * k + c);
                for (int64_t j = c; j < k; ++j) pad.cpu.push_back(-1), pad.gpu.push_back(g_ids[r * k + j]);
              }
              if (data != Data::kSpecial && size[r] > 0) {
                // The oracle itself: every key visible (position size - 1 at ratio 1).
                std::vector<float> s(row, row + size[r]);
                const int64_t pos = size[r] - 1;
                ops::IndexerSelectParams hp;
                hp.scores = s.data();
                hp.n = 1;
                hp.num_keys = size[r];
                hp.positions = &pos;
                hp.ratio = 1;
                hp.top_k = k;
                const ops::Selection cs = ops::cpu::indexer_select(hp);
                cpu.cpu.insert(cpu.cpu.end(), cs.ids.begin(), cs.ids.end());
                if (c >= 0 && c <= k) cpu.gpu.insert(cpu.gpu.end(), g_ids.begin() + r * k, g_ids.begin() + r * k + c);
              }
            }
            Outputs o;
            o.ints.push_back(std::move(ref));
            o.ints.push_back(std::move(cpu));
            o.ints.push_back(std::move(pad));
            return o;
          }};
}

}  // namespace

std::vector<OpCase> indexer_cases() {
  std::vector<OpCase> cases = {
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
      // Each path forced at V4.1's shape (the op picks the tensor cores there): random
      // fp32 (the tensor-core path's six-MMA exact split) and FP4-grid values (one MMA).
      paged_score_case("indexer_score_paged_simt_v41", {{1, 1}, {3, 777}, {1, 4096}, {2, 0}, {5, 130}}, 32, 128, 16,
                       kernels::IndexerScorePath::kSimt),
      paged_score_case("indexer_score_paged_mma_v41", {{1, 1}, {3, 777}, {1, 4096}, {2, 0}, {5, 130}}, 32, 128, 16,
                       kernels::IndexerScorePath::kMma),
      paged_score_case("indexer_score_paged_mma_fp4", {{1, 3000}, {4, 777}, {64, 65}, {1, 0}}, 32, 128, 64,
                       kernels::IndexerScorePath::kMma, true),
      paged_score_case("indexer_score_paged_simt_fp4", {{1, 3000}, {4, 777}, {64, 65}, {1, 0}}, 32, 128, 64,
                       kernels::IndexerScorePath::kSimt, true),
      // Several rows per block (prefill chunks): vs the CPU, and bitwise vs the per-row kernel.
      paged_score_case("indexer_score_paged_rows_v41", {{1, 1}, {3, 777}, {1, 4096}, {2, 0}, {5, 130}}, 32, 128, 16,
                       kernels::IndexerScorePath::kMmaRows),
      paged_score_case("indexer_score_paged_rows_fp4", {{1, 3000}, {4, 777}, {64, 65}, {1, 0}, {7, 300}}, 32, 128, 64,
                       kernels::IndexerScorePath::kMmaRows, true),
      rows_vs_per_row_case("indexer_score_rows_causal_fp4", {{37, 700}, {1, 1}, {6, 3}, {2, 0}, {130, 2100}}, 64, true),
      rows_vs_per_row_case("indexer_score_rows_causal_f32", {{9, 300}, {3, 2}, {70, 1000}}, 16, false),
      // The wgmma kernel: vs the CPU (random fp32: its fallback; FP4: the CPU's bits), and
      // bitwise vs the grouped-rows kernel (causal counts, blocks of 16 rows straddling
      // sequences, ratio 1 and 2 through positions, tails of tiles and chunks; the last case
      // has >= 264 row blocks, so one key chunk per block).
      paged_score_case("indexer_score_wgmma_v41", {{1, 1}, {3, 777}, {1, 4096}, {2, 0}, {5, 130}, {40, 300}}, 32, 128,
                       16, kernels::IndexerScorePath::kWgmma),
      paged_score_case("indexer_score_wgmma_fp4", {{1, 3000}, {4, 777}, {64, 65}, {1, 0}, {7, 300}, {33, 1000}}, 32,
                       128, 64, kernels::IndexerScorePath::kWgmma, true),
      wgmma_vs_rows_case("indexer_score_wgmma_causal_fp4", {{37, 700}, {1, 1}, {6, 3}, {2, 0}, {130, 2100}}, 64,
                         Operands::kFp4, 1, false),
      wgmma_vs_rows_case("indexer_score_wgmma_causal_f32", {{9, 300}, {3, 2}, {70, 1000}}, 16, Operands::kF32, 1, false),
      wgmma_vs_rows_case("indexer_score_wgmma_causal_mixed", {{45, 900}, {20, 129}, {3, 64}}, 64, Operands::kMixed, 1,
                         false),
      wgmma_vs_rows_case("indexer_score_wgmma_wide_scales", {{50, 1500}, {18, 200}}, 64, Operands::kFp4Wide, 1, false),
      wgmma_vs_rows_case("indexer_score_wgmma_pos_r1", {{300, 1200}, {5, 40}, {27, 513}}, 64, Operands::kFp4, 1, true),
      wgmma_vs_rows_case("indexer_score_wgmma_pos_r2", {{401, 900}, {1, 1}, {16, 64}}, 32, Operands::kFp4, 2, true),
      wgmma_vs_rows_case("indexer_score_wgmma_pos_r1_4400", {{4400, 2100}}, 64, Operands::kFp4, 1, true),
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
  // The model's shapes (rows 1..256, 4K..256K keys, k 512 / 2048) on both paths;
  // the comment names the radix path's blocks per row (kernels::topk_cluster_size).
  using kernels::TopkAlgo;
  for (TopkAlgo algo : {TopkAlgo::kRadix, TopkAlgo::kOneBlock}) {
    const std::string p = algo == TopkAlgo::kRadix ? "topk_radix_" : "topk_oneblock_";
    cases.push_back(topk_case(p + "gauss_1x262144_k2048", algo, Data::kGauss, 1, 262144, 2048));  // 8, cache + L2 tail
    cases.push_back(topk_case(p + "grid_8x131072_k512", algo, Data::kGrid, 8, 131072, 512));       // 8, all cached
    cases.push_back(topk_case(p + "const_32x65536_k2048", algo, Data::kConst, 32, 65536, 2048));  // 4, one tie class
    cases.push_back(topk_case(p + "gauss_64x16384_k512", algo, Data::kGauss, 64, 16384, 512));      // 2
    cases.push_back(topk_case(p + "grid_256x16384_k2048", algo, Data::kGrid, 256, 16384, 2048));   // 1
    cases.push_back(topk_case(p + "sparse_256x4096_k512", algo, Data::kSparse, 256, 4096, 512));   // 1, some take all
    cases.push_back(topk_case(p + "special_8x4096_k512", algo, Data::kSpecial, 8, 4096, 512));     // 1, NaN / inf / -0
    cases.push_back(topk_case(p + "special_2x65536_k2048", algo, Data::kSpecial, 2, 65536, 2048));  // 8
    cases.push_back(topk_case(p + "take_all_16x1000_k2048", algo, Data::kGauss, 16, 1000, 2048));   // 1, k >= keys
    cases.push_back(topk_case(p + "ragged_grid_40x40000_k512", algo, Data::kGrid, 40, 40000, 512, true));  // 4
    cases.push_back(topk_case(p + "ragged_gauss_300x5000_k512", algo, Data::kGauss, 300, 5000, 512, true));  // 1
  }
  // Cluster sizes forced where the rule would not pick them (tiny slices, one row on one SM).
  cases.push_back(topk_case("topk_radix_c8_grid_3x700_k64", TopkAlgo::kRadix, Data::kGrid, 3, 700, 64, true, 8));
  cases.push_back(topk_case("topk_radix_c1_gauss_2x131072_k2048", TopkAlgo::kRadix, Data::kGauss, 2, 131072, 2048,
                            false, 1));
  cases.push_back(topk_case("topk_radix_c2_special_5x9000_k512", TopkAlgo::kRadix, Data::kSpecial, 5, 9000, 512, true, 2));
  return cases;
}

}  // namespace deepinfer::testing_cuda
