// The line protocol of `deepinfer tokenize` (src/cli/tokenize_cmd.h), kept in the core
// library so it can be tested without the executable.
//
// Encoding: each input line {"text": "..."} gives {"ids": [...]} (special-token strings
// recognised, no BOS added). Decoding: {"ids": [...]} gives {"text": "..."} (special
// tokens kept). Blank lines are skipped. A bad line (not a JSON object, missing or
// mistyped field, id out of range) gives {"error": "line N: reason"} in its place, so the
// output stays aligned with the input, and the same one-line message on `err`;
// processing continues with the next line.
#pragma once

#include <istream>
#include <ostream>

namespace deepinfer {

class Tokenizer;

// Returns the number of bad lines.
int tokenize_jsonl(const Tokenizer& tokenizer, bool decode, std::istream& in, std::ostream& out, std::ostream& err);

}  // namespace deepinfer
