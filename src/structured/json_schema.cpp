// JSON Schema -> Grammar: one rule per distinct AND of subschemas, whose body is the
// union of its normalized branches, each branch emitted per JSON type.
#include "structured/json_schema.h"

#include <algorithm>
#include <functional>
#include <map>

#include "common/check.h"
#include "structured/fsa_builder.h"
#include "structured/json_formats.h"
#include "structured/json_number.h"
#include "structured/json_schema_model.h"
#include "structured/regex.h"

namespace deepinfer::structured {
namespace {

using jsonschema::Alts;
using jsonschema::Conj;
using jsonschema::Json;
using jsonschema::SchemaList;
using jsonschema::SchemaModel;
using jsonschema::SchemaStore;
using jsonschema::kNoLimit;
using Frag = FsaBuilder::Frag;

// `"` body `"` without epsilons; body must be epsilon-free and never read a raw quote.
Fsa quote_wrap(const Fsa& body) {
  Fsa f;
  f.start = f.add_state();
  const uint32_t off = 1;
  for (size_t i = 0; i < body.states.size(); ++i) f.add_state();
  const uint32_t end = f.add_state();
  f.states[end].final = true;
  f.states[f.start].bytes.push_back({'"', '"', body.start + off});
  for (size_t i = 0; i < body.states.size(); ++i) {
    const Fsa::State& s = body.states[i];
    Fsa::State& n = f.states[i + off];
    for (const Fsa::ByteEdge& e : s.bytes) n.bytes.push_back({e.lo, e.hi, e.to + off});
    if (s.final) {
      auto pos = std::lower_bound(n.bytes.begin(), n.bytes.end(), uint8_t('"'),
                                  [](const Fsa::ByteEdge& e, uint8_t b) { return e.lo < b; });
      n.bytes.insert(pos, {'"', '"', end});
    }
  }
  return f;
}

// `unit` (one character: deterministic, one non-final start, finals without edges)
// repeated min..max times, built directly as a chain of copies.
Fsa repeat_unit(const Fsa& unit, uint64_t min, uint64_t max, CompileBudget* budget) {
  std::vector<uint32_t> inner;  // non-final states of the unit, start first
  std::vector<uint32_t> index(unit.states.size(), UINT32_MAX);
  inner.push_back(unit.start);
  for (uint32_t s = 0; s < unit.states.size(); ++s)
    if (!unit.states[s].final && s != unit.start) inner.push_back(s);
  for (uint32_t i = 0; i < inner.size(); ++i) index[inner[i]] = i;
  const uint64_t k_max = max != kNoLimit ? max : min;
  const uint64_t states = (k_max + 1) * inner.size();
  DI_CHECK_INPUT(states <= budget->limits().max_rule_states, "string length bound ", k_max,
                 " needs too many automaton states");
  budget->add_states(states, "string length");
  Fsa f;
  f.states.resize(states);
  auto id = [&](uint64_t k, uint32_t i) { return uint32_t(k * inner.size() + i); };
  f.start = 0;
  for (uint64_t k = 0; k <= k_max; ++k) {
    f.states[id(k, 0)].final = k >= min;
    if (max != kNoLimit && k == max) continue;
    for (uint32_t i = 0; i < inner.size(); ++i) {
      for (const Fsa::ByteEdge& e : unit.states[inner[i]].bytes) {
        const uint32_t to = unit.states[e.to].final ? id(std::min(k + 1, k_max), 0) : id(k, index[e.to]);
        f.states[id(k, i)].bytes.push_back({e.lo, e.hi, to});
      }
    }
  }
  return trim(f);
}

// One character inside a JSON string (CharEncoding::kJsonString), and a whole quoted
// string; built once per process.
const Fsa& json_char_fsa() {
  static const Fsa f = [] {
    CompileBudget budget{CompileLimits{}};
    FsaBuilder b(&budget, 1 << 16);
    return optimize_fsa(b.finish(b.chars(CodepointSet::all_scalars(), CharEncoding::kJsonString)), 1 << 16, &budget);
  }();
  return f;
}

const Fsa& json_string_fsa() {
  static const Fsa f = [] {
    CompileBudget budget{CompileLimits{}};
    return quote_wrap(repeat_unit(json_char_fsa(), 0, kNoLimit, &budget));
  }();
  return f;
}

std::string rule_name(const std::string& path) {
  std::string n = "s";
  for (char c : path) n += (isalnum(uint8_t(c)) || c == '_' || c == '-') ? c : '_';
  return n.size() > 48 ? n.substr(0, 48) : n;
}

class Emitter {
 public:
  Emitter(const Json& schema, const JsonSchemaOptions& options, CompileBudget* budget)
      : options_(options), budget_(budget), store_(schema, budget), model_(&store_, options, budget) {}

