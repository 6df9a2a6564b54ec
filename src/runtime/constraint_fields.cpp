#include "runtime/constraint_fields.h"

#include <vector>

namespace deepinfer::constraints {
namespace {

using Json = nlohmann::json;
using Kind = StructuredConstraint::Kind;

const Json* field(const Json& obj, const char* name) {
  auto it = obj.find(name);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// A schema as an object (or a boolean schema), or as JSON text kept verbatim.
std::string schema_text(const Json& v, const std::string& param) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() || v.is_boolean()) return v.dump();
  throw FieldError(param, "must be a JSON Schema (an object, or its JSON text)");
}

std::string text(const Json& v, const std::string& param) {
  if (!v.is_string()) throw FieldError(param, "must be a string");
  return v.get<std::string>();
}

std::vector<std::string> choices(const Json& v, const std::string& param) {
  if (!v.is_array()) throw FieldError(param, "must be an array of strings");
  std::vector<std::string> out;
  for (const Json& c : v) {
    if (!c.is_string()) throw FieldError(param, "must be an array of strings");
    out.push_back(c.get<std::string>());
  }
  return out;
}

RequestConstraint from_response_format(const Json& rf, bool* none, std::optional<bool>* complete) {
  const std::string p = "response_format";
  if (!rf.is_object()) throw FieldError(p, "must be an object");
  if (const Json* c = field(rf, "complete_within_max_tokens")) {
    if (!c->is_boolean()) throw FieldError(p + ".complete_within_max_tokens", "must be a boolean");
    *complete = c->get<bool>();
  }
  const Json* type = field(rf, "type");
  if (!type || !type->is_string()) throw FieldError(p + ".type", "is required (\"text\", \"json_object\" or \"json_schema\")");
  const std::string t = type->get<std::string>();
  RequestConstraint rc;
  rc.param = p;
  if (t == "text") {
    *none = true;
  } else if (t == "json_object") {
    rc.constraint.kind = Kind::kJsonObject;
  } else if (t == "json_schema") {
    const Json* js = field(rf, "json_schema");
    if (!js || !js->is_object()) throw FieldError(p + ".json_schema", "is required with type \"json_schema\" and must be an object");
    for (const auto& [k, v] : js->items())
      if (k != "name" && k != "description" && k != "schema" && k != "strict")
        throw FieldError(p + ".json_schema." + k, "is not a recognised field");
    if (const Json* name = field(*js, "name"); name && !name->is_string())
      throw FieldError(p + ".json_schema.name", "must be a string");
    if (const Json* strict = field(*js, "strict"); strict && !strict->is_boolean())
      throw FieldError(p + ".json_schema.strict", "must be a boolean");
    const Json* schema = field(*js, "schema");
    if (!schema) throw FieldError(p + ".json_schema.schema", "is required");
    rc.param = p + ".json_schema.schema";
    rc.constraint.kind = Kind::kJsonSchema;
    rc.constraint.spec = schema_text(*schema, rc.param);
  } else {
    throw FieldError(p + ".type", str_cat("'", t, "' is not supported (use \"text\", \"json_object\" or \"json_schema\")"));
  }
  return rc;
}

}  // namespace

std::optional<RequestConstraint> constraint_from_request(const Json& body) {
  if (!body.is_object()) return std::nullopt;
  std::vector<RequestConstraint> found;
  auto add = [&](std::string param, Kind kind, std::string spec, std::vector<std::string> ch = {}) {
    RequestConstraint rc;
    rc.param = std::move(param);
    rc.constraint.kind = kind;
    rc.constraint.spec = std::move(spec);
    rc.constraint.choices = std::move(ch);
    found.push_back(std::move(rc));
  };

  // complete_within_max_tokens, from response_format and from structured_outputs.
  std::optional<bool> complete_rf, complete_so;
  if (const Json* rf = field(body, "response_format")) {
    bool none = false;
    RequestConstraint rc = from_response_format(*rf, &none, &complete_rf);
    if (!none) found.push_back(std::move(rc));
  }
  int64_t whitespace = 0;
  if (const Json* so = field(body, "structured_outputs")) {
    const std::string p = "structured_outputs";
    if (!so->is_object()) throw FieldError(p, "must be an object");
    for (const auto& [k, v] : so->items()) {
      if (v.is_null()) continue;
      const std::string pk = p + "." + k;
      if (k == "json") add(pk, Kind::kJsonSchema, schema_text(v, pk));
      else if (k == "regex") add(pk, Kind::kRegex, text(v, pk));
      else if (k == "grammar") add(pk, Kind::kGrammar, text(v, pk));
      else if (k == "choice") add(pk, Kind::kChoice, "", choices(v, pk));
      else if (k == "json_object") {
        if (!v.is_boolean()) throw FieldError(pk, "must be a boolean");
        if (v.get<bool>()) add(pk, Kind::kJsonObject, "");
      } else if (k == "disable_any_whitespace") {
        if (!v.is_boolean()) throw FieldError(pk, "must be a boolean");
        whitespace = v.get<bool>() ? 0 : kFlexibleWhitespace;
      } else if (k == "complete_within_max_tokens") {
        if (!v.is_boolean()) throw FieldError(pk, "must be a boolean");
        complete_so = v.get<bool>();
      } else if (k == "disable_fallback") {
        if (!v.is_boolean()) throw FieldError(pk, "must be a boolean");  // there is no fallback backend
      } else {
        throw FieldError(pk, "is not supported (supported: json, regex, grammar, choice, json_object, "
                             "disable_any_whitespace, complete_within_max_tokens)");
      }
    }
  }
  if (const Json* v = field(body, "guided_json")) add("guided_json", Kind::kJsonSchema, schema_text(*v, "guided_json"));
  if (const Json* v = field(body, "guided_regex")) add("guided_regex", Kind::kRegex, text(*v, "guided_regex"));
  if (const Json* v = field(body, "guided_grammar")) add("guided_grammar", Kind::kGrammar, text(*v, "guided_grammar"));
  if (const Json* v = field(body, "guided_choice")) add("guided_choice", Kind::kChoice, "", choices(*v, "guided_choice"));

  if (found.empty()) {
    if (complete_rf || complete_so)
      throw FieldError(complete_so ? "structured_outputs.complete_within_max_tokens"
                                   : "response_format.complete_within_max_tokens",
                       "needs a structured-output constraint (json, json_schema, regex, grammar or choice)");
    return std::nullopt;
  }
  if (complete_rf && complete_so && *complete_rf != *complete_so)
    throw FieldError("structured_outputs.complete_within_max_tokens",
                     "contradicts 'response_format.complete_within_max_tokens'");
  if (found.size() > 1)
    throw FieldError(found[1].param, str_cat("cannot be combined with '", found[0].param,
                                             "': give at most one structured-output constraint"));
  RequestConstraint rc = std::move(found[0]);
  if (rc.constraint.kind == Kind::kJsonSchema || rc.constraint.kind == Kind::kJsonObject)
    rc.constraint.max_whitespace = whitespace;
  rc.constraint.complete_within_max_tokens = complete_so ? complete_so : complete_rf;
  return rc;
}

}  // namespace deepinfer::constraints
