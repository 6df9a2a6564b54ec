#include "tokenizer/py_json.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "common/check.h"

namespace deepinfer {

namespace {

// Python's float repr: the shortest round-trip digits, positional for decimal exponents
// in [-4, 16), otherwise d.ddde+XX.
std::string py_float(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  const bool negative = sci[0] == '-';
  if (negative) sci.erase(0, 1);
  const size_t e = sci.find('e');
  std::string digits = sci.substr(0, e);
  const int exponent = std::stoi(sci.substr(e + 1));
  if (digits.size() > 1) digits.erase(1, 1);  // drop the '.'
  std::string out = negative ? "-" : "";
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) {
      out += "0." + std::string(size_t(-exponent - 1), '0') + digits;
    } else if (size_t(exponent) + 1 >= digits.size()) {
      out += digits + std::string(size_t(exponent) + 1 - digits.size(), '0') + ".0";
    } else {
      out += digits.substr(0, size_t(exponent) + 1) + "." + digits.substr(size_t(exponent) + 1);
    }
    return out;
  }
  out += digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

constexpr int kMaxDepth = 256;

void dump(const nlohmann::ordered_json& v, std::string* out, int depth) {
  DI_CHECK_INPUT(depth < kMaxDepth, "JSON nested more than ", kMaxDepth, " levels deep");
  using value_t = nlohmann::ordered_json::value_t;
  switch (v.type()) {
    case value_t::null:
      *out += "null";
      return;
    case value_t::boolean:
      *out += v.get<bool>() ? "true" : "false";
      return;
    case value_t::number_integer:
      *out += std::to_string(v.get<int64_t>());
      return;
    case value_t::number_unsigned:
      *out += std::to_string(v.get<uint64_t>());
      return;
    case value_t::number_float:
      *out += py_float(v.get<double>());
      return;
    case value_t::string:
      *out += py_json_string(v.get_ref<const std::string&>());
      return;
    case value_t::array: {
      *out += "[";
      bool first = true;
      for (const auto& item : v) {
        if (!first) *out += ", ";
        first = false;
        dump(item, out, depth + 1);
      }
      *out += "]";
      return;
    }
    case value_t::object: {
      *out += "{";
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) *out += ", ";
        first = false;
        *out += py_json_string(it.key());
        *out += ": ";
        dump(it.value(), out, depth + 1);
      }
      *out += "}";
      return;
    }
    default:  // binary and discarded values do not come from parsing JSON text
      *out += "null";
      return;
  }
}

}  // namespace

std::string py_json_string(const std::string& utf8) {
  std::string out = "\"";
  for (char c : utf8) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out + "\"";
}

std::string py_json_dumps(const nlohmann::ordered_json& value) {
  std::string out;
  dump(value, &out, 0);
  return out;
}

}  // namespace deepinfer
