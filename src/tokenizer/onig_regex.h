// The regexes of tokenizer.json (Split patterns, the ByteLevel word regex) are written for
// Oniguruma's Ruby syntax, which tokenizers compiles them with. We run them with PCRE2
// (UTF, UCP, JIT when available) after translating the constructs whose meaning differs:
//   * \s \S \w \W \d \D \h \H and \p{Category}: Oniguruma's Unicode sets (onig_tables.h);
//     \h is a hex digit in Ruby syntax, not horizontal space;
//   * \v is the vertical tab character, \uHHHH a code point, {,n} means {0,n};
//   * ^ and $ are always line anchors (newline = LF only), and the inline option (?m)
//     is Ruby's dot-matches-newline, PCRE2's (?s).
// Not reproduced (PCRE2 keeps its own meaning; none occurs in released tokenizers):
// negated sets inside a bracket ([\S], [\P{L}]), \b's notion of a word character, and
// \p{..} for anything but a general category. Nested brackets and && are refused.
//
// Thread-safe: matching uses per-thread PCRE2 match data.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer {

class OnigRegex {
 public:
  // InputError when the pattern is malformed or uses what we refuse (see above).
  explicit OnigRegex(const std::string& pattern);
  // A pattern that matches `text` literally (tokenizers' Split with a String pattern).
  static OnigRegex literal(std::string_view text);

  // The matches in `text` (valid UTF-8) as the onig crate's find_iter reports them:
  // left to right, non-overlapping; an empty match is skipped when it ends where the
  // previous match ended. InputError if matching exceeds PCRE2's resource limits.
  void find_all(std::string_view text, std::vector<std::pair<size_t, size_t>>* out) const;

  // The PCRE2 pattern the Oniguruma one was translated to (tests).
  const std::string& translated() const { return translated_; }

 private:
  struct Code;
  OnigRegex() = default;
  void compile(const std::string& pcre_pattern, const std::string& label);

  std::shared_ptr<const Code> code_;
  std::string translated_;
};

// The translation alone; InputError as the constructor.
std::string onig_to_pcre2(const std::string& pattern);

}  // namespace deepinfer
