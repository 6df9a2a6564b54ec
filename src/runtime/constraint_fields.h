// The request fields that ask for structured outputs, shared by `deepinfer generate
// --input` lines and the server's /v1/completions and /v1/chat/completions bodies.
//
// Accepted (at most one constraint per request; two are an error):
//   response_format: {"type": "text"}                       no constraint
//                    {"type": "json_object"}                any JSON object
//                    {"type": "json_schema", "json_schema": {"name", "description",
//                     "schema": {...}, "strict": bool}}    the schema (always enforced
//                                                           exactly; strict changes nothing)
//   structured_outputs (vLLM): {"json": schema | "schema text", "regex": "...",
//                     "grammar": "GBNF", "choice": ["a", "b"], "json_object": true,
//                     "disable_any_whitespace": bool}
//   guided_json, guided_regex, guided_grammar, guided_choice (older vLLM names)
// DeepInfer extension: "complete_within_max_tokens": bool, in structured_outputs or in
// response_format (either place; both must agree), applies to the request's constraint
// (StructuredConstraint::complete_within_max_tokens); absent: the engine's default. Given
// without a constraint, or not a boolean, it is an error.
// JSON constraints write compact JSON; structured_outputs.disable_any_whitespace: false
// allows runs of at most kFlexibleWhitespace whitespace characters instead.
// A schema given as an object is re-serialised (key order may change, which the JSON
// Schema compiler does not depend on); a string is compiled as given.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "deepinfer/engine.h"

namespace deepinfer::constraints {

constexpr int64_t kFlexibleWhitespace = 20;

// An InputError that names the request field at fault (e.g. "response_format.json_schema").
class FieldError : public InputError {
 public:
  FieldError(std::string param, const std::string& message)
      : InputError(str_cat("'", param, "' ", message)), param_(std::move(param)) {}
  const std::string& param() const { return param_; }

 private:
  std::string param_;
};

struct RequestConstraint {
  StructuredConstraint constraint;
  std::string param;  // the field it came from, for error messages
};

// The constraint a request body asks for, or nullopt. Throws FieldError for malformed
// fields (wrong types, unknown response_format type, unsupported options, two
// constraints at once). Does not compile the constraint.
std::optional<RequestConstraint> constraint_from_request(const nlohmann::json& body);

}  // namespace deepinfer::constraints
