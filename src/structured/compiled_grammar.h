// A compiled grammar: one trimmed automaton per rule, numbered into flat tables.
//
// States are numbered globally. A state belongs to one rule, may be final (the rule can
// end there), and has byte edges (sorted, inclusive ranges) and rule edges ("match that
// rule, then go to `to`"). Every state can reach a final state and every rule edge names
// a rule that can match, so any item an Earley parser creates is a viable prefix; this
// is what lets the mask cache call a token allowed without looking at the stack.
//
// Immutable after compile_grammar() and safe to share between threads and matchers.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "structured/fsa.h"
#include "structured/grammar.h"
#include "structured/limits.h"

namespace deepinfer::structured {

class CompiledGrammar {
 public:
  struct ByteEdge {
    uint8_t lo, hi;
    uint32_t to;
  };
  struct RuleEdge {
    uint32_t rule;
    uint32_t to;
  };

  uint32_t num_states() const { return uint32_t(state_rule_.size()); }
  uint32_t num_rules() const { return uint32_t(rule_start_.size()); }
  uint32_t root() const { return root_; }
  // The grammar matches no string at all (e.g. the schema `false`).
  bool empty_language() const { return empty_; }

  uint32_t rule_start(uint32_t rule) const { return rule_start_[rule]; }
  bool rule_nullable(uint32_t rule) const { return rule_nullable_[rule]; }
  // Bytes that can follow a completed `rule` anywhere in the grammar (a superset).
  const ByteSet& rule_follow(uint32_t rule) const { return rule_follow_[rule]; }
  const std::string& rule_name(uint32_t rule) const { return rule_name_[rule]; }
  // See Grammar::Rule::shareable.
  bool rule_shareable(uint32_t rule) const { return rule_shareable_[rule]; }

  uint32_t state_rule(uint32_t s) const { return state_rule_[s]; }
  bool is_final(uint32_t s) const { return flags_[s] & kFinal; }
  // Byte ranges are disjoint and there are no rule edges: stepping is a lookup.
  bool is_simple(uint32_t s) const { return flags_[s] & kSimple; }
  std::span<const ByteEdge> byte_edges(uint32_t s) const {
    return {byte_edges_.data() + byte_begin_[s], byte_edges_.data() + byte_begin_[s + 1]};
  }
  std::span<const RuleEdge> rule_edges(uint32_t s) const {
    return {rule_edges_.data() + rule_begin_[s], rule_edges_.data() + rule_begin_[s + 1]};
  }
  // The target of byte b from a simple state, or UINT32_MAX.
  uint32_t step_simple(uint32_t s, uint8_t b) const {
    for (const ByteEdge& e : byte_edges(s)) {
      if (b < e.lo) break;
      if (b <= e.hi) return e.to;
    }
    return UINT32_MAX;
  }

  // Rules, states and edges, e.g. "12 rules, 140 states, 310 edges".
  std::string stats() const;

 private:
  friend std::shared_ptr<const CompiledGrammar> compile_grammar(const Grammar&, CompileBudget*);
  static constexpr uint8_t kFinal = 1, kSimple = 2;

  uint32_t root_ = 0;
  bool empty_ = false;
  std::vector<uint32_t> rule_start_;
  std::vector<uint8_t> rule_nullable_;
  std::vector<ByteSet> rule_follow_;
  std::vector<std::string> rule_name_;
  std::vector<uint8_t> rule_shareable_;
  std::vector<uint32_t> state_rule_;
  std::vector<uint8_t> flags_;
  std::vector<uint32_t> byte_begin_, rule_begin_;  // num_states + 1 entries
  std::vector<ByteEdge> byte_edges_;
  std::vector<RuleEdge> rule_edges_;
};

// Lowers every rule reachable from the root to an automaton, determinizes and minimizes
// each where that stays within the limits, drops rules that cannot match, and computes
// nullability and follow sets. InputError on undefined rules or exceeded limits.
std::shared_ptr<const CompiledGrammar> compile_grammar(const Grammar& grammar, CompileBudget* budget);

}  // namespace deepinfer::structured
