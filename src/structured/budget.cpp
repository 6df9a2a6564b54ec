#include "structured/budget.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <span>

namespace deepinfer::structured {
namespace {

// Compressed adjacency: for each node its list of (node, weight) pairs.
struct Adjacency {
  std::vector<uint32_t> begin;
  std::vector<std::pair<uint32_t, uint32_t>> edges;
  std::span<const std::pair<uint32_t, uint32_t>> of(uint32_t x) const {
    return {edges.data() + begin[x], edges.data() + begin[x + 1]};
  }
};

Adjacency build(size_t n, const std::vector<std::pair<uint32_t, std::pair<uint32_t, uint32_t>>>& list) {
  Adjacency a;
  a.begin.assign(n + 1, 0);
  for (const auto& [from, e] : list) ++a.begin[from + 1];
  for (size_t i = 0; i < n; ++i) a.begin[i + 1] += a.begin[i];
  a.edges.resize(list.size());
  std::vector<uint32_t> fill(a.begin.begin(), a.begin.end() - 1);
  for (const auto& [from, e] : list) a.edges[fill[from]++] = e;
  return a;
}

}  // namespace

BudgetTables::BudgetTables(const CompiledGrammar& g, const VocabIndex& vocab) {
  const uint32_t n = g.num_states();
  rule_start_.resize(g.num_rules());
  for (uint32_t r = 0; r < g.num_rules(); ++r) rule_start_[r] = g.rule_start(r);

  // dist: a label-correcting shortest-path computation, smallest labels first. A
  // state's label depends on its byte targets and, through rule edges, on the callee's
  // start state (its shortest match) and the return state; when one of those improves,
  // the state is recomputed.
  dist_.assign(n, kInf);
  std::vector<std::pair<uint32_t, std::pair<uint32_t, uint32_t>>> dep_list;  // x -> (s, 0): s depends on x
  for (uint32_t s = 0; s < n; ++s) {
    for (const auto& e : g.byte_edges(s)) dep_list.push_back({e.to, {s, 0}});
    for (const auto& e : g.rule_edges(s)) {
      dep_list.push_back({e.to, {s, 0}});
      dep_list.push_back({g.rule_start(e.rule), {s, 0}});
    }
  }
  const Adjacency deps = build(n, dep_list);
  auto recompute = [&](uint32_t s) {
    uint32_t best = g.is_final(s) ? 0 : kInf;
    for (const auto& e : g.byte_edges(s)) best = std::min(best, add(1, dist_[e.to]));
    for (const auto& e : g.rule_edges(s)) best = std::min(best, add(dist_[g.rule_start(e.rule)], dist_[e.to]));
    return best;
  };
  using Label = std::pair<uint32_t, uint32_t>;  // (dist, state)
  std::priority_queue<Label, std::vector<Label>, std::greater<Label>> queue;
  for (uint32_t s = 0; s < n; ++s)
    if (g.is_final(s)) {
      dist_[s] = 0;
      queue.push({0, s});
    }
  while (!queue.empty()) {
    const auto [d, x] = queue.top();
    queue.pop();
    if (d != dist_[x]) continue;
    for (const auto& dep : deps.of(x)) {
      const uint32_t s = dep.first;
      const uint32_t c = recompute(s);
      if (c < dist_[s]) {
        dist_[s] = c;
        queue.push({c, s});
      }
    }
  }

  // reach: the zero-byte graph has an edge s -> start(R) of weight dist(t) and s -> t of
  // weight 0 per rule edge (s, R, t). Its strongly connected components, in Tarjan's
  // order (every component after those it reaches), let each h_L be one pass.
  std::vector<std::pair<uint32_t, std::pair<uint32_t, uint32_t>>> zero_list;
  for (uint32_t s = 0; s < n; ++s)
    for (const auto& e : g.rule_edges(s)) {
      zero_list.push_back({s, {g.rule_start(e.rule), dist_[e.to]}});
      zero_list.push_back({s, {e.to, 0}});
    }
  const Adjacency zero = build(n, zero_list);
  std::vector<uint32_t> comp(n, UINT32_MAX), index(n, UINT32_MAX), low(n, 0);
  std::vector<uint32_t> stack, order;  // order: states grouped by component, in Tarjan's order
  std::vector<uint32_t> comp_begin;
  std::vector<uint8_t> on_stack(n, 0);
  uint32_t next_index = 0;
  struct Frame {
    uint32_t state, edge;
  };
  std::vector<Frame> call;
  for (uint32_t root = 0; root < n; ++root) {
    if (index[root] != UINT32_MAX) continue;
    call.push_back({root, 0});
    index[root] = low[root] = next_index++;
    stack.push_back(root);
    on_stack[root] = 1;
    while (!call.empty()) {
      Frame& f = call.back();
      const auto edges = zero.of(f.state);
      if (f.edge < edges.size()) {
        const uint32_t w = edges[f.edge++].first;
        if (index[w] == UINT32_MAX) {
          index[w] = low[w] = next_index++;
          stack.push_back(w);
          on_stack[w] = 1;
          call.push_back({w, 0});
        } else if (on_stack[w]) {
          low[f.state] = std::min(low[f.state], index[w]);
        }
        continue;
      }
      const uint32_t v = f.state;
      call.pop_back();
      if (!call.empty()) low[call.back().state] = std::min(low[call.back().state], low[v]);
      if (low[v] != index[v]) continue;
      const uint32_t c = uint32_t(comp_begin.size());
      comp_begin.push_back(uint32_t(order.size()));
      uint32_t w;
      do {
        w = stack.back();
        stack.pop_back();
        on_stack[w] = 0;
        comp[w] = c;
        order.push_back(w);
      } while (w != v);
    }
  }
  comp_begin.push_back(uint32_t(order.size()));

  horizon_ = vocab.max_token_bytes();
  std::vector<uint32_t> prev(n), cur(dist_);
  for (size_t len = 0; len <= horizon_; ++len) {
    if (len > 0) {
      prev.swap(cur);
      for (uint32_t s = 0; s < n; ++s) {
        uint32_t v = dist_[s];
        for (const auto& e : g.byte_edges(s)) v = std::max(v, prev[e.to]);
        cur[s] = v;
      }
    }
    for (size_t c = 0; c + 1 < comp_begin.size(); ++c) {
      uint32_t v = 0;
      for (uint32_t i = comp_begin[c]; i < comp_begin[c + 1]; ++i) {
        const uint32_t s = order[i];
        v = std::max(v, cur[s]);
        for (const auto& [to, w] : zero.of(s)) {
          // An edge inside the component closes a cycle; one of positive weight can be
          // taken again and again without reading a byte.
          if (comp[to] == c) {
            if (w > 0) v = kInf;
          } else {
            v = std::max(v, add(cur[to], w));
          }
        }
      }
      for (uint32_t i = comp_begin[c]; i < comp_begin[c + 1]; ++i) cur[order[i]] = v;
    }
    if (len > 0 && cur == prev) break;  // h_L = h_{L-1}: no longer token reaches further
  }
  reach_ = std::move(cur);

  bool seen[256] = {};
  for (uint32_t r = 0; r < vocab.num_ranks(); ++r)
    if (vocab.rank_bytes(r).size() == 1) seen[uint8_t(vocab.rank_bytes(r)[0])] = true;
  all_single_bytes_ = std::all_of(std::begin(seen), std::end(seen), [](bool b) { return b; });
}

std::optional<LocalCosts> local_costs(const CompiledGrammar& g, const VocabIndex& v, const BudgetTables& t,
                                      uint32_t state) {
  if (!g.is_simple(state)) return std::nullopt;
  LocalCosts out;
  const ByteSet& follow = g.rule_follow(g.state_rule(state));
  std::vector<uint32_t> at{state};  // at[d]: the state after the first d bytes of `prev`
  std::vector<uint8_t> mixed{0};    // mixed[d]: a finish with a follow byte next within them
  std::string_view prev;
  const uint32_t base = t.dist(state);
  for (uint32_t r = 0; r < v.num_ranks();) {
    const std::string_view w = v.rank_bytes(r);
    size_t d = 0;
    const size_t lim = std::min(at.size() - 1, w.size());
    while (d < lim && prev[d] == w[d]) ++d;
    at.resize(d + 1);
    mixed.resize(d + 1);
    prev = w;
    bool dead = false, calls = false;
    for (; d < w.size(); ++d) {
      const uint8_t b = uint8_t(w[d]);
      const uint32_t next = g.step_simple(at.back(), b);
      if (next == UINT32_MAX) {
        dead = true;
        break;
      }
      if (!g.is_simple(next)) {
        calls = true;
        break;
      }
      mixed.push_back(mixed.back() | uint8_t(g.is_final(at.back()) && follow.test(b)));
      at.push_back(next);
    }
    if (dead) {  // every token with these d + 1 bytes leaves the rule or dies
      r = v.prefix_rank_end(r, d + 1);
      continue;
    }
    if (calls) {  // these d + 1 bytes reach a rule call: no plain cost, left to the walk
      const uint32_t end = v.prefix_rank_end(r, d + 1);
      for (; r < end; ++r) out.calls.push_back(r);
      continue;
    }
    const uint32_t cost = t.dist(at.back());
    if (cost > base) out.above.push_back({cost, r});
    if (mixed.back()) out.mixed.push_back(r);
    if (cost < base) out.below.push_back({cost, r});
    ++r;
  }
  std::sort(out.above.begin(), out.above.end(), std::greater<>());
  std::sort(out.below.begin(), out.below.end());
  return out;
}

}  // namespace deepinfer::structured
