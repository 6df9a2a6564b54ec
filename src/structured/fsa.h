// Byte-level finite automata with rule-reference edges: the building block of every
// grammar rule.
//
// A rule of a grammar is one automaton over bytes whose edges may also name another rule
// ("match rule R here, then continue to state T"). A grammar is a set of such automata,
// i.e. a recursive transition network; the Earley matcher runs it. Front ends build
// automata with epsilon edges (FsaBuilder), the compiler removes epsilons, determinizes
// when that stays small, minimizes and trims.
//
// The boolean operations (intersect, subtract) are only defined for automata without rule
// edges; the JSON Schema front end uses them for string patterns, lengths and key sets.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace deepinfer::structured {

class CompileBudget;

// A set of bytes, 256 bits.
struct ByteSet {
  uint64_t w[4] = {0, 0, 0, 0};

  void set(uint8_t b) { w[b >> 6] |= uint64_t(1) << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (int b = lo; b <= hi; ++b) set(uint8_t(b));
  }
  bool test(uint8_t b) const { return (w[b >> 6] >> (b & 63)) & 1; }
  bool empty() const { return (w[0] | w[1] | w[2] | w[3]) == 0; }
  int count() const;
  ByteSet& operator|=(const ByteSet& o) {
    for (int i = 0; i < 4; ++i) w[i] |= o.w[i];
    return *this;
  }
  bool operator==(const ByteSet& o) const {
    return w[0] == o.w[0] && w[1] == o.w[1] && w[2] == o.w[2] && w[3] == o.w[3];
  }
};

struct Fsa {
  struct ByteEdge {
    uint8_t lo, hi;  // inclusive
    uint32_t to;
  };
  struct RuleEdge {
    uint32_t rule;
    uint32_t to;
  };
  struct State {
    std::vector<ByteEdge> bytes;
    std::vector<RuleEdge> rules;
    std::vector<uint32_t> eps;
    bool final = false;
  };

  std::vector<State> states;
  uint32_t start = 0;

  uint32_t add_state() {
    states.emplace_back();
    return uint32_t(states.size() - 1);
  }
  bool has_rule_edges() const;
  bool has_epsilons() const;
  // No epsilons, disjoint byte ranges and at most one edge per rule in every state.
  bool is_deterministic() const;
  size_t num_edges() const;
};

// The same language without epsilon edges (states unreachable from the start dropped).
Fsa remove_epsilon(const Fsa& fsa, CompileBudget* budget);

// Subset construction of an epsilon-free automaton. Returns false, leaving *out alone,
// when the result would need more than max_states states.
bool determinize(const Fsa& nfa, size_t max_states, Fsa* out, CompileBudget* budget);

// The minimal equivalent of a deterministic automaton (rule edges are letters).
// Gives the input back unchanged when it is too large to minimize within the budget.
Fsa minimize(const Fsa& dfa, CompileBudget* budget);

// Drops states that are unreachable or cannot reach a final state. `productive`, when
// given, says which rules can match at all; edges to the others are dropped first.
// An automaton with an empty language becomes one non-final state.
Fsa trim(const Fsa& fsa, const std::vector<bool>* productive = nullptr);

// Languages of epsilon-free automata without rule edges.
Fsa intersect(const Fsa& a, const Fsa& b, CompileBudget* budget);
// universe minus removed; `removed` must be deterministic.
Fsa subtract(const Fsa& universe, const Fsa& removed, CompileBudget* budget);
bool is_empty_language(const Fsa& fsa);

// Whether an epsilon-free automaton without rule edges accepts the bytes (for tests and
// for the schema front end's own checks).
bool fsa_accepts(const Fsa& fsa, std::string_view bytes);

}  // namespace deepinfer::structured
