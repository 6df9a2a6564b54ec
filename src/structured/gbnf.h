// GBNF grammars in llama.cpp's syntax.
//
//   root   ::= object
//   object ::= "{" ws ( pair ( "," ws pair )* )? "}"   # comments run to end of line
//   pair   ::= [a-z]+ ws ":" ws value
//   ws     ::= [ \t\n]*
//
// Rule names are [A-Za-z0-9_-]+; `root` is the start. Elements: "literals", [classes]
// ([^...] negated, ranges a-z), `.` (any character), rule names, ( groups ), and the
// postfix operators * + ? {m} {m,} {m,n}. Escapes in literals and classes: \xHH \uHHHH
// \UHHHHHHHH \t \r \n \\ \" \[ \] \-. Characters are Unicode code points matched as
// UTF-8. As in llama.cpp, an alternative ends at a newline unless it is inside
// parentheses or the line ends with '|'. Any rule structure is accepted, left recursion
// included. Token references (<[id]>, <token>) are refused.
#pragma once

#include <string_view>

#include "structured/grammar.h"
#include "structured/limits.h"

namespace deepinfer::structured {

// InputError with the line and column on any syntax error, undefined or duplicate rule.
Grammar parse_gbnf(std::string_view text, CompileBudget* budget);

}  // namespace deepinfer::structured
