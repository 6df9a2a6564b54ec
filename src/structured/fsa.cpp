#include "structured/fsa.h"

#include <algorithm>
#include <unordered_map>

#include "common/check.h"
#include "structured/limits.h"

namespace deepinfer::structured {
namespace {

// Edges created by epsilon removal are bounded separately from states: a chain of k
// optional parts gives each of its k states up to k edges.
constexpr size_t kMaxEpsilonFreeEdges = size_t(1) << 25;
constexpr uint32_t kDead = UINT32_MAX;

struct VecHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ v.size();
    for (uint32_t x : v) h = (h ^ x) * 0x100000001B3ull + (h >> 29);
    return size_t(h);
  }
};

void sort_unique_bytes(std::vector<Fsa::ByteEdge>* edges) {
  std::sort(edges->begin(), edges->end(), [](const Fsa::ByteEdge& a, const Fsa::ByteEdge& b) {
    return std::tie(a.lo, a.hi, a.to) < std::tie(b.lo, b.hi, b.to);
  });
  edges->erase(std::unique(edges->begin(), edges->end(),
                           [](const Fsa::ByteEdge& a, const Fsa::ByteEdge& b) {
                             return a.lo == b.lo && a.hi == b.hi && a.to == b.to;
                           }),
               edges->end());
}

void sort_unique_rules(std::vector<Fsa::RuleEdge>* edges) {
  std::sort(edges->begin(), edges->end(), [](const Fsa::RuleEdge& a, const Fsa::RuleEdge& b) {
    return std::tie(a.rule, a.to) < std::tie(b.rule, b.to);
  });
  edges->erase(std::unique(edges->begin(), edges->end(),
                           [](const Fsa::RuleEdge& a, const Fsa::RuleEdge& b) {
                             return a.rule == b.rule && a.to == b.to;
                           }),
               edges->end());
}

// Appends [lo, hi] -> to, merging with the previous edge when adjacent with one target.
void push_merged(std::vector<Fsa::ByteEdge>* edges, int lo, int hi, uint32_t to) {
  if (!edges->empty() && edges->back().to == to && edges->back().hi + 1 == lo) {
    edges->back().hi = uint8_t(hi);
  } else {
    edges->push_back({uint8_t(lo), uint8_t(hi), to});
  }
}

}  // namespace

int ByteSet::count() const {
  return __builtin_popcountll(w[0]) + __builtin_popcountll(w[1]) + __builtin_popcountll(w[2]) +
         __builtin_popcountll(w[3]);
}

bool Fsa::has_rule_edges() const {
  for (const State& s : states)
    if (!s.rules.empty()) return true;
  return false;
}

bool Fsa::has_epsilons() const {
  for (const State& s : states)
    if (!s.eps.empty()) return true;
  return false;
}

bool Fsa::is_deterministic() const {
  for (const State& s : states) {
    if (!s.eps.empty()) return false;
    for (size_t i = 1; i < s.bytes.size(); ++i)
      if (s.bytes[i].lo <= s.bytes[i - 1].hi) return false;
    for (size_t i = 1; i < s.rules.size(); ++i)
      if (s.rules[i].rule == s.rules[i - 1].rule) return false;
  }
  return true;
}

size_t Fsa::num_edges() const {
  size_t n = 0;
  for (const State& s : states) n += s.bytes.size() + s.rules.size() + s.eps.size();
  return n;
}

Fsa remove_epsilon(const Fsa& in, CompileBudget* budget) {
  const size_t n = in.states.size();
  std::vector<uint32_t> stamp(n, 0), new_id(n, kDead), order, stack, closure;
  uint32_t cur_stamp = 0;
  Fsa out;
  auto id_of = [&](uint32_t old) {
    if (new_id[old] == kDead) {
      new_id[old] = out.add_state();
      order.push_back(old);
    }
    return new_id[old];
  };
  out.start = id_of(in.start);
  size_t total_edges = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const uint32_t s = order[k];
    ++cur_stamp;
    closure.clear();
    stack.assign(1, s);
    stamp[s] = cur_stamp;
    while (!stack.empty()) {
      const uint32_t t = stack.back();
      stack.pop_back();
      closure.push_back(t);
      for (uint32_t u : in.states[t].eps) {
        if (stamp[u] != cur_stamp) {
          stamp[u] = cur_stamp;
          stack.push_back(u);
        }
      }
    }
    Fsa::State ns;
    for (uint32_t t : closure) {
      const Fsa::State& st = in.states[t];
      ns.final = ns.final || st.final;
      for (const Fsa::ByteEdge& e : st.bytes) ns.bytes.push_back(e);
      for (const Fsa::RuleEdge& e : st.rules) ns.rules.push_back(e);
    }
    sort_unique_bytes(&ns.bytes);
    sort_unique_rules(&ns.rules);
    for (Fsa::ByteEdge& e : ns.bytes) e.to = id_of(e.to);
    for (Fsa::RuleEdge& e : ns.rules) e.to = id_of(e.to);
    total_edges += ns.bytes.size() + ns.rules.size();
    DI_CHECK_INPUT(total_edges <= kMaxEpsilonFreeEdges, "constraint too large: more than ", kMaxEpsilonFreeEdges,
                   " automaton edges");
    if (budget) budget->check_time("epsilon removal");
    out.states[new_id[s]] = std::move(ns);
  }
  return out;
}

