// The per-line logic of `deepinfer structured check` (src/cli/structured_cmd.h).
#pragma once

#include <string>
#include <string_view>

#include "structured/json_schema.h"

namespace deepinfer::structured {

// `line` is a JSON object with exactly one of "schema", "regex" or "ebnf" and a string
// "instance_text". Returns the compact JSON text {"compiled": bool, "accepted": bool,
// "error": string-or-null}. Never throws for bad input: malformed lines and constraints
// that do not compile are reported in "error" (compiled and accepted false).
std::string check_jsonl_line(std::string_view line, const JsonSchemaOptions& options);

}  // namespace deepinfer::structured
