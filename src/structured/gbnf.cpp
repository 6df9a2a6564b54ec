#include "structured/gbnf.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "common/check.h"
#include "structured/fsa_builder.h"

namespace deepinfer::structured {
namespace {

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  GbnfParser(std::string_view text, CompileBudget* budget) : text_(text), budget_(budget) {}

  Grammar parse() {
    skip_space(true);
    while (!eof()) {
      parse_rule();
      skip_space(true);
    }
    for (const auto& [name, where] : first_use_) {
      const int64_t r = g_.find_rule(name);
      if (r < 0 || !defined_[size_t(r)]) {
        pos_ = where;
        fail("undefined rule '" + name + "'");
      }
    }
    const int64_t root = g_.find_rule("root");
    if (root < 0 || !defined_[size_t(root)]) fail_at_end("grammar has no 'root' rule");
    g_.set_root(Grammar::RuleId(root));
    return std::move(g_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw InputError(str_cat("GBNF error at line ", line, " column ", col, ": ", what));
  }
  [[noreturn]] void fail_at_end(const std::string& what) const { throw InputError("GBNF error: " + what); }
  bool eof() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }

  void skip_space(bool newline_ok) {
    while (!eof()) {
      const char c = peek();
      if (c == ' ' || c == '\t' || ((c == '\n' || c == '\r') && newline_ok)) {
        ++pos_;
      } else if (c == '#') {
        while (!eof() && peek() != '\n') ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!eof() && is_word_char(peek())) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  Grammar::RuleId rule_id(const std::string& name) {
    const int64_t r = g_.find_rule(name);
    if (r >= 0) return Grammar::RuleId(r);
    defined_.push_back(false);
    return g_.add_rule(name);
  }

  void parse_rule() {
    const size_t start = pos_;
    const std::string name = parse_name();
    const Grammar::RuleId r = rule_id(name);
    if (defined_[r]) {
      pos_ = start;
      fail("rule '" + name + "' is defined twice");
    }
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") fail("expected '::='");
    pos_ += 3;
    skip_space(true);
    const Grammar::ExprId body = parse_alternates(false, 0);
    g_.set_body(r, body);
    defined_[r] = true;
    skip_space(false);
    if (!eof()) {
      if (peek() == '\r') ++pos_;
      if (eof() || peek() != '\n') fail("expected the end of the rule (newline)");
      ++pos_;
    }
  }

  Grammar::ExprId parse_alternates(bool nested, int depth) {
    if (depth > budget_->limits().max_nesting) fail("groups nested too deeply");
    std::vector<Grammar::ExprId> alts{parse_sequence(nested, depth)};
    while (!eof() && peek() == '|') {
      ++pos_;
      skip_space(true);
      alts.push_back(parse_sequence(nested, depth));
    }
    return g_.alt(std::move(alts));
  }

  Grammar::ExprId parse_sequence(bool nested, int depth) {
    std::vector<Grammar::ExprId> items;
    while (!eof()) {
      const char c = peek();
      Grammar::ExprId e;
      if (c == '"') {
        ++pos_;
        std::string bytes;
        while (!eof() && peek() != '"') append_utf8(parse_char(), &bytes);
        if (eof()) fail("unterminated string literal");
        ++pos_;
        e = g_.bytes(bytes);
      } else if (c == '[') {
        e = parse_class();
      } else if (c == '.') {
        ++pos_;
        e = g_.chars(CodepointSet::all_scalars());
      } else if (is_word_char(c)) {
        const size_t where = pos_;
        const std::string name = parse_name();
        first_use_.try_emplace(name, where);
        e = g_.rule_ref(rule_id(name));
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        e = parse_alternates(true, depth + 1);
        if (eof() || peek() != ')') fail("expected ')'");
        ++pos_;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (items.empty()) fail("repetition operator without a preceding element");
        items.back() = parse_repetition(items.back());
        skip_space(nested);
        continue;
      } else if (c == '<') {
        fail("token references (<...>) are not supported");
      } else {
        break;
      }
      items.push_back(e);
      skip_space(nested);
    }
    if (items.empty()) return g_.empty();
    return g_.seq(std::move(items));
  }

  Grammar::ExprId parse_repetition(Grammar::ExprId e) {
    const char c = peek();
    ++pos_;
    if (c == '*') return g_.repeat(e, 0, Grammar::kUnbounded);
    if (c == '+') return g_.repeat(e, 1, Grammar::kUnbounded);
    if (c == '?') return g_.repeat(e, 0, 1);
    skip_space(true);
    const uint64_t min = parse_int();
    uint64_t max = min;
    skip_space(true);
    if (!eof() && peek() == ',') {
      ++pos_;
      skip_space(true);
      max = (!eof() && peek() >= '0' && peek() <= '9') ? parse_int() : UINT64_MAX;
      skip_space(true);
    }
    if (eof() || peek() != '}') fail("expected '}'");
    ++pos_;
    const uint64_t cap = budget_->limits().max_repeat;
    if (min > cap || (max != UINT64_MAX && max > cap)) fail(str_cat("repetition count above the limit of ", cap));
    if (max < min) fail("repetition {m,n} with m > n");
    return g_.repeat(e, uint32_t(min), max == UINT64_MAX ? Grammar::kUnbounded : uint32_t(max));
  }

  uint64_t parse_int() {
    const size_t start = pos_;
    uint64_t v = 0;
    while (!eof() && peek() >= '0' && peek() <= '9') {
      v = std::min<uint64_t>(v * 10 + uint64_t(peek() - '0'), uint64_t(1) << 40);
      ++pos_;
    }
    if (pos_ == start) fail("expected a number");
    return v;
  }

  Grammar::ExprId parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (!eof() && peek() == '^') {
      negate = true;
      ++pos_;
    }
    CodepointSet set;
    while (!eof() && peek() != ']') {
      const uint32_t lo = parse_char();
      if (pos_ + 1 < text_.size() && peek() == '-' && text_[pos_ + 1] != ']') {
        ++pos_;
        const uint32_t hi = parse_char();
        if (hi < lo) fail("character range out of order");
        set.add(lo, hi);
      } else {
        set.add(lo);
      }
    }
    if (eof()) fail("unterminated character class");
    ++pos_;
    return g_.chars(negate ? set.complement() : set);
  }

  uint32_t hex(int n) {
    uint32_t v = 0;
    if (const char* error = read_hex_digits(text_, &pos_, n, &v)) fail(error);
    if (v > kMaxCodepoint) fail("code point out of range");
    return v;
  }

  uint32_t parse_char() {
    if (peek() != '\\') {
      uint32_t cp;
      if (!decode_utf8(text_, &pos_, &cp)) fail("invalid UTF-8");
      return cp;
    }
    ++pos_;
    if (eof()) fail("truncated escape");
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'x': return hex(2);
      case 'u': return hex(4);
      case 'U': return hex(8);
      case 't': return '\t';
      case 'r': return '\r';
      case 'n': return '\n';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '/':
        return uint32_t(c);
      default: --pos_; fail(str_cat("unknown escape \\", c));
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
  CompileBudget* budget_;
  Grammar g_;
  std::vector<bool> defined_;
  std::unordered_map<std::string, size_t> first_use_;
};

}  // namespace

Grammar parse_gbnf(std::string_view text, CompileBudget* budget) {
  DI_CHECK_INPUT(text.size() <= budget->limits().max_input_bytes, "grammar longer than ",
                 budget->limits().max_input_bytes, " bytes");
  return GbnfParser(text, budget).parse();
}

}  // namespace deepinfer::structured
