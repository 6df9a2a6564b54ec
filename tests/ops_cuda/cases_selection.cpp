// The attention's selection lists (kernels::build_selection_lists): the one-launch decode
// path (NOTES 50) against the five launches it replaces, on graph-step layouts (token t is
// item t, padding rows as items without selections). Family "fused" (bitwise): ids,
// offsets, the pool's bits, count and *bad must agree exactly; the flags scratch must stay
// untouched (poisoned) in the one-launch run, which proves that path ran.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "harness.h"
#include "kernels/cuda/smxx_selection.cuh"

namespace deepinfer::testing_cuda {

namespace {

namespace kn = kernels;

struct SelShape {
  int64_t n = 1;          // bucket rows (items)
  int64_t real = 1;       // items with a position (the rest are padding rows)
  int64_t win = 128, top_k = 512, dim = 512;
  int64_t ratio = 4, epb = 64;
  int64_t max_context = 8192;
  int null_every = 0;     // every k-th real item has no selection (0: none)
  bool full = false;      // every real item selects top_k (or all its entries)
  bool bad_ids = false;   // some ids outside [0, entries) and repeats
  bool small_bound = false;  // item 0's bound below its distinct entries
};

OpCase selection_case(std::string name, SelShape s) {
  return {name, "fused", [=](Rng& rng) {
            const int64_t n = s.n, win = s.win, top_k = s.top_k, dim = s.dim, epb = s.epb;
            const int64_t entry_cap = s.max_context / s.ratio + 1, item_rows = win + 1 + top_k;
            const int64_t table_width = (entry_cap + epb - 1) / epb;
            const int64_t blocks = n * table_width + 3;
            // Paged history and each item's block table (a random permutation of blocks).
            const auto entries = randn(rng, size_t(blocks * epb * dim));
            std::vector<int64_t> perm(static_cast<size_t>(blocks));
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), rng);
            std::vector<int64_t> tables(perm.begin(), perm.begin() + n * table_width);
            // One selection buffer for the bucket: counts [n], then ids [n, top_k]; slots past
            // a token's count hold junk that no path may read into a list.
            std::vector<int64_t> selbuf(static_cast<size_t>(n + n * top_k), 0);
            std::vector<int64_t> item_info(static_cast<size_t>(n * kn::kSelItemCols), 0), token_item(static_cast<size_t>(n));
            std::vector<bool> has_sel(static_cast<size_t>(n), false);
            std::vector<int64_t> w_offsets{0}, w_ids;
            for (int64_t i = 0; i < n; ++i) {
              token_item[size_t(i)] = i;
              int64_t* info = item_info.data() + i * kn::kSelItemCols;
              info[kn::kSelFlagBegin] = i * entry_cap;
              info[kn::kSelListBegin] = i * top_k;
              info[kn::kSelCompBase] = i * item_rows + win + 1;
              info[kn::kSelTableBegin] = i * table_width;
              for (int64_t j = 0; j < top_k; ++j) selbuf[size_t(n + i * top_k + j)] = randint(rng, -5, 1 << 20);
              if (i >= s.real) {  // padding: the query attends to pool row 0
                w_ids.push_back(0);
                w_offsets.push_back(int64_t(w_ids.size()));
                continue;
              }
              const int64_t pos = randint(rng, 0, s.max_context - 1);
              const int64_t base = i * item_rows;
              for (int64_t p = std::max<int64_t>(0, pos - win + 1); p <= pos; ++p)
                w_ids.push_back(p < pos ? base + p % win : base + win);
              w_offsets.push_back(int64_t(w_ids.size()));
              if (s.null_every > 0 && i % s.null_every == s.null_every - 1) continue;
              has_sel[size_t(i)] = true;
              const int64_t nk = std::max<int64_t>(1, std::min(entry_cap - 1, (pos + 1) / s.ratio));
              const int64_t bound = std::min(nk, top_k);
              info[kn::kSelEntries] = nk;
              info[kn::kSelBound] = (s.small_bound && i == 0) ? std::max<int64_t>(1, bound / 3) : bound;
              const int64_t cnt = s.full ? std::min(nk, top_k) : randint(rng, 0, std::min(nk, top_k));
              selbuf[size_t(i)] = cnt;
              // Distinct ids in a random order (the indexer's top-k of one query).
              std::vector<int64_t> pool_ids(static_cast<size_t>(nk));
              std::iota(pool_ids.begin(), pool_ids.end(), 0);
              std::shuffle(pool_ids.begin(), pool_ids.end(), rng);
              for (int64_t j = 0; j < cnt; ++j) {
                int64_t id = pool_ids[size_t(j)];
                if (s.bad_ids && j % 37 == 5) id = (j % 2) ? -1 - j : nk + j;  // outside the entries
                if (s.bad_ids && j % 41 == 7 && j > 0) id = selbuf[size_t(n + i * top_k + j - 1)];  // a repeat
                selbuf[size_t(n + i * top_k + j)] = id;
              }
            }
            const int64_t flag_count = n * entry_cap, list_count = n * top_k, window_ids = int64_t(w_ids.size());
            Dev<int64_t> d_info(item_info), d_token(token_item), d_sel(selbuf), d_tables(tables), d_woff(w_offsets),
                d_wids(w_ids);
            Dev<float> d_entries(entries);
            std::vector<const int64_t*> item_sel(static_cast<size_t>(n), nullptr);
            for (int64_t i = 0; i < n; ++i)
              if (has_sel[size_t(i)]) item_sel[size_t(i)] = d_sel.get();
            Dev<const int64_t*> d_item_sel(item_sel);

            struct Run {
              std::vector<int64_t> offsets, ids, pool_bits, count, bad;
              bool flags_untouched = true;
            };
            auto run = [&](int fuse) {
              Dev<uint8_t> flags(static_cast<size_t>(flag_count));
              Dev<int32_t> rank(static_cast<size_t>(flag_count));
              Dev<int64_t> list(static_cast<size_t>(list_count)), count(static_cast<size_t>(n)), offsets(static_cast<size_t>(n + 1)),
                  ids(static_cast<size_t>(window_ids + n * top_k));
              Dev<float> pool(static_cast<size_t>(n * item_rows * dim));
              std::vector<int> zero{0};
              Dev<int> bad(zero);
              kn::SelectionListArgs a;
              a.item_info = d_info.get();
              a.item_sel = d_item_sel.get();
              a.token_item = d_token.get();
              a.items = n;
              a.n = n;
              a.top_k = top_k;
              a.max_entries = entry_cap;
              a.max_bound = top_k;
              a.flag_count = flag_count;
              a.flags = flags.get();
              a.rank = rank.get();
              a.list = list.get();
              a.count = count.get();
              a.entries = d_entries.get();
              a.tables = d_tables.get();
              a.entries_per_block = epb;
              a.dim = dim;
              a.pool = pool.get();
              a.w_offsets = d_woff.get();
              a.w_ids = d_wids.get();
              a.offsets = offsets.get();
              a.ids = ids.get();
              a.bad = bad.get();
              a.one_token_per_item = true;
              kn::selection_set_fuse(fuse);
              const cudaError_t e = kn::build_selection_lists(a, nullptr);
              kn::selection_set_fuse(-1);
              check_cuda(e, "build_selection_lists");
              Run r;
              r.offsets = offsets.host();
              r.ids = ids.host();
              r.count = count.host();
              for (int v : bad.host()) r.bad.push_back(v);
              const auto p = pool.host();
              r.pool_bits.resize(p.size());
              for (size_t k = 0; k < p.size(); ++k) {
                uint32_t u = 0;
                std::memcpy(&u, &p[k], 4);
                r.pool_bits[k] = int64_t(u);
              }
              for (uint8_t f : flags.host()) r.flags_untouched = r.flags_untouched && f == 0xff;
              return r;
            };
            Run old = run(0), neu = run(1);
            if (!neu.flags_untouched) throw std::runtime_error(name + ": the one-launch path did not run");
            Outputs out;
            out.ints.push_back({"offsets", old.offsets, neu.offsets});
            out.ints.push_back({"ids", old.ids, neu.ids});
            out.ints.push_back({"pool_bits", old.pool_bits, neu.pool_bits});
            out.ints.push_back({"count", old.count, neu.count});
            out.ints.push_back({"bad", old.bad, neu.bad});
            return out;
          }};
}

}  // namespace

