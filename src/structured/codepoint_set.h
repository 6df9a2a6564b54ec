// Sets of Unicode code points as sorted, disjoint, non-adjacent ranges.
//
// Every front end (regex classes, GBNF classes, JSON string characters) speaks in code
// point sets; the automaton builder lowers them to bytes (UTF-8 or JSON escapes). The
// named sets follow ECMAScript with the `u` flag, the dialect JSON Schema's `pattern` uses:
// \d and \w are ASCII, \s is Unicode white space, \p{..} are general categories.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

namespace deepinfer::structured {

inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;
inline constexpr uint32_t kSurrogateLo = 0xD800;
inline constexpr uint32_t kSurrogateHi = 0xDFFF;

class CodepointSet {
 public:
  using Range = std::pair<uint32_t, uint32_t>;  // inclusive

  CodepointSet() = default;
  static CodepointSet single(uint32_t cp) { return range(cp, cp); }
  static CodepointSet range(uint32_t lo, uint32_t hi);
  // Every scalar value: 0..0x10FFFF without the surrogates (they have no UTF-8 form).
  static CodepointSet all_scalars();

  void add(uint32_t lo, uint32_t hi);
  void add(uint32_t cp) { add(cp, cp); }
  void add(const CodepointSet& other);

  CodepointSet complement() const;  // within all_scalars()
  CodepointSet intersect(const CodepointSet& other) const;
  CodepointSet subtract(const CodepointSet& other) const;

  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  uint64_t size() const;
  const std::vector<Range>& ranges() const { return ranges_; }
  bool operator==(const CodepointSet& o) const { return ranges_ == o.ranges_; }

 private:
  std::vector<Range> ranges_;
};

// \d, \w, \s (ECMAScript; \s includes the Unicode Zs characters and U+FEFF).
CodepointSet ecma_digit();
CodepointSet ecma_word();
CodepointSet ecma_space();
// Characters `.` excludes in ECMAScript: \n, \r, U+2028, U+2029.
CodepointSet ecma_line_terminators();

// The set for a \p{...} name: a general category ("L", "Lu", "Letter",
// "Uppercase_Letter", "General_Category=Lu", "gc=L") or "Any"/"ASCII".
// Returns false for names we do not know (scripts, binary properties).
bool unicode_property(std::string_view name, CodepointSet* out);

// Reads `n` hex digits of an escape (\xHH, \uHHHH, ...) at text[*pos], for the regex and
// GBNF lexers. Returns nullptr with the value in *value and *pos past the digits, or
// what is wrong ("truncated escape", "bad hex digit") with *pos at the offending byte.
const char* read_hex_digits(std::string_view text, size_t* pos, int n, uint32_t* value);

}  // namespace deepinfer::structured
