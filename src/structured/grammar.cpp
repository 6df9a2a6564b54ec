#include "structured/grammar.h"

#include <cstdio>

#include "common/check.h"

namespace deepinfer::structured {

Grammar::RuleId Grammar::add_rule(std::string_view name) {
  auto [it, inserted] = by_name_.try_emplace(std::string(name), RuleId(rules_.size()));
  DI_CHECK_INPUT(inserted, "grammar rule '", name, "' is defined twice");
  rules_.push_back({std::string(name), kNoBody});
  return it->second;
}

Grammar::RuleId Grammar::add_fresh_rule(std::string_view base) {
  if (!by_name_.count(std::string(base))) return add_rule(base);
  for (size_t i = 2;; ++i) {
    std::string name = std::string(base) + "_" + std::to_string(i);
    if (!by_name_.count(name)) return add_rule(name);
  }
}

void Grammar::set_body(RuleId rule, ExprId body) { rules_[rule].body = body; }

int64_t Grammar::find_rule(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? -1 : int64_t(it->second);
}

Grammar::ExprId Grammar::add(Expr e) {
  exprs_.push_back(std::move(e));
  return ExprId(exprs_.size() - 1);
}

Grammar::ExprId Grammar::empty() { return add(Expr(Kind::kEmpty)); }
Grammar::ExprId Grammar::nothing() { return add(Expr(Kind::kNothing)); }

Grammar::ExprId Grammar::bytes(std::string_view b) {
  Expr e{Kind::kBytes};
  e.bytes = std::string(b);
  return add(std::move(e));
}

Grammar::ExprId Grammar::byte_set(const ByteSet& set) {
  byte_sets_.push_back(set);
  Expr e{Kind::kByteSet};
  e.index = uint32_t(byte_sets_.size() - 1);
  return add(std::move(e));
}

Grammar::ExprId Grammar::chars(const CodepointSet& set) {
  char_sets_.push_back(set);
  Expr e{Kind::kChars};
  e.index = uint32_t(char_sets_.size() - 1);
  return add(std::move(e));
}

Grammar::ExprId Grammar::rule_ref(RuleId rule) {
  Expr e{Kind::kRule};
  e.index = rule;
  return add(std::move(e));
}

Grammar::ExprId Grammar::seq(std::vector<ExprId> parts) {
  if (parts.size() == 1) return parts[0];
  Expr e{Kind::kSeq};
  e.children = std::move(parts);
  return add(std::move(e));
}

Grammar::ExprId Grammar::alt(std::vector<ExprId> parts) {
  if (parts.size() == 1) return parts[0];
  Expr e{Kind::kAlt};
  e.children = std::move(parts);
  return add(std::move(e));
}

Grammar::ExprId Grammar::repeat(ExprId child, uint32_t min, uint32_t max) {
  Expr e{Kind::kRepeat};
  e.children = {child};
  e.min = min;
  e.max = max;
  return add(std::move(e));
}

Grammar::ExprId Grammar::fsa(Fsa automaton) {
  fsas_.push_back(std::move(automaton));
  Expr e{Kind::kFsa};
  e.index = uint32_t(fsas_.size() - 1);
  return add(std::move(e));
}

namespace {

std::string escape_byte(unsigned char c, bool in_class) {
  if (c == '"' && !in_class) return "\\\"";
  if (c == '\\') return "\\\\";
  if (in_class && (c == ']' || c == '-' || c == '^')) return std::string("\\") + char(c);
  if (c == '\n') return "\\n";
  if (c == '\t') return "\\t";
  if (c == '\r') return "\\r";
  if (c < 0x20 || c >= 0x7F) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "\\x%02X", c);
    return buf;
  }
  return std::string(1, char(c));
}

}  // namespace

std::string Grammar::to_string() const {
  std::string out;
  // Recursion depth is bounded by the front ends' nesting limit.
  auto print = [&](auto&& self, ExprId id) -> void {
    const Expr& e = exprs_[id];
    switch (e.kind) {
      case Kind::kEmpty: out += "\"\""; break;
      case Kind::kNothing: out += "[^\\x00-\\U0010FFFF]"; break;
      case Kind::kBytes:
        out += '"';
        for (unsigned char c : e.bytes) out += escape_byte(c, false);
        out += '"';
        break;
      case Kind::kByteSet: {
        out += "[";
        const ByteSet& s = byte_sets_[e.index];
        for (int b = 0; b < 256;) {
          if (!s.test(uint8_t(b))) {
            ++b;
            continue;
          }
          int hi = b;
          while (hi + 1 < 256 && s.test(uint8_t(hi + 1))) ++hi;
          out += escape_byte(uint8_t(b), true);
          if (hi > b) out += "-" + escape_byte(uint8_t(hi), true);
          b = hi + 1;
        }
        out += "]";
        break;
      }
      case Kind::kChars: {
        out += "[";
        for (auto [lo, hi] : char_sets_[e.index].ranges()) {
          char buf[32];
          std::snprintf(buf, sizeof buf, lo == hi ? "\\U%08X" : "\\U%08X-\\U%08X", lo, hi);
          out += buf;
        }
        out += "]";
        break;
      }
      case Kind::kRule: out += rules_[e.index].name; break;
      case Kind::kSeq:
      case Kind::kAlt:
        out += "(";
        for (size_t i = 0; i < e.children.size(); ++i) {
          if (i) out += e.kind == Kind::kSeq ? " " : " | ";
          self(self, e.children[i]);
        }
        out += ")";
        break;
      case Kind::kRepeat:
        self(self, e.children[0]);
        out += "{" + std::to_string(e.min) + "," + (e.max == kUnbounded ? "" : std::to_string(e.max)) + "}";
        break;
      case Kind::kFsa: out += "<fsa " + std::to_string(fsas_[e.index].states.size()) + " states>"; break;
    }
  };
  for (size_t r = 0; r < rules_.size(); ++r) {
    out += rules_[r].name + " ::= ";
    if (rules_[r].body == kNoBody) {
      out += "<undefined>";
    } else {
      print(print, rules_[r].body);
    }
    out += "\n";
  }
  return out;
}

}  // namespace deepinfer::structured