bool determinize(const Fsa& nfa, size_t max_states, Fsa* out, CompileBudget* budget) {
  DI_CHECK(!nfa.has_epsilons(), "determinize needs an epsilon-free automaton");
  std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> ids;
  std::vector<std::vector<uint32_t>> sets;
  Fsa dfa;
  bool overflow = false;
  auto get = [&](std::vector<uint32_t> set) -> uint32_t {
    auto [it, inserted] = ids.try_emplace(set, uint32_t(sets.size()));
    if (inserted) {
      if (sets.size() >= max_states) {
        overflow = true;
        return 0;
      }
      sets.push_back(std::move(set));
      dfa.add_state();
    }
    return it->second;
  };
  dfa.start = get({nfa.start});
  std::vector<Fsa::ByteEdge> edges;
  std::vector<Fsa::RuleEdge> redges;
  std::vector<int> bounds;
  std::vector<uint32_t> targets;
  for (size_t i = 0; i < sets.size() && !overflow; ++i) {
    const std::vector<uint32_t> set = sets[i];
    edges.clear();
    redges.clear();
    bool final = false;
    for (uint32_t s : set) {
      const Fsa::State& st = nfa.states[s];
      final = final || st.final;
      edges.insert(edges.end(), st.bytes.begin(), st.bytes.end());
      redges.insert(redges.end(), st.rules.begin(), st.rules.end());
    }
    Fsa::State ns;
    ns.final = final;
    bounds.clear();
    for (const Fsa::ByteEdge& e : edges) {
      bounds.push_back(e.lo);
      bounds.push_back(e.hi + 1);
    }
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
    for (size_t k = 0; k + 1 < bounds.size(); ++k) {
      const int lo = bounds[k], hi = bounds[k + 1] - 1;
      targets.clear();
      for (const Fsa::ByteEdge& e : edges)
        if (e.lo <= lo && hi <= e.hi) targets.push_back(e.to);
      if (targets.empty()) continue;
      std::sort(targets.begin(), targets.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      const uint32_t to = get(targets);
      if (overflow) break;
      push_merged(&ns.bytes, lo, hi, to);
    }
    sort_unique_rules(&redges);
    for (size_t k = 0; k < redges.size() && !overflow;) {
      size_t e = k;
      targets.clear();
      while (e < redges.size() && redges[e].rule == redges[k].rule) targets.push_back(redges[e++].to);
      ns.rules.push_back({redges[k].rule, get(targets)});
      k = e;
    }
    dfa.states[i] = std::move(ns);
    if (budget) budget->check_time("determinization");
  }
  if (overflow) return false;
  *out = std::move(dfa);
  return true;
}

Fsa minimize(const Fsa& dfa, CompileBudget* budget) {
  // Moore's partition refinement. Rounds are bounded by the longest distinguishing
  // suffix, so long counted chains (maxLength 5000) hit the work cap and stay as they
  // are: subset construction of our Thompson automata is close to minimal already.
  constexpr size_t kMaxWork = size_t(1) << 21;
  const size_t n = dfa.states.size();
  if (n <= 1) return dfa;
  std::vector<uint32_t> cls(n), next(n);
  for (size_t s = 0; s < n; ++s) cls[s] = dfa.states[s].final ? 1 : 0;
  size_t num_classes = 0;
  size_t work = 0;
  std::vector<uint32_t> sig;
  std::unordered_map<std::vector<uint32_t>, uint32_t, VecHash> ids;
  for (;;) {
    ids.clear();
    for (size_t s = 0; s < n; ++s) {
      const Fsa::State& st = dfa.states[s];
      sig.clear();
      sig.push_back(cls[s]);
      int prev_hi = -2;
      uint32_t prev_cls = kDead;
      for (const Fsa::ByteEdge& e : st.bytes) {
        const uint32_t c = cls[e.to];
        if (c == prev_cls && e.lo == prev_hi + 1) {
          sig[sig.size() - 2] = e.hi;
        } else {
          sig.push_back(e.lo);
          sig.push_back(e.hi);
          sig.push_back(c);
        }
        prev_hi = e.hi;
        prev_cls = c;
      }
      sig.push_back(kDead);
      for (const Fsa::RuleEdge& e : st.rules) {
        sig.push_back(e.rule);
        sig.push_back(cls[e.to]);
      }
      work += sig.size();
      auto [it, inserted] = ids.try_emplace(sig, uint32_t(ids.size()));
      next[s] = it->second;
    }
    const size_t count = ids.size();
    cls.swap(next);
    if (count == num_classes) break;
    num_classes = count;
    if (work > kMaxWork) return dfa;
    if (budget) budget->check_time("minimization");
  }
  if (num_classes == n) return dfa;
  Fsa out;
  out.states.resize(num_classes);
  std::vector<bool> done(num_classes, false);
  for (size_t s = 0; s < n; ++s) {
    const uint32_t c = cls[s];
    if (done[c]) continue;
    done[c] = true;
    const Fsa::State& st = dfa.states[s];
    Fsa::State& ns = out.states[c];
    ns.final = st.final;
    for (const Fsa::ByteEdge& e : st.bytes) push_merged(&ns.bytes, e.lo, e.hi, cls[e.to]);
    for (const Fsa::RuleEdge& e : st.rules) ns.rules.push_back({e.rule, cls[e.to]});
  }
  out.start = cls[dfa.start];
  return out;
}

Fsa trim(const Fsa& fsa, const std::vector<bool>* productive) {
  const size_t n = fsa.states.size();
  auto usable = [&](const Fsa::RuleEdge& e) { return !productive || (*productive)[e.rule]; };
  std::vector<bool> fwd(n, false), back(n, false);
  std::vector<uint32_t> stack{fsa.start};
  fwd[fsa.start] = true;
  std::vector<std::vector<uint32_t>> rev(n);
  while (!stack.empty()) {
    const uint32_t s = stack.back();
    stack.pop_back();
    auto visit = [&](uint32_t t) {
      rev[t].push_back(s);
      if (!fwd[t]) {
        fwd[t] = true;
        stack.push_back(t);
      }
    };
    for (const Fsa::ByteEdge& e : fsa.states[s].bytes) visit(e.to);
    for (const Fsa::RuleEdge& e : fsa.states[s].rules)
      if (usable(e)) visit(e.to);
    for (uint32_t t : fsa.states[s].eps) visit(t);
  }
  for (size_t s = 0; s < n; ++s) {
    if (fwd[s] && fsa.states[s].final) {
      back[s] = true;
      stack.push_back(uint32_t(s));
    }
  }
  while (!stack.empty()) {
    const uint32_t s = stack.back();
    stack.pop_back();
    for (uint32_t p : rev[s]) {
      if (!back[p]) {
        back[p] = true;
        stack.push_back(p);
      }
    }
  }
  Fsa out;
  if (!back[fsa.start]) {
    out.add_state();
    return out;
  }
  std::vector<uint32_t> id(n, kDead);
  for (size_t s = 0; s < n; ++s)
    if (back[s]) id[s] = out.add_state();
  for (size_t s = 0; s < n; ++s) {
    if (id[s] == kDead) continue;
    const Fsa::State& st = fsa.states[s];
    Fsa::State& ns = out.states[id[s]];
    ns.final = st.final;
    for (const Fsa::ByteEdge& e : st.bytes)
      if (id[e.to] != kDead) ns.bytes.push_back({e.lo, e.hi, id[e.to]});
    for (const Fsa::RuleEdge& e : st.rules)
      if (usable(e) && id[e.to] != kDead) ns.rules.push_back({e.rule, id[e.to]});
    for (uint32_t t : st.eps)
      if (id[t] != kDead) ns.eps.push_back(id[t]);
  }
  out.start = id[fsa.start];
  return out;
}

Fsa intersect(const Fsa& a, const Fsa& b, CompileBudget* budget) {
  DI_CHECK(!a.has_epsilons() && !b.has_epsilons() && !a.has_rule_edges() && !b.has_rule_edges(),
           "intersect needs epsilon-free automata without rule edges");
  Fsa out;
  std::unordered_map<uint64_t, uint32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  auto get = [&](uint32_t x, uint32_t y) {
    auto [it, inserted] = ids.try_emplace((uint64_t(x) << 32) | y, uint32_t(pairs.size()));
    if (inserted) {
      pairs.push_back({x, y});
      out.add_state();
      if (budget) budget->add_states(1, "intersection");
    }
    return it->second;
  };
  out.start = get(a.start, b.start);
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto [x, y] = pairs[i];
    Fsa::State ns;
    ns.final = a.states[x].final && b.states[y].final;
    for (const Fsa::ByteEdge& ea : a.states[x].bytes) {
      for (const Fsa::ByteEdge& eb : b.states[y].bytes) {
        const int lo = std::max(ea.lo, eb.lo), hi = std::min(ea.hi, eb.hi);
        if (lo <= hi) ns.bytes.push_back({uint8_t(lo), uint8_t(hi), get(ea.to, eb.to)});
      }
    }
    out.states[i] = std::move(ns);
  }
  return trim(out);
}

