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

// Interns sequences of uint32 (state sets, state signatures) into dense ids, storing
// them back to back in one buffer: no allocation per sequence.
class SeqTable {
 public:
  // The id of `seq`; `*inserted` tells whether it is new.
  uint32_t intern(const uint32_t* seq, size_t n, bool* inserted) {
    if (4 * (offsets_.size() + 1) > slots_.size() * 3) grow();
    const uint64_t h = hash(seq, n);
    const size_t mask = slots_.size() - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
      const uint32_t id = slots_[i];
      if (id == kEmpty) {
        const uint32_t nid = uint32_t(offsets_.size());
        offsets_.push_back(uint32_t(data_.size()));
        data_.insert(data_.end(), seq, seq + n);
        lengths_.push_back(uint32_t(n));
        hashes_.push_back(h);
        slots_[i] = nid;
        *inserted = true;
        return nid;
      }
      if (hashes_[id] == h && lengths_[id] == n && std::equal(seq, seq + n, data_.data() + offsets_[id])) {
        *inserted = false;
        return id;
      }
    }
  }
  size_t size() const { return offsets_.size(); }
  const uint32_t* data(uint32_t id) const { return data_.data() + offsets_[id]; }
  uint32_t length(uint32_t id) const { return lengths_[id]; }
  void clear() {
    offsets_.clear();
    lengths_.clear();
    hashes_.clear();
    data_.clear();
    std::fill(slots_.begin(), slots_.end(), kEmpty);
  }

 private:
  static constexpr uint32_t kEmpty = UINT32_MAX;
  static uint64_t hash(const uint32_t* seq, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    for (size_t i = 0; i < n; ++i) h = (h ^ seq[i]) * 0x100000001B3ull + (h >> 29);
    return h ^ (h >> 31);
  }
  void grow() {
    slots_.assign(std::max<size_t>(64, slots_.size() * 2), kEmpty);
    const size_t mask = slots_.size() - 1;
    for (uint32_t id = 0; id < offsets_.size(); ++id) {
      size_t i = hashes_[id] & mask;
      while (slots_[i] != kEmpty) i = (i + 1) & mask;
      slots_[i] = id;
    }
  }
  std::vector<uint32_t> slots_, offsets_, lengths_, data_;
  std::vector<uint64_t> hashes_;
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
  SeqTable sets;
  Fsa dfa;
  bool overflow = false;
  auto get = [&](const std::vector<uint32_t>& set) -> uint32_t {
    bool inserted;
    const uint32_t id = sets.intern(set.data(), set.size(), &inserted);
    if (inserted) {
      if (sets.size() > max_states) {
        overflow = true;
        return 0;
      }
      dfa.add_state();
    }
    return id;
  };
  dfa.start = get({nfa.start});
  std::vector<Fsa::ByteEdge> edges;
  std::vector<Fsa::RuleEdge> redges;
  std::vector<int> bounds;
  std::vector<uint32_t> targets, members;
  for (size_t i = 0; i < sets.size() && !overflow; ++i) {
    members.assign(sets.data(uint32_t(i)), sets.data(uint32_t(i)) + sets.length(uint32_t(i)));
    edges.clear();
    redges.clear();
    bool final = false;
    for (uint32_t s : members) {
      const Fsa::State& st = nfa.states[s];
      final = final || st.final;
      edges.insert(edges.end(), st.bytes.begin(), st.bytes.end());
      redges.insert(redges.end(), st.rules.begin(), st.rules.end());
    }
    Fsa::State ns;
    ns.final = final;
    if (members.size() == 1 && nfa.states[members[0]].bytes.size() <= 1) {
      // One state with at most one byte edge: nothing to split.
      for (const Fsa::ByteEdge& e : edges) {
        targets.assign(1, e.to);
        const uint32_t to = get(targets);
        ns.bytes.push_back({e.lo, e.hi, to});
      }
    } else {
      bounds.clear();
      for (const Fsa::ByteEdge& e : edges) {
        bounds.push_back(e.lo);
        bounds.push_back(e.hi + 1);
      }
      std::sort(bounds.begin(), bounds.end());
      bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
      for (size_t k = 0; k + 1 < bounds.size() && !overflow; ++k) {
        const int lo = bounds[k], hi = bounds[k + 1] - 1;
        targets.clear();
        for (const Fsa::ByteEdge& e : edges)
          if (e.lo <= lo && hi <= e.hi) targets.push_back(e.to);
        if (targets.empty()) continue;
        std::sort(targets.begin(), targets.end());
        targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
        const uint32_t to = get(targets);
        push_merged(&ns.bytes, lo, hi, to);
      }
    }
    sort_unique_rules(&redges);
    for (size_t k = 0; k < redges.size() && !overflow;) {
      size_t e = k;
      targets.clear();
      while (e < redges.size() && redges[e].rule == redges[k].rule) targets.push_back(redges[e++].to);
      std::sort(targets.begin(), targets.end());
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

namespace {

// A refinable partition of 0..n-1 (Valmari and Lehtinen, "Efficient minimization of
// DFAs with partial transition functions", 2008). Elements of a set are contiguous in
// `elems`; marked ones are moved to the front of their set; split() cuts each touched
// set and gives the smaller part a new index.
struct Partition {
  std::vector<uint32_t> elems, loc, set_of, first, past, marked, touched;
  uint32_t count = 0;

  void init(uint32_t n) {
    elems.resize(n);
    loc.resize(n);
    set_of.assign(n, 0);
    for (uint32_t i = 0; i < n; ++i) elems[i] = loc[i] = i;
    first.assign(n + 1, 0);
    past.assign(n + 1, 0);
    marked.assign(n + 1, 0);
    count = n > 0;
    past[0] = n;
  }
  void mark(uint32_t e) {
    const uint32_t s = set_of[e], i = loc[e], j = first[s] + marked[s];
    elems[i] = elems[j];
    loc[elems[i]] = i;
    elems[j] = e;
    loc[e] = j;
    if (!marked[s]++) touched.push_back(s);
  }
  void split() {
    while (!touched.empty()) {
      const uint32_t s = touched.back();
      touched.pop_back();
      const uint32_t j = first[s] + marked[s];
      if (j == past[s]) {
        marked[s] = 0;
        continue;
      }
      const uint32_t z = count++;
      if (marked[s] <= past[s] - j) {
        first[z] = first[s];
        past[z] = first[s] = j;
      } else {
        past[z] = past[s];
        first[z] = past[s] = j;
      }
      for (uint32_t i = first[z]; i < past[z]; ++i) set_of[elems[i]] = z;
      marked[s] = marked[z] = 0;
    }
  }
};

}  // namespace

Fsa minimize(const Fsa& dfa, CompileBudget* budget) {
  const uint32_t n = uint32_t(dfa.states.size());
  if (n <= 1) return dfa;
  // Letters: classes of bytes no edge tells apart, then one letter per rule.
  std::vector<int> bounds;
  std::vector<uint32_t> rules;
  for (const Fsa::State& st : dfa.states) {
    for (const Fsa::ByteEdge& e : st.bytes) {
      bounds.push_back(e.lo);
      bounds.push_back(e.hi + 1);
    }
    for (const Fsa::RuleEdge& e : st.rules) rules.push_back(e.rule);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  std::sort(rules.begin(), rules.end());
  rules.erase(std::unique(rules.begin(), rules.end()), rules.end());
  struct Trans {
    uint32_t tail, label, head;
  };
  std::vector<Trans> trans;
  for (uint32_t s = 0; s < n; ++s) {
    for (const Fsa::ByteEdge& e : dfa.states[s].bytes) {
      const uint32_t c0 = uint32_t(std::lower_bound(bounds.begin(), bounds.end(), int(e.lo)) - bounds.begin());
      for (uint32_t c = c0; c + 1 < bounds.size() && bounds[c] <= e.hi; ++c) trans.push_back({s, c, e.to});
    }
    for (const Fsa::RuleEdge& e : dfa.states[s].rules) {
      const uint32_t r = uint32_t(std::lower_bound(rules.begin(), rules.end(), e.rule) - rules.begin());
      trans.push_back({s, uint32_t(bounds.size()) + r, e.to});
    }
  }
  const uint32_t m = uint32_t(trans.size());
  // Blocks of states, split first by finality; cords of transitions, by letter.
  Partition blocks, cords;
  blocks.init(n);
  for (uint32_t s = 0; s < n; ++s)
    if (dfa.states[s].final) blocks.mark(s);
  blocks.split();
  cords.init(m);
  if (m > 0) {
    std::sort(cords.elems.begin(), cords.elems.end(),
              [&](uint32_t a, uint32_t b) { return trans[a].label < trans[b].label; });
    cords.count = 0;
    uint32_t label = trans[cords.elems[0]].label;
    cords.first[0] = 0;
    for (uint32_t i = 0; i < m; ++i) {
      const uint32_t t = cords.elems[i];
      if (trans[t].label != label) {
        label = trans[t].label;
        cords.past[cords.count++] = i;
        cords.first[cords.count] = i;
      }
      cords.set_of[t] = cords.count;
      cords.loc[t] = i;
    }
    cords.past[cords.count++] = m;
  }
  // Incoming transitions per state.
  std::vector<uint32_t> in_begin(n + 1, 0), in_list(m);
  for (const Trans& t : trans) ++in_begin[t.head + 1];
  for (uint32_t i = 0; i < n; ++i) in_begin[i + 1] += in_begin[i];
  {
    std::vector<uint32_t> fill(in_begin.begin(), in_begin.end() - 1);
    for (uint32_t t = 0; t < m; ++t) in_list[fill[trans[t].head]++] = t;
  }
  uint32_t b = 1, c = 0;
  while (c < cords.count) {
    for (uint32_t i = cords.first[c]; i < cords.past[c]; ++i) blocks.mark(trans[cords.elems[i]].tail);
    blocks.split();
    ++c;
    while (b < blocks.count) {
      for (uint32_t i = blocks.first[b]; i < blocks.past[b]; ++i) {
        const uint32_t s = blocks.elems[i];
        for (uint32_t k = in_begin[s]; k < in_begin[s + 1]; ++k) cords.mark(in_list[k]);
      }
      cords.split();
      ++b;
    }
    if (budget) budget->check_time("minimization");
  }
  if (blocks.count == n) return dfa;
  Fsa out;
  out.states.resize(blocks.count);
  for (uint32_t k = 0; k < blocks.count; ++k) {
    const Fsa::State& st = dfa.states[blocks.elems[blocks.first[k]]];
    Fsa::State& ns = out.states[k];
    ns.final = st.final;
    for (const Fsa::ByteEdge& e : st.bytes) push_merged(&ns.bytes, e.lo, e.hi, blocks.set_of[e.to]);
    for (const Fsa::RuleEdge& e : st.rules) ns.rules.push_back({e.rule, blocks.set_of[e.to]});
  }
  out.start = blocks.set_of[dfa.start];
  return out;
}

Fsa trim(const Fsa& fsa, const std::vector<bool>* productive) {
  const size_t n = fsa.states.size();
  auto usable = [&](const Fsa::RuleEdge& e) { return !productive || (*productive)[e.rule]; };
  std::vector<uint8_t> fwd(n, 0), back(n, 0);
  std::vector<uint32_t> stack{fsa.start};
  fwd[fsa.start] = 1;
  std::vector<std::pair<uint32_t, uint32_t>> rev;  // (to, from), sorted below
  while (!stack.empty()) {
    const uint32_t s = stack.back();
    stack.pop_back();
    auto visit = [&](uint32_t t) {
      rev.push_back({t, s});
      if (!fwd[t]) {
        fwd[t] = 1;
        stack.push_back(t);
      }
    };
    for (const Fsa::ByteEdge& e : fsa.states[s].bytes) visit(e.to);
    for (const Fsa::RuleEdge& e : fsa.states[s].rules)
      if (usable(e)) visit(e.to);
    for (uint32_t t : fsa.states[s].eps) visit(t);
  }
  std::vector<uint32_t> rev_begin(n + 1, 0), rev_from(rev.size());
  for (const auto& [t, s] : rev) ++rev_begin[t + 1];
  for (size_t i = 0; i < n; ++i) rev_begin[i + 1] += rev_begin[i];
  {
    std::vector<uint32_t> fill(rev_begin.begin(), rev_begin.end() - 1);
    for (const auto& [t, s] : rev) rev_from[fill[t]++] = s;
  }
  for (size_t s = 0; s < n; ++s) {
    if (fwd[s] && fsa.states[s].final) {
      back[s] = 1;
      stack.push_back(uint32_t(s));
    }
  }
  while (!stack.empty()) {
    const uint32_t s = stack.back();
    stack.pop_back();
    for (uint32_t k = rev_begin[s]; k < rev_begin[s + 1]; ++k) {
      const uint32_t p = rev_from[k];
      if (!back[p]) {
        back[p] = 1;
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
  uint32_t count = 0;
  for (size_t s = 0; s < n; ++s)
    if (back[s]) id[s] = count++;
  out.states.resize(count);
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

namespace {

// The reachable, trimmed part of a product of two automata, shared by intersect() and
// subtract(): pair states are numbered on first sight and expanded once, in that order.
// expand(x, y, get, &state) sets the pair's finality and byte edges, naming each target
// pair through get(x', y').
template <typename Expand>
Fsa product(uint32_t start_x, uint32_t start_y, const char* what, CompileBudget* budget, Expand expand) {
  Fsa out;
  std::unordered_map<uint64_t, uint32_t> ids;
  std::vector<std::pair<uint32_t, uint32_t>> pairs;
  auto get = [&](uint32_t x, uint32_t y) {
    auto [it, inserted] = ids.try_emplace((uint64_t(x) << 32) | y, uint32_t(pairs.size()));
    if (inserted) {
      pairs.push_back({x, y});
      out.add_state();
      if (budget) budget->add_states(1, what);
    }
    return it->second;
  };
  out.start = get(start_x, start_y);
  for (size_t i = 0; i < pairs.size(); ++i) {
    const auto [x, y] = pairs[i];
    Fsa::State ns;
    expand(x, y, get, &ns);
    out.states[i] = std::move(ns);
  }
  return trim(out);
}

}  // namespace

Fsa intersect(const Fsa& a, const Fsa& b, CompileBudget* budget) {
  DI_CHECK(!a.has_epsilons() && !b.has_epsilons() && !a.has_rule_edges() && !b.has_rule_edges(),
           "intersect needs epsilon-free automata without rule edges");
  return product(a.start, b.start, "intersection", budget, [&](uint32_t x, uint32_t y, auto& get, Fsa::State* ns) {
    ns->final = a.states[x].final && b.states[y].final;
    for (const Fsa::ByteEdge& ea : a.states[x].bytes) {
      for (const Fsa::ByteEdge& eb : b.states[y].bytes) {
        const int lo = std::max(ea.lo, eb.lo), hi = std::min(ea.hi, eb.hi);
        if (lo <= hi) ns->bytes.push_back({uint8_t(lo), uint8_t(hi), get(ea.to, eb.to)});
      }
    }
  });
}

Fsa subtract(const Fsa& universe, const Fsa& removed, CompileBudget* budget) {
  DI_CHECK(!universe.has_epsilons() && !universe.has_rule_edges() && !removed.has_rule_edges() &&
               removed.is_deterministic(),
           "subtract needs plain automata and a deterministic subtrahend");
  // y == kDead: the subtrahend has died, everything the universe reads from x stays.
  return product(universe.start, removed.start, "subtraction", budget,
                 [&](uint32_t x, uint32_t y, auto& get, Fsa::State* ns) {
    ns->final = universe.states[x].final && (y == kDead || !removed.states[y].final);
    for (const Fsa::ByteEdge& eu : universe.states[x].bytes) {
      int lo = eu.lo;
      if (y != kDead) {
        for (const Fsa::ByteEdge& er : removed.states[y].bytes) {
          if (er.hi < lo) continue;
          if (er.lo > eu.hi) break;
          if (er.lo > lo) ns->bytes.push_back({uint8_t(lo), uint8_t(er.lo - 1), get(eu.to, kDead)});
          const int hi = std::min<int>(er.hi, eu.hi);
          ns->bytes.push_back({uint8_t(std::max<int>(lo, er.lo)), uint8_t(hi), get(eu.to, er.to)});
          lo = hi + 1;
          if (lo > eu.hi) break;
        }
      }
      if (lo <= eu.hi) ns->bytes.push_back({uint8_t(lo), eu.hi, get(eu.to, kDead)});
    }
  });
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
