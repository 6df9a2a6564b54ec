// Grammar -> CompiledGrammar.
#include <algorithm>

#include "common/check.h"
#include "structured/compiled_grammar.h"
#include "structured/fsa_builder.h"

namespace deepinfer::structured {
namespace {

constexpr uint32_t kNone = UINT32_MAX;

class Lowering {
 public:
  Lowering(const Grammar& g, CompileBudget* budget) : g_(g), budget_(budget) {}

  Fsa lower_rule(Grammar::RuleId r) {
    FsaBuilder b(budget_, budget_->limits().max_rule_states);
    const FsaBuilder::Frag f = lower(b, g_.rule(r).body);
    return b.finish(f);
  }

 private:
  FsaBuilder::Frag lower(FsaBuilder& b, Grammar::ExprId id) {
    const Grammar::Expr& e = g_.expr(id);
    switch (e.kind) {
      case Grammar::Kind::kEmpty: return b.empty();
      case Grammar::Kind::kNothing: return b.nothing();
      case Grammar::Kind::kBytes: return b.literal(e.bytes);
      case Grammar::Kind::kByteSet: return b.byte_set(g_.byte_set_at(e.index));
      case Grammar::Kind::kChars: return b.chars(g_.chars_at(e.index), CharEncoding::kUtf8);
      case Grammar::Kind::kRule: return b.rule(e.index);
      case Grammar::Kind::kFsa: return b.embed(g_.fsa_at(e.index));
      case Grammar::Kind::kSeq: {
        std::vector<FsaBuilder::Frag> parts;
        for (Grammar::ExprId c : e.children) parts.push_back(lower(b, c));
        return b.seq(parts);
      }
      case Grammar::Kind::kAlt: {
        std::vector<FsaBuilder::Frag> parts;
        for (Grammar::ExprId c : e.children) parts.push_back(lower(b, c));
        return b.alt(parts);
      }
      case Grammar::Kind::kRepeat: {
        const uint32_t max_repeat = uint32_t(budget_->limits().max_repeat);
        DI_CHECK_INPUT(e.min <= max_repeat && (e.max == Grammar::kUnbounded || e.max <= max_repeat),
                       "repetition count above the limit of ", max_repeat);
        const Grammar::ExprId child = e.children[0];
        return b.repeat([&] { return lower(b, child); }, e.min, e.max);
      }
    }
    return b.nothing();
  }

  const Grammar& g_;
  CompileBudget* budget_;
};

// Rules reachable from `root` through rule edges of the given automata.
std::vector<uint32_t> reachable_rules(const std::vector<Fsa>& fsas, uint32_t root) {
  std::vector<bool> seen(fsas.size(), false);
  std::vector<uint32_t> order{root}, stack{root};
  seen[root] = true;
  while (!stack.empty()) {
    const uint32_t r = stack.back();
    stack.pop_back();
    for (const Fsa::State& s : fsas[r].states) {
      for (const Fsa::RuleEdge& e : s.rules) {
        if (!seen[e.rule]) {
          seen[e.rule] = true;
          order.push_back(e.rule);
          stack.push_back(e.rule);
        }
      }
    }
  }
  return order;
}

// Rules whose automaton can reach a final state, using only productive rules' edges.
std::vector<bool> productive_rules(const std::vector<Fsa>& fsas, CompileBudget* budget) {
  std::vector<bool> productive(fsas.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < fsas.size(); ++r) {
      if (productive[r] || fsas[r].states.empty()) continue;
      const Fsa& f = fsas[r];
      std::vector<bool> seen(f.states.size(), false);
      std::vector<uint32_t> stack{f.start};
      seen[f.start] = true;
      bool found = false;
      while (!stack.empty() && !found) {
        const uint32_t s = stack.back();
        stack.pop_back();
        if (f.states[s].final) found = true;
        auto visit = [&](uint32_t t) {
          if (!seen[t]) {
            seen[t] = true;
            stack.push_back(t);
          }
        };
        for (const Fsa::ByteEdge& e : f.states[s].bytes) visit(e.to);
        for (const Fsa::RuleEdge& e : f.states[s].rules)
          if (productive[e.rule]) visit(e.to);
      }
      if (found) {
        productive[r] = true;
        changed = true;
      }
    }
    budget->check_time("productivity analysis");
  }
  return productive;
}

}  // namespace

std::string CompiledGrammar::stats() const {
  return std::to_string(num_rules()) + " rules, " + std::to_string(num_states()) + " states, " +
         std::to_string(byte_edges_.size() + rule_edges_.size()) + " edges";
}

