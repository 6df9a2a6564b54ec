// Typed, range-checked access to the fields of a JSON request object. Each getter
// returns nullopt for an absent or null field (OpenAI clients send null for
// "unset") and throws a 400 ApiError naming the field for a wrong type or range.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "server/api_error.h"

namespace deepinfer::server {

using Json = nlohmann::json;

// Parses a request body: 400 on malformed JSON, nesting deeper than kMaxJsonDepth
// (checked before parsing so that hostile input cannot exhaust the stack later,
// when the value is walked or dumped) or a top level that is not an object.
constexpr int kMaxJsonDepth = 64;
Json parse_json_object(std::string_view body);

// Serialises a response value; invalid UTF-8 (a lone byte of a multi-byte token)
// becomes U+FFFD instead of throwing.
std::string dump_json(const Json& value);
// At most ~60 characters of a value's JSON, for quoting user input in error messages.
std::string brief_json(const Json& value);

class JsonFields {
 public:
  // prefix names the enclosing field in messages ("stream_options." etc.).
  explicit JsonFields(const Json& object, std::string prefix = "");

  // The field's value, or nullptr when absent or null.
  const Json* get(std::string_view name) const;
  bool has(std::string_view name) const { return get(name) != nullptr; }

  std::optional<double> number(std::string_view name, double lo, double hi) const;
  std::optional<int64_t> integer(std::string_view name, int64_t lo, int64_t hi) const;
  std::optional<bool> boolean(std::string_view name) const;
  // max_bytes bounds the string's size.
  std::optional<std::string> string(std::string_view name, size_t max_bytes = SIZE_MAX) const;
  // Throws unless the field is an object / array (when present).
  const Json* object(std::string_view name) const;
  const Json* array(std::string_view name) const;

  std::string param(std::string_view name) const { return prefix_ + std::string(name); }
  ApiError error(std::string_view name, const std::string& what) const;

 private:
  const Json& object_;
  std::string prefix_;
};

// "integer", "string", ... for messages.
const char* json_type_name(const Json& value);

}  // namespace deepinfer::server