  Grammar run() {
    const Grammar::RuleId root = rule_for(model_.both({}, {store_.root()}), "root");
    g_.set_root(root);
    return std::move(g_);
  }

 private:
  Grammar::RuleId rule_for(const SchemaList& list, const std::string& name = "") {
    if (list.empty() && name.empty()) return json_value();
    auto it = rules_.find(list);
    if (it != rules_.end()) return it->second;
    DI_CHECK_INPUT(rules_.size() < budget_->limits().max_rules, "schema needs more than ",
                   budget_->limits().max_rules, " grammar rules");
    const Grammar::RuleId r =
        g_.add_fresh_rule(!name.empty() ? name : list.empty() ? "any" : rule_name(store_.path(list[0])));
    rules_[list] = r;
    std::vector<Grammar::ExprId> alts;
    for (const Conj& c : model_.normalize(list)) alts.push_back(conj_expr(c));
    g_.set_body(r, alts.empty() ? g_.nothing() : g_.alt(std::move(alts)));
    return r;
  }

  // --- shared rules -------------------------------------------------------------------
  Grammar::RuleId shared(Grammar::RuleId* slot, const char* name, const std::function<Grammar::ExprId()>& body) {
    if (*slot == kNoRule) {
      *slot = g_.add_fresh_rule(name);
      g_.set_body(*slot, body());
    }
    return *slot;
  }
  Grammar::RuleId ws_rule() {
    return shared(&ws_, "ws", [&] {
      ByteSet s;
      for (char c : {' ', '\t', '\n', '\r'}) s.set(uint8_t(c));
      return g_.repeat(g_.byte_set(s), 0, uint32_t(options_.max_whitespace));
    });
  }
  Grammar::RuleId json_string() {
    return shared(&string_, "json_string", [&] { return g_.fsa(json_string_fsa()); });
  }
  Grammar::RuleId json_number(bool integer) {
    return shared(integer ? &integer_ : &number_, integer ? "json_integer" : "json_number",
                  [&] { return g_.fsa(number_syntax_fsa(integer, !integer, options_.number_digits)); });
  }
  Grammar::RuleId json_value() {
    return shared(&value_, "json_value", [&] {
      Conj any;
      return conj_expr(any);
    });
  }

  // Whitespace between JSON tokens, inside an automaton under construction.
  Frag ws(FsaBuilder& b) {
    if (options_.whitespace == JsonSchemaOptions::Whitespace::kCompact || options_.max_whitespace == 0) return b.empty();
    if (options_.max_whitespace < 0) {
      ByteSet s;
      for (char c : {' ', '\t', '\n', '\r'}) s.set(uint8_t(c));
      return b.star(b.byte_set(s));
    }
    return b.rule(ws_rule());
  }
  Frag punct(FsaBuilder& b, const char* p) {
    const Frag parts[] = {ws(b), b.literal(p), ws(b)};
    return b.seq(parts);
  }

  // --- one branch ---------------------------------------------------------------------
  Grammar::ExprId conj_expr(const Conj& c) {
    budget_->check_time("schema emission");
    std::vector<Grammar::ExprId> alts;
    if (c.has_values) {
      for (const Json* v : c.values)
        if (model_.validate(*v, c, false)) alts.push_back(literal(*v));
      return alts.empty() ? g_.nothing() : g_.alt(std::move(alts));
    }
    if (c.types & jsonschema::kNull) alts.push_back(g_.bytes("null"));
    if (c.types & jsonschema::kBool) alts.push_back(g_.alt({g_.bytes("true"), g_.bytes("false")}));
    if (c.types & (jsonschema::kInt | jsonschema::kFrac)) alts.push_back(number_expr(c));
    if (c.types & jsonschema::kString) alts.push_back(string_expr(c));
    if (c.types & jsonschema::kArray) alts.push_back(array_expr(c));
    if (c.types & jsonschema::kObject) alts.push_back(object_expr(c));
    return alts.empty() ? g_.nothing() : g_.alt(std::move(alts));
  }

