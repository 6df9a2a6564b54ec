// Regular expressions in the dialect JSON Schema's `pattern` uses (ECMA-262 with the
// `u` flag), compiled to byte automata.
//
// Supported: literals and escapes (\n \t \r \f \v \0 \xHH \uHHHH \u{H..} \cX, escaped
// punctuation), `.`, classes [a-z] [^...] with \d \w \s \D \W \S inside and out,
// Unicode properties \p{L} \p{Lu} \P{N} \p{Letter} \p{General_Category=Lu}, groups
// (...) (?:...) (?<name>...), alternation, quantifiers * + ? {n} {n,} {n,m} (lazy forms
// accepted; they do not change which strings match), anchors ^ and $ at the start and
// end of top-level alternatives.
// Refused with an InputError naming the construct: backreferences, lookaround, word
// boundaries, anchors elsewhere, script properties, unknown escapes.
#pragma once

#include <string_view>

#include "structured/fsa.h"
#include "structured/fsa_builder.h"
#include "structured/limits.h"

namespace deepinfer::structured {

struct RegexOptions {
  // false: the whole input must match (a regex constraint). true: JSON Schema `pattern`
  // semantics, a match anywhere unless anchored with ^ / $.
  bool search = false;
  // How each matched character is spelled: UTF-8, or inside a JSON string literal.
  CharEncoding encoding = CharEncoding::kUtf8;
};

// An epsilon-free automaton (deterministic when that stays small) without rule edges.
Fsa regex_to_fsa(std::string_view pattern, const RegexOptions& options, CompileBudget* budget);

}  // namespace deepinfer::structured