Fsa subtract(const Fsa& universe, const Fsa& removed, CompileBudget* budget) {
  DI_CHECK(!universe.has_epsilons() && !universe.has_rule_edges() && !removed.has_rule_edges() &&
               removed.is_deterministic(),
           "subtract needs plain automata and a deterministic subtrahend");
  Fsa out;
  std::unordered_map<uint64_t, uint32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  auto get = [&](uint32_t x, uint32_t y) {
    auto [it, inserted] = ids.try_emplace((uint64_t(x) << 32) | y, uint32_t(pairs.size()));
    if (inserted) {
      pairs.push_back({x, y});
      out.add_state();
      if (budget) budget->add_states(1, "subtraction");
    }
    return it->second;
  };
  out.start = get(universe.start, removed.start);
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto [x, y] = pairs[i];
    Fsa::State ns;
    ns.final = universe.states[x].final && (y == kDead || !removed.states[y].final);
    for (const Fsa::ByteEdge& eu : universe.states[x].bytes) {
      int lo = eu.lo;
      if (y != kDead) {
        for (const Fsa::ByteEdge& er : removed.states[y].bytes) {
          if (er.hi < lo) continue;
          if (er.lo > eu.hi) break;
          if (er.lo > lo) ns.bytes.push_back({uint8_t(lo), uint8_t(er.lo - 1), get(eu.to, kDead)});
          const int hi = std::min<int>(er.hi, eu.hi);
          ns.bytes.push_back({uint8_t(std::max<int>(lo, er.lo)), uint8_t(hi), get(eu.to, er.to)});
          lo = hi + 1;
          if (lo > eu.hi) break;
        }
      }
      if (lo <= eu.hi) ns.bytes.push_back({uint8_t(lo), eu.hi, get(eu.to, kDead)});
    }
    out.states[i] = std::move(ns);
  }
  return trim(out);
}