  Grammar::ExprId number_expr(const Conj& c) {
    const bool integer = !(c.types & jsonschema::kFrac);
    const bool fraction_only = !(c.types & jsonschema::kInt);
    if (!c.lo.set && !c.hi.set && c.multiples.empty() && !fraction_only) return g_.rule_ref(json_number(integer));
    Fsa f = constrained_number(c, number_digits_for(c));
    // The digit policy must not empty a satisfiable schema (json_schema.h).
    if (!options_.number_digits.unbounded() && is_empty_language(f)) f = constrained_number(c, NumberDigits{});
    return own_rule("number", std::move(f));
  }
  // The digit bound for a number with keywords, widened to what the schema's own numbers
  // need: integer digits + 1 of its bounds and divisors (the next value past a bound may
  // need one more), and for a mantissa with a point those integer digits plus fraction
  // digits + 1 of the bounds or the divisors' fraction digits.
  NumberDigits number_digits_for(const Conj& c) const {
    NumberDigits d = options_.number_digits;
    size_t int_need = 1, frac_need = 0;
    for (const auto* b : {&c.lo, &c.hi}) {
      if (!b->set) continue;
      int_need = std::max(int_need, b->value.int_digits.size() + 1);
      frac_need = std::max(frac_need, b->value.frac_digits.size() + 1);
    }
    for (const Decimal& q : c.multiples) {
      int_need = std::max(int_need, q.int_digits.size() + 1);
      frac_need = std::max(frac_need, q.frac_digits.size());
    }
    auto widen = [](int* bound, size_t need) {
      if (*bound >= 0) *bound = int(std::max<size_t>(size_t(*bound), need));
    };
    widen(&d.integer, int_need);
    if (frac_need > 0) widen(&d.decimal, int_need + frac_need);
    return d;
  }
  Fsa constrained_number(const Conj& c, const NumberDigits& digits) {
    const bool integer = !(c.types & jsonschema::kFrac);
    const bool fraction_only = !(c.types & jsonschema::kInt);
    Fsa f = number_syntax_fsa(integer, false, digits);
    if (fraction_only) {  // e.g. {"not": {"type": "integer"}}: a nonzero fraction digit
      f = intersect(f, regex_to_fsa("-?(0|[1-9][0-9]*)\\.[0-9]*[1-9][0-9]*", RegexOptions{}, budget_), budget_);
    }
    if (c.lo.set)
      f = intersect(f, number_compare_fsa(c.lo.value, c.lo.exclusive ? NumberCmp::kGt : NumberCmp::kGe, budget_),
                    budget_);
    if (c.hi.set)
      f = intersect(f, number_compare_fsa(c.hi.value, c.hi.exclusive ? NumberCmp::kLt : NumberCmp::kLe, budget_),
                    budget_);
    for (const Decimal& q : c.multiples) f = intersect(f, number_multiple_of_fsa(q, budget_), budget_);
    return f;
  }

  Grammar::ExprId string_expr(const Conj& c) {
    if (c.min_len == 0 && c.max_len == kNoLimit && c.patterns.empty() && c.formats.empty())
      return g_.rule_ref(json_string());
    // Pattern and format automata only spell valid string characters already, so the
    // length automaton joins the product only when there is a length bound.
    std::vector<Fsa> parts;
    if (c.min_len > 0 || c.max_len != kNoLimit) parts.push_back(repeat_unit(json_char_fsa(), c.min_len, c.max_len, budget_));
    for (const std::string& p : c.patterns) parts.push_back(model_.pattern_fsa(p, CharEncoding::kJsonString));
    for (const std::string& name : c.formats) {
      Fsa f;
      DI_CHECK_INPUT(format_fsa(name, CharEncoding::kJsonString, &f), "format '", name, "' is not supported");
      parts.push_back(std::move(f));
    }
    Fsa body = std::move(parts[0]);
    for (size_t i = 1; i < parts.size(); ++i) body = intersect(body, parts[i], budget_);
    const Grammar::RuleId r = own_rule_id("string", quote_wrap(body));
    if (c.max_len != kNoLimit) g_.set_shareable(r);  // one state per character position
    return g_.rule_ref(r);
  }

  // An automaton as its own rule: the compiler keeps an epsilon-free body as it is.
  Grammar::RuleId own_rule_id(const char* name, Fsa f) {
    const Grammar::RuleId r = g_.add_fresh_rule(name);
    g_.set_body(r, g_.fsa(std::move(f)));
    return r;
  }
  Grammar::ExprId own_rule(const char* name, Fsa f) { return g_.rule_ref(own_rule_id(name, std::move(f))); }

