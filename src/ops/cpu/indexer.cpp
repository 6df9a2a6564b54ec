#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/parallel.h"
#include "ops/indexer.h"

namespace deepinfer::ops::cpu {

void indexer_score(const IndexerScoreParams& p) {
  parallel_for(p.n, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      for (int64_t s = 0; s < p.num_keys; ++s) {
        const float* k = p.keys + s * p.head_dim;
        float total = 0.0f;
        for (int64_t h = 0; h < p.heads; ++h) {
          const float* q = p.q + (t * p.heads + h) * p.head_dim;
          double dot = 0.0;
          for (int64_t d = 0; d < p.head_dim; ++d) dot += double(q[d]) * double(k[d]);
          float relu = std::max(float(dot), 0.0f) * p.softmax_scale;
          total += relu * p.w[t * p.heads + h];
        }
        p.scores[t * p.num_keys + s] = total;
      }
    }
  });
}

namespace {

// Indices of the top `k` values of v (ties: lower index first), in score order.
std::vector<int64_t> top_indices(const float* v, int64_t size, int64_t k) {
  std::vector<int64_t> order(size);
  std::iota(order.begin(), order.end(), 0);
  k = std::min(k, size);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](int64_t a, int64_t b) { return v[a] > v[b] || (v[a] == v[b] && a < b); });
  order.resize(k);
  return order;
}

}  // namespace

Selection indexer_select(const IndexerSelectParams& p) {
  const float kNegInf = -INFINITY;
  Selection sel;
  sel.offsets.push_back(0);
  std::vector<float> blocks;
  for (int64_t t = 0; t < p.n; ++t) {
    float* row = p.scores + t * p.num_keys;
    const int64_t visible = (p.positions[t] + 1) / p.ratio;
    for (int64_t s = visible; s < p.num_keys; ++s) row[s] = kNegInf;

    if (p.candidates_out != nullptr) {
      // Level 1: block score = max over the block; the block of the newest visible
      // entry is pinned (it may be partly filled); blocks that are -inf are dropped.
      const int64_t bs = p.candidate_block_size;
      const int64_t num_blocks = (p.num_keys + bs - 1) / bs;
      blocks.assign(num_blocks, kNegInf);
      for (int64_t s = 0; s < p.num_keys; ++s) blocks[s / bs] = std::max(blocks[s / bs], row[s]);
      // (A query claiming more visible entries than exist pins nothing, as in the
      // reference, where the pinned index then matches no block.)
      if (visible > 0 && (visible - 1) / bs < num_blocks) blocks[(visible - 1) / bs] = INFINITY;
      uint8_t* cand = p.candidates_out + t * p.num_keys;
      std::fill(cand, cand + p.num_keys, 0);
      for (int64_t b : top_indices(blocks.data(), num_blocks, p.candidate_topk_blocks)) {
        if (blocks[b] == kNegInf) continue;
        for (int64_t s = b * bs; s < std::min(p.num_keys, (b + 1) * bs); ++s) cand[s] = 1;
      }
    } else if (p.candidates_in != nullptr) {
      const uint8_t* cand = p.candidates_in + t * p.num_keys;
      for (int64_t s = 0; s < p.num_keys; ++s)
        if (!cand[s]) row[s] = kNegInf;
    }

    std::vector<int64_t> picks = top_indices(row, p.num_keys, p.top_k);
    std::vector<int64_t> kept;
    for (int64_t s : picks)
      if (row[s] != kNegInf) kept.push_back(s);
    std::sort(kept.begin(), kept.end());
    sel.ids.insert(sel.ids.end(), kept.begin(), kept.end());
    sel.offsets.push_back(int64_t(sel.ids.size()));
  }
  return sel;
}

}  // namespace deepinfer::ops::cpu
