// Thompson-style construction of one automaton from fragments.
//
// A fragment has one entry and one exit state joined to the rest by epsilon edges, so
// fragments compose like regular expressions. Code point sets are lowered here, either
// to UTF-8 (regexes, GBNF) or to the characters of a JSON string literal (the escape
// policy is documented at CharEncoding::kJsonString).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>

#include "structured/codepoint_set.h"
#include "structured/fsa.h"

namespace deepinfer::structured {

class CompileBudget;

enum class CharEncoding {
  kUtf8,
  // One character inside a JSON string literal, as our JSON grammars accept it:
  //  * printable ASCII other than '"' and '\' appears raw only (never as \u escape),
  //    so object keys and enum strings stay forced;
  //  * '"' and '\' as \" \\ or \u0022 \u005c; '/' raw or \/;
  //  * control characters U+0000-U+001F as a short escape (\b \f \n \r \t) or \u00XX;
  //  * U+007F and everything above raw UTF-8 or \uXXXX (surrogate pairs for U+10000+),
  //    which covers Python's ensure_ascii output. Hex digits in either case.
  // Lone surrogates are not characters and are rejected.
  kJsonString,
};

class FsaBuilder {
 public:
  struct Frag {
    uint32_t in, out;
  };

  explicit FsaBuilder(CompileBudget* budget, size_t max_states);

  Frag empty();
  Frag nothing();  // matches no string at all
  Frag byte_range(uint8_t lo, uint8_t hi);
  Frag byte_set(const ByteSet& set);
  Frag literal(std::string_view bytes);
  Frag chars(const CodepointSet& set, CharEncoding enc);
  // One code point, with every encoding `enc` allows.
  Frag codepoint(uint32_t cp, CharEncoding enc) { return chars(CodepointSet::single(cp), enc); }
  // A string of code points (UTF-8 input) with every encoding `enc` allows.
  Frag text(std::string_view utf8, CharEncoding enc);
  Frag rule(uint32_t rule_id);
  // Copies an automaton (epsilon edges allowed) in as a fragment.
  Frag embed(const Fsa& fsa);

  Frag seq(Frag a, Frag b);
  Frag seq(std::span<const Frag> parts);
  Frag alt(std::span<const Frag> parts);
  Frag alt(Frag a, Frag b);
  Frag opt(Frag a);
  Frag star(Frag a);
  Frag plus(Frag a);
  // make() builds a fresh copy of the repeated fragment each time it is called.
  // max == kUnbounded means no upper bound.
  static constexpr uint32_t kUnbounded = UINT32_MAX;
  Frag repeat(const std::function<Frag()>& make, uint32_t min, uint32_t max);

  // Hex digits (either case) spelling a value in [lo, hi], exactly `width` digits.
  Frag hex_range(uint32_t lo, uint32_t hi, int width);

  size_t num_states() const { return fsa_.states.size(); }
  // The automaton with `f.in` as start and `f.out` as the only final state.
  Fsa finish(Frag f);

 private:
  uint32_t new_state();
  void eps(uint32_t from, uint32_t to);
  Frag utf8_chars(const CodepointSet& set);
  Frag json_chars(const CodepointSet& set);

  Fsa fsa_;
  CompileBudget* budget_;
  size_t max_states_;
};

// Runs remove_epsilon, determinize (when it stays under max_states), minimize and trim:
// the canonical small form of a byte-only automaton.
Fsa optimize_fsa(const Fsa& fsa, size_t max_states, CompileBudget* budget);

// Decodes one UTF-8 code point at text[*pos]; returns false on malformed input.
bool decode_utf8(std::string_view text, size_t* pos, uint32_t* cp);
void append_utf8(uint32_t cp, std::string* out);

}  // namespace deepinfer::structured