  Grammar::ExprId array_expr(const Conj& c) {
    if (c.unique && c.max_items > 1)
      throw InputError("'uniqueItems': true is not supported (unless maxItems <= 1)");
    FsaBuilder b(budget_, budget_->limits().max_rule_states);
    const uint64_t p = c.prefix.size();
    // Unbounded arrays loop at a state past the first item, so separators stay right.
    const uint64_t k_max =
        c.max_items != kNoLimit ? c.max_items : std::max<uint64_t>({p, c.min_items, uint64_t(1)});
    DI_CHECK_INPUT(k_max < budget_->limits().max_rule_states, "array bound ", k_max, " is too large");
    const bool bounded = c.max_items != kNoLimit;
    std::vector<uint32_t> at(k_max + 1);
    for (uint64_t k = 0; k <= k_max; ++k) at[k] = b.empty().in;
    const Frag open = b.literal("[");
    b.seq(open, Frag{at[0], at[0]});
    const uint32_t end = b.empty().in;
    for (uint64_t k = 0; k <= k_max; ++k) {
      const Frag here{at[k], at[k]};
      if (k >= c.min_items) b.seq(b.seq(here, b.seq(ws(b), b.literal("]"))), Frag{end, end});
      if (bounded && k == k_max) continue;
      const SchemaList& item = c.item_schema(k);
      if (model_.is_false(item)) continue;
      const Frag sep = k == 0 ? ws(b) : punct(b, ",");
      const Frag elem = b.seq(sep, b.rule(rule_for(item)));
      b.seq(b.seq(here, elem), Frag{at[std::min(k + 1, k_max)], at[std::min(k + 1, k_max)]});
    }
    return g_.fsa(b.finish(Frag{open.in, end}));
  }

  struct Slot {
    std::string name;
    Grammar::RuleId value;
    bool required;
  };

  Grammar::ExprId object_expr(const Conj& c) {
    // Declared properties, then required names that were not declared.
    std::vector<Slot> slots;
    auto required = [&](const std::string& name) {
      return std::find(c.required.begin(), c.required.end(), name) != c.required.end();
    };
    for (const auto& p : c.props)
      if (!model_.is_false(p.second)) slots.push_back({p.first, rule_for(p.second), required(p.first)});
    for (const std::string& r : c.required) {
      bool declared = false;
      for (const auto& p : c.props) declared = declared || p.first == r;
      if (!declared) slots.push_back({r, rule_for(c.additional), true});
    }
    const bool extra = !model_.is_false(c.additional);
    std::vector<std::string> names;
    for (const auto& p : c.props) names.push_back(p.first);
    for (const Slot& sl : slots) names.push_back(sl.name);
    // Additional keys are one rule per object, so the states inside a key string are
    // shared by every position (and so is their mask cache entry).
    Grammar::RuleId keys = 0;
    if (extra) keys = names.empty() ? json_string() : own_rule_id("key", extra_key_fsa(names));
    return object_fsa(slots, keys, extra ? rule_for(c.additional) : 0, extra, c.min_props, c.max_props);
  }

