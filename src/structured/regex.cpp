#include "structured/regex.h"

#include <string>
#include <vector>

#include "common/check.h"

namespace deepinfer::structured {
namespace {

struct Node {
  enum Kind { kEmpty, kChars, kSeq, kAlt, kRepeat, kStart, kEnd };
  explicit Node(Kind k) : kind(k) {}
  Kind kind;
  CodepointSet chars;
  std::vector<int> children;
  uint32_t min = 0, max = 0;
};

class RegexParser {
 public:
  RegexParser(std::string_view text, CompileBudget* budget) : text_(text), budget_(budget) {}

  int parse() {
    const int root = parse_alt(0);
    if (pos_ < text_.size()) fail("unmatched ')'");
    return root;
  }
  std::vector<Node>& nodes() { return nodes_; }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw InputError(str_cat("invalid regex at offset ", pos_, ": ", what));
  }
  bool eof() const { return pos_ >= text_.size(); }
  char peek() const { return text_[pos_]; }
  int add(Node n) {
    nodes_.push_back(std::move(n));
    return int(nodes_.size() - 1);
  }
  int add_chars(CodepointSet s) {
    Node n{Node::kChars};
    n.chars = std::move(s);
    return add(std::move(n));
  }

  uint32_t next_codepoint() {
    uint32_t cp;
    if (!decode_utf8(text_, &pos_, &cp)) fail("invalid UTF-8");
    return cp;
  }

  int parse_alt(int depth) {
    if (depth > budget_->limits().max_nesting) fail("groups nested too deeply");
    std::vector<int> branches{parse_seq(depth)};
    while (!eof() && peek() == '|') {
      ++pos_;
      branches.push_back(parse_seq(depth));
    }
    if (branches.size() == 1) return branches[0];
    Node n{Node::kAlt};
    n.children = std::move(branches);
    return add(std::move(n));
  }

  int parse_seq(int depth) {
    Node n{Node::kSeq};
    while (!eof() && peek() != '|' && peek() != ')') n.children.push_back(parse_quantified(depth));
    if (n.children.size() == 1) return n.children[0];
    if (n.children.empty()) return add(Node(Node::kEmpty));
    return add(std::move(n));
  }

  // Parses {n}, {n,}, {n,m} at pos_ (pointing at '{'); false if it is not one.
  bool parse_braces(uint32_t* min, uint32_t* max) {
    size_t p = pos_ + 1;
    auto number = [&](uint64_t* v) {
      const size_t start = p;
      *v = 0;
      while (p < text_.size() && text_[p] >= '0' && text_[p] <= '9') {
        *v = std::min<uint64_t>(*v * 10 + uint64_t(text_[p] - '0'), uint64_t(1) << 40);
        ++p;
      }
      return p > start;
    };
    uint64_t lo, hi;
    if (!number(&lo)) return false;
    hi = lo;
    if (p < text_.size() && text_[p] == ',') {
      ++p;
      if (!number(&hi)) hi = kNoMax;
    }
    if (p >= text_.size() || text_[p] != '}') return false;
    const uint64_t cap = budget_->limits().max_repeat;
    if (lo > cap || (hi != kNoMax && hi > cap))
      fail(str_cat("repetition count above the limit of ", cap));
    if (hi < lo) fail("repetition {n,m} with n > m");
    *min = uint32_t(lo);
    *max = hi == kNoMax ? FsaBuilder::kUnbounded : uint32_t(hi);
    pos_ = p + 1;
    return true;
  }
  static constexpr uint64_t kNoMax = UINT64_MAX;

  int parse_quantified(int depth) {
    int atom = parse_atom(depth);
    if (eof()) return atom;
    uint32_t min, max;
    const char c = peek();
    if (c == '*') {
      min = 0, max = FsaBuilder::kUnbounded, ++pos_;
    } else if (c == '+') {
      min = 1, max = FsaBuilder::kUnbounded, ++pos_;
    } else if (c == '?') {
      min = 0, max = 1, ++pos_;
    } else if (c == '{' && parse_braces(&min, &max)) {
    } else {
      return atom;
    }
    if (!eof() && peek() == '?') ++pos_;  // lazy: same language
    const Node::Kind k = nodes_[atom].kind;
    if (k == Node::kStart || k == Node::kEnd) fail("quantifier on an anchor");
    if (!eof() && (peek() == '*' || peek() == '+' || peek() == '?')) fail("nothing to repeat");
    if (!eof() && peek() == '{') {
      uint32_t a, b;
      const size_t save = pos_;
      if (parse_braces(&a, &b)) {
        pos_ = save;
        fail("nothing to repeat");
      }
    }
    Node n{Node::kRepeat};
    n.children = {atom};
    n.min = min;
    n.max = max;
    return add(std::move(n));
  }

