// Shortest completions: the tables behind generation within a token budget.
//
// A request that must end with a complete match within max_tokens can only be steered
// if the matcher knows, for its current parse, how many bytes the shortest accepting
// continuation has (GrammarMatcher::min_bytes_to_accept). With R tokens left, a token t
// is allowed only when, after t, that number is at most R - 1. In a byte-level BPE
// vocabulary every single byte is a token, so a parse that needs m <= R bytes always has
// an allowed token that brings it to m - 1 <= R - 1 (the first byte of a shortest
// completion): the filtered mask is never empty and the output completes by
// induction. Without every single-byte token that argument fails; the filter then still
// applies but is a best effort (all_single_bytes() says which).
//
// Per compiled state s this keeps
//   dist(s):  the fewest bytes that take s to a final state of its rule, a rule edge
//             costing its rule's shortest match (exact; a fixed point over the rules,
//             since rules call each other);
//   reach(s): an upper bound on the completion cost of any parse path that starts at s
//             and reads at most horizon() bytes (the longest token), counting the path's
//             own state and the return states of the calls it opened, not the callers of
//             s's rule (the matcher adds those from its chart). kInf when a zero-byte
//             call cycle can grow without bound (left recursion with a non-empty tail).
// The matcher uses reach() to skip the exact per-token check when no token can leave the
// budget, which is nearly every step when the budget is far from exhausted.
//
// reach is h_L for L = horizon, with
//   h_0(s) >= dist(s),  h_L(s) >= h_{L-1}(t) for each byte edge s -> t,
//   h_L(s) >= h_L(start(R)) + dist(t) and h_L(s) >= h_L(t) for each rule edge (s, R, t)
// (the second rule-edge term over-approximates "R finished after some of the bytes").
// The zero-byte terms are solved per L over the strongly connected components of the
// rule-edge graph, so the tables cost O(horizon * (states + edges)) once per grammar.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/vocab.h"

namespace deepinfer::structured {

class BudgetTables {
 public:
  static constexpr uint32_t kInf = uint32_t(1) << 30;
  static uint32_t add(uint32_t a, uint32_t b) { return a >= kInf || b >= kInf || a + b >= kInf ? kInf : a + b; }

  BudgetTables(const CompiledGrammar& grammar, const VocabIndex& vocab);

  uint32_t dist(uint32_t state) const { return dist_[state]; }
  uint32_t reach(uint32_t state) const { return reach_[state]; }
  // The shortest match of a rule.
  uint32_t rule_min(uint32_t rule) const { return dist_[rule_start_[rule]]; }
  size_t horizon() const { return horizon_; }
  // Every byte 0..255 is the whole of some token (the guarantee above holds).
  bool all_single_bytes() const { return all_single_bytes_; }

 private:
  std::vector<uint32_t> rule_start_, dist_, reach_;
  size_t horizon_ = 0;
  bool all_single_bytes_ = false;
};

// The tokens readable inside the rule from a simple state (no rule calls), by the
// shortest completion of the rule after them (`cost`; the automaton is deterministic
// while it makes no calls, so this is exact along the inside path):
//   above:  cost > dist(state), costliest first (in a JSON string body: tokens that end
//           inside an escape or a UTF-8 sequence);
//   below:  cost < dist(state), cheapest first (e.g. tokens that close the string);
//   mixed:  ranks that can also finish the rule mid-token and go on in the caller (a
//           final state passed with a follow byte next), whatever their cost; sorted;
//   calls:  ranks that reach a state with rule calls: no plain cost; sorted.
// Every other token read inside costs exactly dist(state).
struct LocalCosts {
  std::vector<std::pair<uint32_t, uint32_t>> above, below;  // (cost, rank)
  std::vector<uint32_t> mixed, calls;
};
// nullopt when the state itself has rule calls. One walk of the vocabulary with the
// automaton (TokenMasker caches it per state).
std::optional<LocalCosts> local_costs(const CompiledGrammar& grammar, const VocabIndex& vocab,
                                      const BudgetTables& tables, uint32_t state);

}  // namespace deepinfer::structured