  // An object automaton. With few declared properties (at most max_any_order_properties)
  // they may come in any order, each at most once: the state remembers which were seen
  // (2^n positions). With more, a subset of all of them would not fit (2^n), so the state
  // remembers only the required ones seen (2^r positions, any order, each once) and the
  // optional declared properties may come anywhere, like undeclared ones; their repeats
  // are then not checked (a JSON value cannot hold a repeated key, so no valid instance
  // is refused). Objects whose required set is too large for that are an InputError,
  // never a silent restriction. Additional members (keys from `extra_keys`) may come
  // anywhere. Member counts are tracked only as far as min/max need.
  Grammar::ExprId object_fsa(const std::vector<Slot>& slots, Grammar::RuleId extra_keys, Grammar::RuleId extra_value,
                             bool extra, uint64_t min_props, uint64_t max_props) {
    const size_t n = slots.size();
    const bool all_tracked = n <= size_t(options_.max_any_order_properties);
    // The slots the position tracks (bit i of a position = tracked[i] was seen).
    std::vector<size_t> tracked, loose;
    for (size_t i = 0; i < n; ++i) (all_tracked || slots[i].required ? tracked : loose).push_back(i);
    DI_CHECK_INPUT(tracked.size() <= size_t(options_.max_required_any_order), "object with ", n,
                   " declared properties of which ", tracked.size(),
                   " are required: at most max_required_any_order = ", options_.max_required_any_order,
                   " required properties are supported (their order is free, so every subset is a state)");
    const size_t positions = size_t(1) << tracked.size();
    const uint64_t cap = max_props != kNoLimit ? max_props : std::max<uint64_t>(1, min_props);
    DI_CHECK_INPUT(positions * (cap + 1) <= budget_->limits().max_rule_states / 16, "object with ", n,
                   " properties (", tracked.size(), " tracked in any order) and count bounds up to ", cap,
                   " is too large");
    // Small objects embed each member's key; larger ones call one rule per tracked member
    // and one rule for every other member (optional declared and additional ones), so an
    // edge costs a few states instead of a copy of the key.
    std::vector<Grammar::RuleId> member_rule(n, kNoRule);
    Grammar::RuleId other_rule = kNoRule;
    if (!all_tracked) {
      budget_->check_time("object members");
      for (size_t i : tracked) {
        FsaBuilder mb(budget_, budget_->limits().max_rule_states);
        const Frag parts[] = {mb.embed(key_literal(slots[i].name)), punct(mb, ":"), mb.rule(slots[i].value)};
        member_rule[i] = own_rule_id("member", mb.finish(mb.seq(parts)));
      }
      if (!loose.empty() || extra) {
        FsaBuilder mb(budget_, budget_->limits().max_rule_states);
        std::vector<Frag> alts;
        for (size_t i : loose) {
          const Frag parts[] = {mb.embed(key_literal(slots[i].name)), punct(mb, ":"), mb.rule(slots[i].value)};
          alts.push_back(mb.seq(parts));
        }
        if (extra) {
          const Frag parts[] = {mb.rule(extra_keys), punct(mb, ":"), mb.rule(extra_value)};
          alts.push_back(mb.seq(parts));
        }
        other_rule = own_rule_id("members", mb.finish(mb.alt(alts)));
      }
    }
    FsaBuilder b(budget_, budget_->limits().max_rule_states);
    auto state = [](uint32_t s) { return Frag{s, s}; };
    // The count of declared members is not the popcount here; `k` counts them all.
    std::vector<std::vector<uint32_t>> q(positions, std::vector<uint32_t>(cap + 1));
    for (auto& row : q)
      for (uint32_t& st : row) st = b.empty().in;
    const Frag open = b.literal("{");
    b.seq(open, state(q[0][0]));
    const uint32_t end = b.empty().in;
    std::vector<Fsa> keys(n);
    if (all_tracked)
      for (size_t i = 0; i < n; ++i) keys[i] = key_literal(slots[i].name);
    for (size_t pos = 0; pos < positions; ++pos) {
      budget_->check_time("object automaton");
      for (uint64_t k = 0; k <= cap; ++k) {
        const Frag here = state(q[pos][k]);
        const bool room = max_props == kNoLimit || k < max_props;
        const uint64_t next = std::min(k + 1, cap);
        auto member = [&](Frag key, Grammar::RuleId value) {
          const Frag parts[] = {k == 0 ? ws(b) : punct(b, ","), key, punct(b, ":"), b.rule(value)};
          return b.seq(parts);
        };
        // Large objects: one separator per (position, count), shared by every member
        // rule called after it, keeps the automaton near positions x (members + 2) states.
        uint32_t after_sep = UINT32_MAX;
        auto called = [&](Grammar::RuleId rule) {
          if (after_sep == UINT32_MAX) {
            const Frag sep = k == 0 ? ws(b) : punct(b, ",");
            b.seq(here, sep);
            after_sep = sep.out;
          }
          return b.seq(state(after_sep), b.rule(rule));
        };
        bool complete = true;  // every required declared member is present
        for (size_t t = 0; t < tracked.size(); ++t) {
          const size_t i = tracked[t];
          const bool seen = (pos >> t) & 1;
          if (!seen && slots[i].required) complete = false;
          if (seen || !room) continue;
          const Frag to = state(q[pos | (size_t(1) << t)][next]);
          if (all_tracked) b.seq(b.seq(here, member(b.embed(keys[i]), slots[i].value)), to);
          else b.seq(called(member_rule[i]), to);
        }
        if (complete && k >= min_props) b.seq(b.seq(here, b.seq(ws(b), b.literal("}"))), state(end));
        if (!room) continue;
        if (all_tracked) {
          if (extra) b.seq(b.seq(here, member(b.rule(extra_keys), extra_value)), state(q[pos][next]));
        } else if (other_rule != kNoRule) {
          b.seq(called(other_rule), state(q[pos][next]));
        }
      }
    }
    return g_.fsa(b.finish(Frag{open.in, end}));
  }