  int parse_atom(int depth) {
    const char c = peek();
    switch (c) {
      case '(': {
        ++pos_;
        if (!eof() && peek() == '?') {
          ++pos_;
          if (eof()) fail("unterminated group");
          const char k = peek();
          if (k == ':') {
            ++pos_;
          } else if (k == '<' || k == 'P') {
            if (k == 'P') ++pos_;
            if (eof() || peek() != '<') fail("unsupported group syntax");
            ++pos_;
            if (!eof() && (peek() == '=' || peek() == '!')) fail("lookbehind is not supported");
            while (!eof() && peek() != '>') ++pos_;
            if (eof()) fail("unterminated group name");
            ++pos_;
          } else if (k == '=' || k == '!') {
            fail("lookahead is not supported");
          } else {
            fail("unsupported group syntax (?" + std::string(1, k) + "...)");
          }
        }
        const int inner = parse_alt(depth + 1);
        if (eof() || peek() != ')') fail("missing ')'");
        ++pos_;
        return inner;
      }
      case '[': return parse_class();
      case '.': {
        ++pos_;
        return add_chars(ecma_line_terminators().complement());
      }
      case '^': ++pos_; return add(Node(Node::kStart));
      case '$': ++pos_; return add(Node(Node::kEnd));
      case '\\': {
        ++pos_;
        CodepointSet s;
        parse_escape(false, &s);
        return add_chars(std::move(s));
      }
      case '*':
      case '+':
      case '?': fail("nothing to repeat");
      case '{': {
        uint32_t a, b;
        const size_t save = pos_;
        if (parse_braces(&a, &b)) {
          pos_ = save;
          fail("nothing to repeat");
        }
        ++pos_;
        return add_chars(CodepointSet::single('{'));
      }
      default: return add_chars(CodepointSet::single(next_codepoint()));
    }
  }

  uint32_t hex_digits(int n) {
    uint32_t v = 0;
    if (const char* error = read_hex_digits(text_, &pos_, n, &v)) fail(str_cat(error, " in escape"));
    return v;
  }

  uint32_t parse_u_escape() {
    if (!eof() && peek() == '{') {
      ++pos_;
      uint32_t v = 0;
      int n = 0;
      while (!eof() && peek() != '}') {
        v = v * 16 + hex_digits(1);
        if (++n > 6 || v > kMaxCodepoint) fail("code point out of range");
      }
      if (eof() || n == 0) fail("bad \\u{...} escape");
      ++pos_;
      return v;
    }
    uint32_t v = hex_digits(4);
    // A surrogate pair written as two escapes is one code point.
    if (v >= 0xD800 && v <= 0xDBFF && pos_ + 6 <= text_.size() && text_[pos_] == '\\' && text_[pos_ + 1] == 'u') {
      const size_t save = pos_;
      pos_ += 2;
      const uint32_t lo = hex_digits(4);
      if (lo >= 0xDC00 && lo <= 0xDFFF) return 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
      pos_ = save;
    }
    return v;
  }