std::shared_ptr<const CompiledGrammar> compile_grammar(const Grammar& grammar, CompileBudget* budget) {
  const size_t n = grammar.num_rules();
  DI_CHECK_INPUT(n > 0 && grammar.root() < n, "grammar has no root rule");
  DI_CHECK_INPUT(n <= budget->limits().max_rules, "grammar has ", n, " rules, above the limit of ",
                 budget->limits().max_rules);
  // Lower the rules reachable from the root (through the expressions).
  std::vector<Fsa> fsas(n);
  std::vector<bool> lowered(n, false);
  Lowering lowering(grammar, budget);
  std::vector<uint32_t> stack{grammar.root()};
  lowered[grammar.root()] = true;
  while (!stack.empty()) {
    const uint32_t r = stack.back();
    stack.pop_back();
    DI_CHECK_INPUT(grammar.rule(r).body != Grammar::kNoBody, "grammar rule '", grammar.rule(r).name,
                   "' is used but never defined");
    const Grammar::Expr& body = grammar.expr(grammar.rule(r).body);
    if (body.kind == Grammar::Kind::kFsa && !grammar.fsa_at(body.index).has_epsilons()) {
      fsas[r] = grammar.fsa_at(body.index);  // front ends hand in optimized automata
    } else {
      fsas[r] = optimize_fsa(lowering.lower_rule(r), budget->limits().max_rule_states, budget);
    }
    for (const Fsa::State& s : fsas[r].states) {
      for (const Fsa::RuleEdge& e : s.rules) {
        DI_CHECK_INPUT(e.rule < n, "grammar refers to an unknown rule");
        if (!lowered[e.rule]) {
          lowered[e.rule] = true;
          stack.push_back(e.rule);
        }
      }
    }
  }
  // Drop what can never match, then what is no longer reachable.
  const std::vector<bool> productive = productive_rules(fsas, budget);
  for (size_t r = 0; r < n; ++r)
    if (lowered[r]) fsas[r] = trim(fsas[r], &productive);
  const std::vector<uint32_t> order = reachable_rules(fsas, grammar.root());

  auto g = std::make_shared<CompiledGrammar>();
  std::vector<uint32_t> new_rule(n, kNone);
  for (size_t i = 0; i < order.size(); ++i) new_rule[order[i]] = uint32_t(i);
  std::vector<uint32_t> offset(order.size());
  uint32_t total = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    offset[i] = total;
    total += uint32_t(fsas[order[i]].states.size());
  }
  g->root_ = 0;
  g->empty_ = !productive[grammar.root()];
  g->byte_begin_.push_back(0);
  g->rule_begin_.push_back(0);
  for (size_t i = 0; i < order.size(); ++i) {
    const Fsa& f = fsas[order[i]];
    g->rule_start_.push_back(offset[i] + f.start);
    g->rule_name_.push_back(grammar.rule(order[i]).name);
    g->rule_shareable_.push_back(grammar.rule(order[i]).shareable);
    for (const Fsa::State& s : f.states) {
      bool simple = s.rules.empty();
      for (size_t k = 0; k < s.bytes.size(); ++k) {
        const Fsa::ByteEdge& e = s.bytes[k];
        if (k > 0 && e.lo <= s.bytes[k - 1].hi) simple = false;
        g->byte_edges_.push_back({e.lo, e.hi, offset[i] + e.to});
      }
      for (const Fsa::RuleEdge& e : s.rules) {
        DI_CHECK(new_rule[e.rule] != kNone, "trimmed rule edge names a dropped rule");
        g->rule_edges_.push_back({new_rule[e.rule], offset[i] + e.to});
      }
      g->state_rule_.push_back(uint32_t(i));
      g->flags_.push_back(uint8_t((s.final ? CompiledGrammar::kFinal : 0) | (simple ? CompiledGrammar::kSimple : 0)));
      g->byte_begin_.push_back(uint32_t(g->byte_edges_.size()));
      g->rule_begin_.push_back(uint32_t(g->rule_edges_.size()));
    }
  }
  const uint32_t num_rules = uint32_t(order.size());
  const uint32_t num_states = total;

  // Nullability: a state can finish its rule without reading a byte.
  std::vector<uint8_t> passable(num_states, 0);
  g->rule_nullable_.assign(num_rules, 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t s = num_states; s-- > 0;) {
      if (passable[s]) continue;
      bool p = g->is_final(s);
      for (const auto& e : g->rule_edges(s)) p = p || (g->rule_nullable_[e.rule] && passable[e.to]);
      if (p) {
        passable[s] = 1;
        changed = true;
      }
    }
    for (uint32_t r = 0; r < num_rules; ++r) {
      if (!g->rule_nullable_[r] && passable[g->rule_start_[r]]) {
        g->rule_nullable_[r] = 1;
        changed = true;
      }
    }
    budget->check_time("nullability analysis");
  }
  // FIRST per state (bytes readable next inside its rule), then FOLLOW per rule.
  std::vector<ByteSet> first(num_states);
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t s = num_states; s-- > 0;) {
      ByteSet f = first[s];
      for (const auto& e : g->byte_edges(s)) f.set_range(e.lo, e.hi);
      for (const auto& e : g->rule_edges(s)) {
        f |= first[g->rule_start_[e.rule]];
        if (g->rule_nullable_[e.rule]) f |= first[e.to];
      }
      if (!(f == first[s])) {
        first[s] = f;
        changed = true;
      }
    }
    budget->check_time("first-set analysis");
  }
  g->rule_follow_.assign(num_rules, ByteSet());
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t s = 0; s < num_states; ++s) {
      for (const auto& e : g->rule_edges(s)) {
        ByteSet f = g->rule_follow_[e.rule];
        f |= first[e.to];
        if (passable[e.to]) f |= g->rule_follow_[g->state_rule_[e.to]];
        if (!(f == g->rule_follow_[e.rule])) {
          g->rule_follow_[e.rule] = f;
          changed = true;
        }
      }
    }
    budget->check_time("follow-set analysis");
  }
  return g;
}

}  // namespace deepinfer::structured