std::vector<OpCase> selection_cases() {
  std::vector<OpCase> c;
  SelShape s;  // V4.1: window 128, top-k 512, head dim 512; ratio 4 at 8K context, 64 entries a block
  s.full = true;
  c.push_back(selection_case("selection_fuse_v41_b1", s));
  s.full = false;
  s.n = 8, s.real = 5, s.null_every = 3;  // 3 padding rows, item 2 without a selection
  c.push_back(selection_case("selection_fuse_v41_b8_padding", s));
  s.n = 32, s.real = 29, s.null_every = 4, s.full = true;
  c.push_back(selection_case("selection_fuse_v41_b32", s));
  SelShape r128;  // ratio 128: at most 64 entries, fewer than top-k
  r128.ratio = 128, r128.epb = 2, r128.n = 16, r128.real = 13, r128.full = true;
  c.push_back(selection_case("selection_fuse_v41_ratio128_b16", r128));
  SelShape big;  // 64K context: a 16,385-entry bitmap of 513 words
  big.max_context = 65536, big.n = 3, big.real = 3, big.full = true;
  c.push_back(selection_case("selection_fuse_v41_64k_b3", big));
  SelShape bad;  // ids outside the entries, repeats, and a bound below the distinct count
  bad.n = 4, bad.real = 4, bad.full = true, bad.bad_ids = true, bad.small_bound = true;
  c.push_back(selection_case("selection_fuse_v41_bad_ids", bad));
  SelShape small;  // other shapes: window 4, top-k 40 (three chunks), rows of 8 floats
  small.win = 4, small.top_k = 40, small.dim = 8, small.ratio = 4, small.epb = 4, small.max_context = 400;
  small.n = 6, small.real = 5, small.null_every = 5;
  c.push_back(selection_case("selection_fuse_small", small));
  return c;
}

}  // namespace deepinfer::testing_cuda