  // After a backslash. Sets *out to the escape's set.
  void parse_escape(bool in_class, CodepointSet* out) {
    if (eof()) fail("pattern ends with a backslash");
    const char c = peek();
    ++pos_;
    switch (c) {
      case 'd': *out = ecma_digit(); return;
      case 'D': *out = ecma_digit().complement(); return;
      case 'w': *out = ecma_word(); return;
      case 'W': *out = ecma_word().complement(); return;
      case 's': *out = ecma_space(); return;
      case 'S': *out = ecma_space().complement(); return;
      case 'n': *out = CodepointSet::single('\n'); return;
      case 'r': *out = CodepointSet::single('\r'); return;
      case 't': *out = CodepointSet::single('\t'); return;
      case 'f': *out = CodepointSet::single('\f'); return;
      case 'v': *out = CodepointSet::single('\v'); return;
      case 'x': *out = CodepointSet::single(hex_digits(2)); return;
      case 'u': *out = CodepointSet::single(parse_u_escape()); return;
      case 'c': {
        if (eof() || !((peek() >= 'a' && peek() <= 'z') || (peek() >= 'A' && peek() <= 'Z')))
          fail("bad \\c escape");
        *out = CodepointSet::single(uint32_t(peek()) % 32);
        ++pos_;
        return;
      }
      case '0':
        if (!eof() && peek() >= '0' && peek() <= '9') fail("octal escapes are not supported");
        *out = CodepointSet::single(0);
        return;
      case 'b':
        if (in_class) {
          *out = CodepointSet::single(0x08);
          return;
        }
        fail("word boundaries (\\b) are not supported");
      case 'B': fail("word boundaries (\\B) are not supported");
      case 'k': fail("backreferences are not supported");
      case 'p':
      case 'P': {
        if (eof() || peek() != '{') fail("\\p needs {Name}");
        const size_t close = text_.find('}', pos_);
        if (close == std::string_view::npos) fail("unterminated \\p{");
        const std::string_view name = text_.substr(pos_ + 1, close - pos_ - 1);
        CodepointSet s;
        if (!unicode_property(name, &s)) fail("unsupported Unicode property '" + std::string(name) + "'");
        pos_ = close + 1;
        *out = c == 'P' ? s.complement() : s;
        return;
      }
      default:
        if (c >= '1' && c <= '9') fail("backreferences are not supported");
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) fail(str_cat("unknown escape \\", c));
        --pos_;
        *out = CodepointSet::single(next_codepoint());
        return;
    }
  }

  int parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (!eof() && peek() == '^') {
      negate = true;
      ++pos_;
    }
    CodepointSet set;
    bool first = true;
    while (true) {
      if (eof()) fail("unterminated character class");
      if (peek() == ']' && !first) break;
      if (peek() == ']' && first) break;  // [] matches nothing, [^] anything
      first = false;
      CodepointSet lo_set;
      bool lo_single = class_atom(&lo_set);
      if (!eof() && peek() == '-' && pos_ + 1 < text_.size() && text_[pos_ + 1] != ']') {
        ++pos_;
        CodepointSet hi_set;
        const bool hi_single = class_atom(&hi_set);
        if (!lo_single || !hi_single) fail("class range with a set escape");
        const uint32_t lo = lo_set.ranges()[0].first, hi = hi_set.ranges()[0].first;
        if (lo > hi) fail("class range out of order");
        set.add(lo, hi);
      } else {
        set.add(lo_set);
      }
    }
    ++pos_;  // ']'
    return add_chars(negate ? set.complement() : set);
  }

  // One class member; returns whether it is a single code point.
  bool class_atom(CodepointSet* out) {
    if (peek() == '\\') {
      ++pos_;
      parse_escape(true, out);
      return out->size() == 1;
    }
    *out = CodepointSet::single(next_codepoint());
    return true;
  }

  std::string_view text_;
  size_t pos_ = 0;
  CompileBudget* budget_;
  std::vector<Node> nodes_;
};

// How the paths through `id` begin (or end) with respect to an anchor: all with it,
// none, or some (which we cannot express and refuse). Looks through sequences, groups
// and alternations at the edge only.
enum class Anchored { kNone, kAll, kSome };

Anchored edge_anchor(const std::vector<Node>& nodes, int id, Node::Kind anchor) {
  const Node& n = nodes[id];
  if (n.kind == anchor) return Anchored::kAll;
  if (n.kind == Node::kSeq && !n.children.empty())
    return edge_anchor(nodes, anchor == Node::kStart ? n.children.front() : n.children.back(), anchor);
  if (n.kind == Node::kAlt) {
    bool any = false, all = true;
    for (int c : n.children) {
      const Anchored a = edge_anchor(nodes, c, anchor);
      if (a == Anchored::kSome) return a;
      any = any || a == Anchored::kAll;
      all = all && a == Anchored::kAll;
    }
    return all ? Anchored::kAll : any ? Anchored::kSome : Anchored::kNone;
  }
  return Anchored::kNone;
}