  Fsa key_literal(const std::string& name) {
    FsaBuilder b(budget_, 1 << 20);
    const Frag parts[] = {b.literal("\""), b.text(name, CharEncoding::kJsonString), b.literal("\"")};
    return b.finish(b.seq(parts));
  }

  // Quoted keys other than `names`.
  Fsa extra_key_fsa(const std::vector<std::string>& names) {
    const Fsa& all = json_string_fsa();
    if (names.empty()) return all;
    FsaBuilder b(budget_, budget_->limits().max_rule_states);
    std::vector<Frag> keys;
    for (const std::string& name : names) keys.push_back(b.embed(key_literal(name)));
    Fsa declared = optimize_fsa(b.finish(b.alt(keys)), budget_->limits().max_rule_states, budget_);
    DI_CHECK_INPUT(declared.is_deterministic(), "too many property names to exclude from additionalProperties");
    return subtract(all, declared, budget_);
  }

  // --- literals (enum / const) ----------------------------------------------------------
  Grammar::ExprId literal(const Json& v) {
    switch (v.type()) {
      case Json::value_t::null: return g_.bytes("null");
      case Json::value_t::boolean: return g_.bytes(v.get<bool>() ? "true" : "false");
      case Json::value_t::string: return g_.fsa(key_literal(v.get_ref<const std::string&>()));
      case Json::value_t::array: {
        FsaBuilder b(budget_, budget_->limits().max_rule_states);
        std::vector<Frag> parts{b.literal("[")};
        for (size_t i = 0; i < v.size(); ++i) {
          parts.push_back(i == 0 ? ws(b) : punct(b, ","));
          parts.push_back(b.rule(literal_rule(v[i])));
        }
        parts.push_back(ws(b));
        parts.push_back(b.literal("]"));
        return g_.fsa(b.finish(b.seq(parts)));
      }
      case Json::value_t::object: {
        std::vector<Slot> slots;
        for (auto it = v.begin(); it != v.end(); ++it) slots.push_back({it.key(), literal_rule(it.value()), true});
        return object_fsa(slots, 0, 0, false, 0, kNoLimit);
      }
      default: return g_.fsa(number_literal_fsa(Decimal::from_json(v), options_.number_digits));
    }
  }
  Grammar::RuleId literal_rule(const Json& v) {
    const Grammar::RuleId r = g_.add_fresh_rule("literal");
    g_.set_body(r, literal(v));
    return r;
  }

  static constexpr Grammar::RuleId kNoRule = UINT32_MAX;
  JsonSchemaOptions options_;
  CompileBudget* budget_;
  SchemaStore store_;
  SchemaModel model_;
  Grammar g_;
  std::map<SchemaList, Grammar::RuleId> rules_;
  Grammar::RuleId ws_ = kNoRule, string_ = kNoRule, number_ = kNoRule, integer_ = kNoRule, value_ = kNoRule;
};

}  // namespace

size_t json_text_depth(std::string_view text) {
  size_t depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

Grammar json_schema_to_grammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options,
                               CompileBudget* budget) {
  DI_CHECK_INPUT(options.max_whitespace >= -1, "max_whitespace must be -1 or more");
  const NumberDigits& d = options.number_digits;
  DI_CHECK_INPUT((d.integer == -1 || d.integer >= 1) && d.integer <= kMaxNumberDigits,
                 "number_digits.integer must be -1 or in [1, ", kMaxNumberDigits, "]");
  DI_CHECK_INPUT(d.decimal >= -1 && d.decimal != 1 && d.decimal <= kMaxNumberDigits,
                 "number_digits.decimal must be -1, 0 or in [2, ", kMaxNumberDigits, "]");
  DI_CHECK_INPUT(d.exponent >= -1 && d.exponent <= kMaxNumberDigits,
                 "number_digits.exponent must be -1 or in [0, ", kMaxNumberDigits, "]");
  return Emitter(schema, options, budget).run();
}

}  // namespace deepinfer::structured
