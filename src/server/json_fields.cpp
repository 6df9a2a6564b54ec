#include "server/json_fields.h"

#include <cmath>

#include "common/check.h"

namespace deepinfer::server {

namespace {

// Bracket depth of a JSON text, ignoring brackets inside strings. The text is not
// validated here; the parser does that afterwards.
int json_depth(std::string_view text) {
  int depth = 0, max_depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > kMaxJsonDepth) return max_depth;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

Json parse_json_object(std::string_view body) {
  if (json_depth(body) > kMaxJsonDepth)
    throw bad_request(str_cat("request body nests JSON deeper than ", kMaxJsonDepth, " levels"));
  Json value = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    // Re-parse for the message only; the first pass keeps the common path exception-free.
    try {
      [[maybe_unused]] Json again = Json::parse(body.begin(), body.end());
    } catch (const Json::exception& e) {
      throw bad_request(str_cat("request body is not valid JSON: ", e.what()));
    }
    throw bad_request("request body is not valid JSON");
  }
  if (!value.is_object()) throw bad_request(str_cat("request body must be a JSON object, got ", json_type_name(value)));
  return value;
}

std::string dump_json(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string brief_json(const Json& value) {
  if (value.is_array() || value.is_object()) return str_cat("<", json_type_name(value), ">");
  std::string s = dump_json(value);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

const char* json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null: return "null";
    case Json::value_t::boolean: return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return "integer";
    case Json::value_t::number_float: return "number";
    case Json::value_t::string: return "string";
    case Json::value_t::array: return "array";
    case Json::value_t::object: return "object";
    default: return "value";
  }
}

JsonFields::JsonFields(const Json& object, std::string prefix) : object_(object), prefix_(std::move(prefix)) {
  DI_CHECK(object_.is_object());
}

ApiError JsonFields::error(std::string_view name, const std::string& what) const {
  return bad_request(str_cat("'", param(name), "' ", what), param(name));
}

const Json* JsonFields::get(std::string_view name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

std::optional<double> JsonFields::number(std::string_view name, double lo, double hi) const {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_number()) throw error(name, str_cat("must be a number, got ", json_type_name(*v)));
  double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi) throw error(name, str_cat("must be between ", lo, " and ", hi, ", got ", d));
  return d;
}

std::optional<int64_t> JsonFields::integer(std::string_view name, int64_t lo, int64_t hi) const {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_number_integer()) throw error(name, str_cat("must be an integer, got ", json_type_name(*v)));
  // Unsigned values above INT64_MAX would wrap in get<int64_t>().
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi))
    throw error(name, str_cat("must be between ", lo, " and ", hi, ", got ", v->get<uint64_t>()));
  int64_t i = v->get<int64_t>();
  if (i < lo || i > hi) throw error(name, str_cat("must be between ", lo, " and ", hi, ", got ", i));
  return i;
}

std::optional<bool> JsonFields::boolean(std::string_view name) const {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) throw error(name, str_cat("must be a boolean, got ", json_type_name(*v)));
  return v->get<bool>();
}

std::optional<std::string> JsonFields::string(std::string_view name, size_t max_bytes) const {
  const Json* v = get(name);
  if (!v) return std::nullopt;
  if (!v->is_string()) throw error(name, str_cat("must be a string, got ", json_type_name(*v)));
  const auto& s = v->get_ref<const std::string&>();
  if (s.size() > max_bytes) throw error(name, str_cat("is longer than ", max_bytes, " bytes"));
  return s;
}

const Json* JsonFields::object(std::string_view name) const {
  const Json* v = get(name);
  if (v && !v->is_object()) throw error(name, str_cat("must be an object, got ", json_type_name(*v)));
  return v;
}

const Json* JsonFields::array(std::string_view name) const {
  const Json* v = get(name);
  if (v && !v->is_array()) throw error(name, str_cat("must be an array, got ", json_type_name(*v)));
  return v;
}

}  // namespace deepinfer::server