void strip_anchor(std::vector<Node>& nodes, int id, Node::Kind anchor) {
  Node& n = nodes[id];
  if (n.kind == anchor) {
    n.kind = Node::kEmpty;
  } else if (n.kind == Node::kSeq && !n.children.empty()) {
    strip_anchor(nodes, anchor == Node::kStart ? n.children.front() : n.children.back(), anchor);
  } else if (n.kind == Node::kAlt) {
    const std::vector<int> children = n.children;
    for (int c : children) strip_anchor(nodes, c, anchor);
  }
}

// Whether the branch is anchored at that end; strips the anchors.
bool take_anchor(std::vector<Node>& nodes, int id, Node::Kind anchor) {
  const Anchored a = edge_anchor(nodes, id, anchor);
  if (a == Anchored::kSome)
    throw InputError("regex: an alternation where only some branches are anchored is not supported");
  if (a == Anchored::kAll) strip_anchor(nodes, id, anchor);
  return a == Anchored::kAll;
}

bool contains_anchor(const std::vector<Node>& nodes, int id) {
  const Node& n = nodes[id];
  if (n.kind == Node::kStart || n.kind == Node::kEnd) return true;
  for (int c : n.children)
    if (contains_anchor(nodes, c)) return true;
  return false;
}

class Lowerer {
 public:
  Lowerer(std::vector<Node>& nodes, FsaBuilder& b, CharEncoding enc) : nodes_(nodes), b_(b), enc_(enc) {}
  FsaBuilder::Frag lower(int id) {
    const Node& n = nodes_[id];
    switch (n.kind) {
      case Node::kEmpty: return b_.empty();
      case Node::kChars: return b_.chars(n.chars, enc_);
      case Node::kSeq: {
        std::vector<FsaBuilder::Frag> parts;
        for (int c : n.children) parts.push_back(lower(c));
        return b_.seq(parts);
      }
      case Node::kAlt: {
        std::vector<FsaBuilder::Frag> parts;
        for (int c : n.children) parts.push_back(lower(c));
        return b_.alt(parts);
      }
      case Node::kRepeat: {
        const int child = n.children[0];
        return b_.repeat([&] { return lower(child); }, n.min, n.max);
      }
      case Node::kStart:
      case Node::kEnd: break;
    }
    throw InputError("regex anchors ^ and $ are only supported at the start and end of the pattern");
  }

 private:
  std::vector<Node>& nodes_;
  FsaBuilder& b_;
  CharEncoding enc_;
};

}  // namespace

Fsa regex_to_fsa(std::string_view pattern, const RegexOptions& options, CompileBudget* budget) {
  DI_CHECK_INPUT(pattern.size() <= budget->limits().max_input_bytes, "regex longer than ",
                 budget->limits().max_input_bytes, " bytes");
  RegexParser parser(pattern, budget);
  const int root = parser.parse();
  std::vector<Node>& nodes = parser.nodes();
  // Each top-level alternative is anchored or not at either end on its own.
  std::vector<int> branches = nodes[root].kind == Node::kAlt ? nodes[root].children : std::vector<int>{root};
  FsaBuilder b(budget, budget->limits().max_rule_states);
  Lowerer lowerer(nodes, b, options.encoding);
  std::vector<FsaBuilder::Frag> alts;
  for (int br : branches) {
    const bool start = take_anchor(nodes, br, Node::kStart);
    const bool end = take_anchor(nodes, br, Node::kEnd);
    if (contains_anchor(nodes, br))
      throw InputError("regex anchors ^ and $ are only supported at the start and end of the pattern");
    FsaBuilder::Frag f = lowerer.lower(br);
    if (options.search) {
      const CodepointSet any = CodepointSet::all_scalars();
      if (!start) f = b.seq(b.star(b.chars(any, options.encoding)), f);
      if (!end) f = b.seq(f, b.star(b.chars(any, options.encoding)));
    }
    alts.push_back(f);
  }
  return optimize_fsa(b.finish(b.alt(alts)), budget->limits().max_rule_states, budget);
}

}  // namespace deepinfer::structured
