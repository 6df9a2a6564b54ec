// The one grammar representation all front ends produce.
//
// A Grammar is a set of named rules, each with a body expression over bytes: literal
// byte strings, byte sets, code point sets (matched as UTF-8), references to rules,
// sequence, alternation, bounded or unbounded repetition, and prebuilt automata (which
// the JSON Schema front end uses for numbers, patterns and key sets). Rules may be
// recursive in any way, left recursion included. compile_grammar() (compiler.h) turns it
// into the tables the matcher runs.
//
//   Grammar g;
//   auto digit = g.add_rule("digit");
//   g.set_body(digit, g.chars(CodepointSet::range('0', '9')));
//   auto root = g.add_rule("root");
//   g.set_body(root, g.repeat(g.rule_ref(digit), 1, Grammar::kUnbounded));
//   g.set_root(root);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "structured/codepoint_set.h"
#include "structured/fsa.h"

namespace deepinfer::structured {

class Grammar {
 public:
  using RuleId = uint32_t;
  using ExprId = uint32_t;
  static constexpr uint32_t kUnbounded = UINT32_MAX;
  static constexpr ExprId kNoBody = UINT32_MAX;

  enum class Kind : uint8_t { kEmpty, kNothing, kBytes, kByteSet, kChars, kRule, kSeq, kAlt, kRepeat, kFsa };
  struct Expr {
    explicit Expr(Kind k) : kind(k) {}
    Kind kind;
    std::vector<ExprId> children;  // kSeq, kAlt; kRepeat has one
    std::string bytes;             // kBytes
    uint32_t index = 0;            // kRule: rule; kByteSet, kChars, kFsa: index into the side tables
    uint32_t min = 0, max = 0;     // kRepeat
  };
  struct Rule {
    std::string name;
    ExprId body = kNoBody;
    // States of this rule that behave alike for the next few bytes may share one mask
    // cache entry (set for long counted repetitions such as maxLength strings).
    bool shareable = false;
  };

  // Declares a rule; names must be unique (InputError otherwise).
  RuleId add_rule(std::string_view name);
  // A fresh rule named `base` or `base_2`, `base_3`, ... (for generated rules).
  RuleId add_fresh_rule(std::string_view base);
  void set_body(RuleId rule, ExprId body);
  void set_root(RuleId rule) { root_ = rule; }
  void set_shareable(RuleId rule) { rules_[rule].shareable = true; }
  // The rule with this name, or -1.
  int64_t find_rule(std::string_view name) const;

  ExprId empty();
  ExprId nothing();
  ExprId bytes(std::string_view b);
  ExprId byte_set(const ByteSet& set);
  ExprId chars(const CodepointSet& set);
  ExprId rule_ref(RuleId rule);
  ExprId seq(std::vector<ExprId> parts);
  ExprId alt(std::vector<ExprId> parts);
  ExprId repeat(ExprId e, uint32_t min, uint32_t max);
  ExprId fsa(Fsa automaton);  // rule edges in it name rules of this grammar

  RuleId root() const { return root_; }
  size_t num_rules() const { return rules_.size(); }
  const Rule& rule(RuleId r) const { return rules_[r]; }
  const Expr& expr(ExprId e) const { return exprs_[e]; }
  const ByteSet& byte_set_at(uint32_t i) const { return byte_sets_[i]; }
  const CodepointSet& chars_at(uint32_t i) const { return char_sets_[i]; }
  const Fsa& fsa_at(uint32_t i) const { return fsas_[i]; }

  // GBNF-like text, for debugging and tests (automata print as <fsa N states>).
  std::string to_string() const;

 private:
  ExprId add(Expr e);

  std::vector<Rule> rules_;
  std::vector<Expr> exprs_;
  std::vector<ByteSet> byte_sets_;
  std::vector<CodepointSet> char_sets_;
  std::vector<Fsa> fsas_;
  std::unordered_map<std::string, RuleId> by_name_;
  RuleId root_ = 0;
};

}  // namespace deepinfer::structured
