// JSON text exactly as Python's json.dumps(value, ensure_ascii=False) writes it (the
// form DeepSeek's encoding.py puts into prompts): ", " and ": " separators, keys in
// their original order, non-ASCII characters unescaped, floats as Python's repr.
// Integers beyond 64 bits, which Python keeps exact, arrive here as doubles.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace deepinfer {

std::string py_json_dumps(const nlohmann::ordered_json& value);
// Just the quoted, escaped string.
std::string py_json_string(const std::string& utf8);

}  // namespace deepinfer