bool is_empty_language(const Fsa& fsa) {
  std::vector<bool> seen(fsa.states.size(), false);
  std::vector<uint32_t> stack{fsa.start};
  seen[fsa.start] = true;
  while (!stack.empty()) {
    const uint32_t s = stack.back();
    stack.pop_back();
    if (fsa.states[s].final) return false;
    auto visit = [&](uint32_t t) {
      if (!seen[t]) {
        seen[t] = true;
        stack.push_back(t);
      }
    };
    for (const Fsa::ByteEdge& e : fsa.states[s].bytes) visit(e.to);
    for (uint32_t t : fsa.states[s].eps) visit(t);
  }
  return true;
}

bool fsa_accepts(const Fsa& fsa, std::string_view bytes) {
  DI_CHECK(!fsa.has_epsilons(), "fsa_accepts needs an epsilon-free automaton");
  std::vector<uint32_t> cur{fsa.start}, next;
  std::vector<uint32_t> stamp(fsa.states.size(), 0);
  uint32_t step = 0;
  for (unsigned char c : bytes) {
    ++step;
    next.clear();
    for (uint32_t s : cur) {
      for (const Fsa::ByteEdge& e : fsa.states[s].bytes) {
        if (e.lo <= c && c <= e.hi && stamp[e.to] != step) {
          stamp[e.to] = step;
          next.push_back(e.to);
        }
      }
    }
    cur.swap(next);
    if (cur.empty()) return false;
  }
  for (uint32_t s : cur)
    if (fsa.states[s].final) return true;
  return false;
}

}  // namespace deepinfer::structured
