#include "tokenizer/onig_regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cstdio>
#include <cstring>

#include "common/check.h"
#include "tokenizer/onig_tables.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

namespace {

using unicode_tables::CodePointRange;

void append_code_point(uint32_t cp, std::string* out) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "\\x{%X}", cp);
  *out += buf;
}

void append_ranges(const CodePointRange* ranges, size_t n, std::string* out) {
  for (size_t i = 0; i < n; ++i) {
    if (ranges[i].first == 0 && ranges[i].last == 0 && n == 1) return;  // the empty table's filler
    append_code_point(ranges[i].first, out);
    if (ranges[i].last != ranges[i].first) {
      out->push_back('-');
      append_code_point(ranges[i].last, out);
    }
  }
}

const onig_tables::CategoryExtra* category_extra(const std::string& name) {
  for (size_t i = 0; i < onig_tables::kCategoryExtrasSize; ++i) {
    if (name == onig_tables::kCategoryExtras[i].name) return &onig_tables::kCategoryExtras[i];
  }
  return nullptr;
}

// The members of a general category as items of a bracket: PCRE2's own plus the code
// points assigned after its Unicode version.
std::string category_items(const std::string& name, const onig_tables::CategoryExtra& extra) {
  std::string items = "\\p{" + name + "}";
  append_ranges(extra.ranges, extra.size, &items);
  return items;
}

