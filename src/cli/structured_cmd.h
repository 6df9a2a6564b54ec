// `deepinfer structured ...`: the structured-output tools.
//
//   deepinfer structured check --jsonl FILE [--out FILE] [--whitespace flexible|compact]
//                              [--max-whitespace N] [--assert-format true|false]
//
// Each input line is a JSON object with exactly one of "schema" (a JSON Schema),
// "regex" (a string) or "ebnf" (GBNF text), plus "instance_text" (a string). Each output
// line is {"compiled": bool, "accepted": bool, "error": string-or-null}: whether the
// constraint compiled, whether the instance's bytes are a complete match of it, and the
// one-line reason when it did not compile or the line was malformed. FILE "-" is stdin.
#pragma once

namespace deepinfer::cli {

// argv[1] == "structured"; returns the process exit status (2 on usage errors).
int cmd_structured(int argc, char** argv);

}  // namespace deepinfer::cli