bool is_hex(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

size_t utf8_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

class Translator {
 public:
  explicit Translator(const std::string& pattern) : p_(pattern) {}

  std::string run() {
    std::u32string unused;
    DI_CHECK_INPUT(decode_utf8(p_, &unused), "regex is not valid UTF-8");
    while (i_ < p_.size()) {
      const char c = p_[i_];
      if (c == '\\') {
        escape();
      } else if (in_class_) {
        bracket_char();
      } else if (c == '[') {
        open_bracket();
      } else if (c == '(' && peek(1) == '?') {
        option_group();
      } else if (c == '{' && peek(1) == ',') {
        out_ += "{0";  // Ruby's {,n} is {0,n}; PCRE2 10.42 reads it as literal text
        ++i_;
      } else {
        copy_char();
      }
    }
    DI_CHECK_INPUT(!in_class_, "regex ", quoted(), ": unterminated bracket");
    return out_;
  }

 private:
  char peek(size_t k) const { return i_ + k < p_.size() ? p_[i_ + k] : '\0'; }
  std::string quoted() const { return "'" + p_ + "'"; }

  void copy_char() {
    const size_t n = utf8_length(static_cast<unsigned char>(p_[i_]));
    out_.append(p_, i_, n);
    i_ += n;
  }

  void open_bracket() {
    in_class_ = true;
    out_.push_back('[');
    ++i_;
    if (peek(0) == '^') {
      out_.push_back('^');
      ++i_;
    }
    if (peek(0) == ']') {  // a leading ']' is a literal in both dialects
      out_ += "\\]";
      ++i_;
    }
  }

  void bracket_char() {
    const char c = p_[i_];
    if (c == ']') {
      in_class_ = false;
      out_.push_back(']');
      ++i_;
    } else if (c == '[') {
      DI_CHECK_INPUT(peek(1) == ':', "regex ", quoted(), ": nested brackets are not supported");
      const size_t end = p_.find(":]", i_ + 2);
      DI_CHECK_INPUT(end != std::string::npos, "regex ", quoted(), ": unterminated POSIX bracket");
      out_.append(p_, i_, end + 2 - i_);
      i_ = end + 2;
    } else if (c == '&' && peek(1) == '&') {
      DI_CHECK_INPUT(false, "regex ", quoted(), ": bracket intersection (&&) is not supported");
    } else {
      copy_char();
    }
  }

  // (?imx-imx) and (?imx-imx:...): Ruby's m is PCRE2's s.
  void option_group() {
    size_t k = i_ + 2;
    while (k < p_.size() && std::strchr("imx-", p_[k]) != nullptr) ++k;
    if (k == i_ + 2 || k >= p_.size() || (p_[k] != ':' && p_[k] != ')')) {
      out_ += "(?";
      i_ += 2;
      return;
    }
    out_ += "(?";
    for (size_t j = i_ + 2; j < k; ++j) out_.push_back(p_[j] == 'm' ? 's' : p_[j]);
    i_ = k;
  }

  // A set given as full ranges: [..] or [^..] outside a bracket, its items inside one.
  void set(const CodePointRange* ranges, size_t n, bool negate, const char* pcre_inside_negated) {
    if (in_class_) {
      if (negate) {
        out_ += pcre_inside_negated;
      } else {
        append_ranges(ranges, n, &out_);
      }
      return;
    }
    out_ += negate ? "[^" : "[";
    append_ranges(ranges, n, &out_);
    out_ += "]";
  }

  void category(const std::string& name, bool negate, const std::string& original) {
    const onig_tables::CategoryExtra* extra = category_extra(name);
    if (extra == nullptr || (in_class_ && negate)) {
      out_ += original;  // PCRE2's own meaning (header: not reproduced)
      return;
    }
    const std::string items = category_items(name, *extra);
    if (in_class_) {
      out_ += items;
    } else {
      out_ += (negate ? "[^" : "[") + items + "]";
    }
  }

  void escape() {
    DI_CHECK_INPUT(i_ + 1 < p_.size(), "regex ", quoted(), ": trailing backslash");
    const char c = p_[i_ + 1];
    static const CodePointRange kHex[] = {{'0', '9'}, {'A', 'F'}, {'a', 'f'}};
    switch (c) {
      case 'p':
      case 'P': {
        DI_CHECK_INPUT(peek(2) == '{', "regex ", quoted(), ": \\", c, " needs {name}");
        const size_t end = p_.find('}', i_ + 3);
        DI_CHECK_INPUT(end != std::string::npos, "regex ", quoted(), ": unterminated \\", c, "{");
        std::string name = p_.substr(i_ + 3, end - i_ - 3);
        bool negate = c == 'P';
        if (!name.empty() && name[0] == '^') {
          negate = !negate;
          name.erase(0, 1);
        }
        const std::string original = p_.substr(i_, end + 1 - i_);
        i_ = end + 1;
        category(name, negate, original);
        return;
      }
      case 's':
      case 'S':
        i_ += 2;
        return set(onig_tables::kSpace, onig_tables::kSpaceSize, c == 'S', "\\S");
      case 'w':
      case 'W':
        i_ += 2;
        return set(onig_tables::kWord, onig_tables::kWordSize, c == 'W', "\\W");
      case 'd':
      case 'D':
        i_ += 2;
        return category("Nd", c == 'D', c == 'd' ? "\\d" : "\\D");
      case 'h':
      case 'H':
        DI_CHECK_INPUT(!(in_class_ && c == 'H'), "regex ", quoted(), ": \\H inside a bracket is not supported");
        i_ += 2;
        return set(kHex, 3, c == 'H', "");
      case 'v':
        i_ += 2;
        out_ += "\\x0B";
        return;
      case 'u':
        if (is_hex(peek(2)) && is_hex(peek(3)) && is_hex(peek(4)) && is_hex(peek(5))) {
          out_ += "\\x{" + p_.substr(i_ + 2, 4) + "}";
          i_ += 6;
          return;
        }
        break;
      default:
        break;
    }
    out_.push_back('\\');
    ++i_;
    copy_char();
  }

  const std::string& p_;
  size_t i_ = 0;
  bool in_class_ = false;
  std::string out_;
};

std::string quote_literal(std::string_view text) {
  std::string out = "\\Q";
  size_t start = 0;
  while (true) {
    const size_t e = text.find("\\E", start);
    if (e == std::string_view::npos) break;
    out.append(text.substr(start, e - start));
    out += "\\E\\\\E\\Q";  // \E cannot appear inside \Q..\E
    start = e + 2;
  }
  out.append(text.substr(start));
  return out + "\\E";
}

// Per-thread PCRE2 state: match data for the whole-match offsets, a match context with
// the resource limits, and a JIT stack larger than PCRE2's 32 KiB default.
struct MatchState {
  pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
  pcre2_match_context* context = pcre2_match_context_create(nullptr);
  pcre2_jit_stack* stack = pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr);
  MatchState() {
    DI_CHECK(data != nullptr && context != nullptr, "PCRE2 allocation failed");
    pcre2_set_match_limit(context, 50'000'000);
    pcre2_set_depth_limit(context, 1'000'000);
    pcre2_set_heap_limit(context, 256 * 1024);  // KiB
    if (stack != nullptr) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchState() {
    pcre2_jit_stack_free(stack);
    pcre2_match_context_free(context);
    pcre2_match_data_free(data);
  }
};

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  pcre2_get_error_message(code, buf, sizeof(buf));
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

struct OnigRegex::Code {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Code() { pcre2_code_free(code); }
};

std::string onig_to_pcre2(const std::string& pattern) { return Translator(pattern).run(); }

OnigRegex::OnigRegex(const std::string& pattern) { compile(onig_to_pcre2(pattern), pattern); }

OnigRegex OnigRegex::literal(std::string_view text) {
  OnigRegex r;
  r.compile(quote_literal(text), std::string(text));
  return r;
}

void OnigRegex::compile(const std::string& pcre_pattern, const std::string& label) {
  translated_ = pcre_pattern;
  pcre2_compile_context* cc = pcre2_compile_context_create(nullptr);
  DI_CHECK(cc != nullptr, "PCRE2 allocation failed");
  pcre2_set_newline(cc, PCRE2_NEWLINE_LF);
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre_pattern.data()), pcre_pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, cc);
  pcre2_compile_context_free(cc);
  DI_CHECK_INPUT(code != nullptr, "regex '", label, "' does not compile: ", pcre2_message(error));
  auto c = std::make_shared<Code>();
  c->code = code;
  c->jit = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  code_ = std::move(c);
}

void OnigRegex::find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>* out) const {
  thread_local MatchState state;
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last_end = 0;
  bool have_last = false;
  size_t last_match_end = 0;
  while (last_end <= text.size()) {
    const int rc = code_->jit
                       ? pcre2_jit_match(code_->code, subject, text.size(), last_end, 0, state.data, state.context)
                       : pcre2_match(code_->code, subject, text.size(), last_end, PCRE2_NO_UTF_CHECK, state.data,
                                     state.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    DI_CHECK_INPUT(rc >= 0, "regex matching failed: ", pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(state.data);
    const size_t s = ov[0], e = ov[1];
    if (s == e && have_last && last_match_end == e) {
      last_end += last_end < text.size() ? utf8_length(static_cast<unsigned char>(text[last_end])) : 1;
      continue;
    }
    last_end = e;
    have_last = true;
    last_match_end = e;
    out->emplace_back(s, e);
  }
}

}  // namespace deepinfer
