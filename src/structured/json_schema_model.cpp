#include "structured/json_schema_model.h"

#include <algorithm>
#include <cmath>

#include "common/check.h"
#include "structured/json_formats.h"
#include "structured/regex.h"

namespace deepinfer::structured::jsonschema {
namespace {

const SchemaList kTrueList;

// Keywords that only annotate, or that other keywords read ($defs through $ref).
bool is_ignored_keyword(const std::string& k) {
  static const std::unordered_set<std::string> kIgnored = {
      "$schema",  "$id",        "$anchor",   "$dynamicAnchor",   "$comment",        "$vocabulary",
      "$defs",    "definitions", "title",    "description",      "default",         "examples",
      "deprecated", "readOnly", "writeOnly", "contentMediaType", "contentEncoding", "contentSchema",
      "$recursiveAnchor", "minContains", "maxContains", "then", "else", "additionalItems"};
  return kIgnored.count(k) > 0;
}

// Keywords of the specification we do not implement: an error, never ignored.
bool is_unsupported_keyword(const std::string& k) {
  static const std::unordered_set<std::string> kUnsupported = {
      "$dynamicRef", "$recursiveRef", "contains", "unevaluatedProperties", "unevaluatedItems"};
  return kUnsupported.count(k) > 0;
}

// Nesting depth of a value, without recursion (values are compared, validated and
// emitted recursively, so enum / const values are checked against the nesting cap).
size_t value_depth(const Json& v) {
  std::vector<std::pair<const Json*, size_t>> stack{{&v, 1}};
  size_t depth = 0;
  while (!stack.empty()) {
    const auto [j, d] = stack.back();
    stack.pop_back();
    depth = std::max(depth, d);
    if (j->is_array() || j->is_object())
      for (const Json& c : *j) stack.push_back({&c, d + 1});
  }
  return depth;
}

uint64_t get_count(const Json& v, const std::string& kw, const std::string& path) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d >= 0 && d == std::floor(d)) return d >= 1.8e19 ? kNoLimit : uint64_t(d);
  }
  throw InputError(str_cat("'", kw, "' must be a non-negative integer (at '", path, "')"));
}

SchemaList merge(const SchemaList& a, const SchemaList& b) {
  SchemaList r;
  std::set_union(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(r));
  return r;
}

void tighten_lower(Bound* b, const Bound& o) {
  if (!o.set) return;
  if (!b->set) {
    *b = o;
    return;
  }
  const int c = o.value.compare(b->value);
  if (c > 0 || (c == 0 && o.exclusive)) *b = o;
}

void tighten_upper(Bound* b, const Bound& o) {
  if (!o.set) return;
  if (!b->set) {
    *b = o;
    return;
  }
  const int c = o.value.compare(b->value);
  if (c < 0 || (c == 0 && o.exclusive)) *b = o;
}

// Remainder of the decimal x (scaled by 10^d, an integer) modulo m.
bool is_multiple(const Decimal& x, const Decimal& q) {
  const size_t d = q.frac_digits.size();
  if (x.frac_digits.size() > d) return false;
  std::string qs = q.int_digits + q.frac_digits;
  std::string xs = x.int_digits + x.frac_digits + std::string(d - x.frac_digits.size(), '0');
  // Long division of xs by qs, both decimal digit strings (qs has at most 7 digits).
  qs.erase(0, std::min(qs.find_first_not_of('0'), qs.size()));
  if (qs.empty() || qs.size() > 18) return false;
  const uint64_t m = std::stoull(qs);
  uint64_t r = 0;
  for (char c : xs) r = (r * 10 + uint64_t(c - '0')) % m;
  return r == 0;
}

}  // namespace

const SchemaList& Conj::prop_schema(const std::string& name) const {
  for (const auto& [n, list] : props)
    if (n == name) return list;
  return additional;
}

bool json_equal(const Json& a, const Json& b) {
  if (a.is_number() && b.is_number()) return Decimal::from_json(a).compare(Decimal::from_json(b)) == 0;
  if (a.type() != b.type()) return false;
  if (a.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!json_equal(a[i], b[i])) return false;
    return true;
  }
  if (a.is_object()) {
    if (a.size() != b.size()) return false;
    for (auto it = a.begin(); it != a.end(); ++it) {
      auto f = b.find(it.key());
      if (f == b.end() || !json_equal(it.value(), f.value())) return false;
    }
    return true;
  }
  return a == b;
}

uint8_t type_of(const Json& v) {
  switch (v.type()) {
    case Json::value_t::null: return kNull;
    case Json::value_t::boolean: return kBool;
    case Json::value_t::object: return kObject;
    case Json::value_t::array: return kArray;
    case Json::value_t::string: return kString;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return kInt;
    case Json::value_t::number_float: {
      const double d = v.get<double>();
      return std::isfinite(d) && d == std::floor(d) ? kInt : kFrac;
    }
    default: return 0;
  }
}

uint64_t codepoint_length(const std::string& s) {
  uint64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

SchemaModel::SchemaModel(SchemaStore* store, const JsonSchemaOptions& options, CompileBudget* budget)
    : store_(store), options_(options), budget_(budget) {}

bool SchemaModel::is_false(const SchemaList& list) const {
  return std::binary_search(list.begin(), list.end(), store_->false_id());
}

SchemaList SchemaModel::list_of(int id) const {
  if (id == store_->true_id()) return {};
  return {id};
}

SchemaList SchemaModel::both(const SchemaList& a, const SchemaList& b) const {
  if (is_false(a)) return a;
  if (is_false(b)) return b;
  return merge(a, b);
}

Alts SchemaModel::normalize(const SchemaList& list) {
  Alts result(1);
  for (int id : list) {
    result = conjunction(result, node_alts(id, 0));
    if (result.empty()) break;
  }
  return result;
}

const Alts& SchemaModel::node_alts(int id, int depth) {
  auto it = memo_.find(id);
  if (it != memo_.end()) return it->second;
  DI_CHECK_INPUT(depth <= budget_->limits().max_nesting, "schema references nested deeper than ",
                 budget_->limits().max_nesting, " (at '", store_->path(id), "')");
  DI_CHECK_INPUT(!in_progress_.count(id), "schema refers to itself without consuming input (at '",
                 store_->path(id), "')");
  struct Guard {
    std::unordered_set<int>* set;
    int id;
    ~Guard() { set->erase(id); }
  } guard{&in_progress_, id};
  in_progress_.insert(id);
  Alts alts = parse_node(id, depth);
  return memo_[id] = std::move(alts);
}

Alts SchemaModel::conjunction(const Alts& a, const Alts& b) {
  Alts out;
  DI_CHECK_INPUT(a.size() * b.size() <= budget_->limits().max_alternatives,
                 "schema expands to more than ", budget_->limits().max_alternatives,
                 " alternatives (allOf of anyOf/oneOf)");
  for (const Conj& x : a) {
    for (const Conj& y : b) {
      Conj c = x;
      if (intersect(&c, y)) out.push_back(std::move(c));
    }
  }
  budget_->check_time("schema normalization");
  return out;
}

bool SchemaModel::intersect(Conj* a, const Conj& b) {
  a->types &= b.types;
  if (b.has_values) {
    if (a->has_values) {
      std::vector<const Json*> kept;
      for (const Json* v : a->values)
        for (const Json* w : b.values)
          if (json_equal(*v, *w)) {
            kept.push_back(v);
            break;
          }
      a->values = std::move(kept);
    } else {
      a->has_values = true;
      a->values = b.values;
    }
  }
  a->min_len = std::max(a->min_len, b.min_len);
  a->max_len = std::min(a->max_len, b.max_len);
  a->patterns.insert(a->patterns.end(), b.patterns.begin(), b.patterns.end());
  a->formats.insert(a->formats.end(), b.formats.begin(), b.formats.end());
  tighten_lower(&a->lo, b.lo);
  tighten_upper(&a->hi, b.hi);
  a->multiples.insert(a->multiples.end(), b.multiples.begin(), b.multiples.end());
  // Properties: a name declared on one side meets the other side's schema for it.
  std::vector<std::pair<std::string, SchemaList>> props;
  for (const auto& [name, list] : a->props) props.push_back({name, both(list, b.prop_schema(name))});
  for (const auto& [name, list] : b.props) {
    bool seen = false;
    for (const auto& p : a->props) seen = seen || p.first == name;
    if (!seen) props.push_back({name, both(a->additional, list)});
  }
  a->props = std::move(props);
  a->additional = both(a->additional, b.additional);
  for (const std::string& r : b.required)
    if (std::find(a->required.begin(), a->required.end(), r) == a->required.end()) a->required.push_back(r);
  a->min_props = std::max(a->min_props, b.min_props);
  a->max_props = std::min(a->max_props, b.max_props);
  const size_t n = std::max(a->prefix.size(), b.prefix.size());
  std::vector<SchemaList> prefix(n);
  for (size_t i = 0; i < n; ++i) prefix[i] = both(a->item_schema(i), b.item_schema(i));
  a->prefix = std::move(prefix);
  a->items = both(a->items, b.items);
  a->min_items = std::max(a->min_items, b.min_items);
  a->max_items = std::min(a->max_items, b.max_items);
  a->unique = a->unique || b.unique;
  return viable(a);
}

bool SchemaModel::viable(Conj* c) {
  if (c->min_len > c->max_len) c->types &= uint8_t(~kString);
  if (c->lo.set && c->hi.set) {
    const int cmp = c->lo.value.compare(c->hi.value);
    if (cmp > 0 || (cmp == 0 && (c->lo.exclusive || c->hi.exclusive))) c->types &= uint8_t(~(kInt | kFrac));
  }
  if (c->types & kObject) {
    bool ok = c->min_props <= c->max_props && c->required.size() <= c->max_props;
    for (const std::string& r : c->required) ok = ok && !is_false(c->prop_schema(r));
    if (!ok) c->types &= uint8_t(~kObject);
  }
  if (c->types & kArray) {
    bool ok = c->min_items <= c->max_items;
    for (uint64_t i = 0; ok && i < c->min_items && i <= c->prefix.size(); ++i) ok = !is_false(c->item_schema(i));
    if (!ok) c->types &= uint8_t(~kArray);
  }
  if (c->has_values) {
    std::vector<const Json*> kept;
    for (const Json* v : c->values)
      if (type_of(*v) & c->types) kept.push_back(v);
    c->values = std::move(kept);
    if (c->values.empty()) return false;
  }
  return c->types != 0;
}

bool SchemaModel::disjoint(const Conj& a, const Conj& b) {
  Conj m = a;
  if (!intersect(&m, b)) return true;
  if (m.has_values) {
    for (const Json* v : m.values)
      if (validate(*v, m, false)) return false;
    return true;
  }
  // Every type both allow must be told apart by something.
  for (uint8_t t : {kNull, kBool, kString, kInt, kFrac, kArray, kObject}) {
    if (!(m.types & t)) continue;
    bool apart = false;
    // A subschema that is still being parsed (recursion) cannot be inspected yet.
    auto empty = [&](const SchemaList& list) {
      try {
        return normalize(list).empty();
      } catch (const InputError&) {
        return false;
      }
    };
    if (t == kObject) {
      for (const std::string& r : m.required) apart = apart || empty(m.prop_schema(r));
    } else if (t == kArray) {
      for (uint64_t i = 0; i < m.min_items && i <= m.prefix.size(); ++i) apart = apart || empty(m.item_schema(i));
    }
    if (!apart) return false;
  }
  return true;
}

Alts SchemaModel::not_alts(int parent, const Json& schema) {
  if (schema.is_boolean()) return schema.get<bool>() ? Alts{} : Alts(1);
  bool only_type = schema.is_object() && schema.contains("type");
  for (auto it = schema.begin(); only_type && it != schema.end(); ++it)
    only_type = it.key() == "type" || is_ignored_keyword(it.key());
  DI_CHECK_INPUT(only_type, "'not' is only supported with a boolean schema or a schema of only 'type' (at '",
                 store_->path(parent), "')");
  const Alts inner = parse_node(store_->child(parent, schema, "/not"), 0);
  Conj c;
  c.types = kAnyType;
  for (const Conj& x : inner) c.types &= uint8_t(~x.types);
  if (c.types == 0) return {};
  return {c};
}

Alts SchemaModel::parse_node(int id, int depth) {
  const Json& s = store_->json(id);
  // A copy: child() below adds store nodes, which may move the one `id` names.
  const std::string path = store_->path(id);
  if (s.is_boolean()) return s.get<bool>() ? Alts(1) : Alts{};
  DI_CHECK_INPUT(s.is_object(), "a schema must be an object or a boolean (at '", path, "')");
  budget_->check_time("schema parsing");
  Conj c;
  const Json* ref = nullptr;
  const Json *all_of = nullptr, *any_of = nullptr, *one_of = nullptr, *not_schema = nullptr;
  auto schema_array = [&](const Json& v, const std::string& kw) -> const Json& {
    DI_CHECK_INPUT(v.is_array() && !v.empty(), "'", kw, "' must be a non-empty array of schemas (at '", path, "')");
    return v;
  };
  for (auto it = s.begin(); it != s.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (k == "$schema") {
      DI_CHECK_INPUT(v.is_string() && (v.get<std::string>().rfind("http://json-schema.org/", 0) == 0 ||
                                       v.get<std::string>().rfind("https://json-schema.org/", 0) == 0),
                     "unsupported $schema ", v.dump(), ": only the json-schema.org drafts are known (at '", path,
                     "')");
    } else if (k == "type") {
      uint8_t t = 0;
      auto one = [&](const Json& name) {
        DI_CHECK_INPUT(name.is_string(), "'type' must be a string or an array of strings (at '", path, "')");
        const std::string n = name.get<std::string>();
        if (n == "null") t |= kNull;
        else if (n == "boolean") t |= kBool;
        else if (n == "object") t |= kObject;
        else if (n == "array") t |= kArray;
        else if (n == "string") t |= kString;
        else if (n == "integer") t |= kInt;
        else if (n == "number") t |= kInt | kFrac;
        else throw InputError(str_cat("unknown type '", n, "' (at '", path, "')"));
      };
      if (v.is_array()) {
        for (const Json& n : v) one(n);
      } else {
        one(v);
      }
      c.types &= t;
    } else if (k == "enum" || k == "const") {
      std::vector<const Json*> values;
      if (k == "const") {
        values.push_back(&v);
      } else {
        DI_CHECK_INPUT(v.is_array(), "'enum' must be an array (at '", path, "')");
        DI_CHECK_INPUT(v.size() <= budget_->limits().max_enum_values, "'enum' has ", v.size(),
                       " values, above the limit of ", budget_->limits().max_enum_values);
        for (const Json& e : v) values.push_back(&e);
      }
      for (const Json* value : values)
        DI_CHECK_INPUT(value_depth(*value) <= size_t(budget_->limits().max_nesting), "'", k,
                       "' value nested deeper than ", budget_->limits().max_nesting, " levels (at '", path, "')");
      Conj e;
      e.has_values = true;
      e.values = std::move(values);
      if (!intersect(&c, e)) return {};
    } else if (k == "minLength") {
      c.min_len = std::max(c.min_len, get_count(v, k, path));
    } else if (k == "maxLength") {
      c.max_len = std::min(c.max_len, get_count(v, k, path));
    } else if (k == "pattern") {
      DI_CHECK_INPUT(v.is_string(), "'pattern' must be a string (at '", path, "')");
      pattern_fsa(v.get<std::string>(), CharEncoding::kUtf8);  // reports a bad regex here
      c.patterns.push_back(v.get<std::string>());
    } else if (k == "format") {
      DI_CHECK_INPUT(v.is_string(), "'format' must be a string (at '", path, "')");
      if (options_.assert_format) {
        Fsa f;
        DI_CHECK_INPUT(format_fsa(v.get<std::string>(), CharEncoding::kUtf8, &f), "format '", v.get<std::string>(),
                       "' is not supported (at '", path, "')");
        c.formats.push_back(v.get<std::string>());
      }
    } else if (k == "minimum" || k == "maximum" || k == "exclusiveMinimum" || k == "exclusiveMaximum") {
      if (v.is_boolean()) continue;  // draft 4 form, read with minimum / maximum
      DI_CHECK_INPUT(v.is_number(), "'", k, "' must be a number (at '", path, "')");
      const bool lower = k == "minimum" || k == "exclusiveMinimum";
      bool exclusive = k[0] == 'e';
      if (!exclusive) {
        auto flag = s.find(lower ? "exclusiveMinimum" : "exclusiveMaximum");
        exclusive = flag != s.end() && flag->is_boolean() && flag->get<bool>();
      }
      const Bound b{true, Decimal::from_json(v), exclusive};
      if (lower) {
        tighten_lower(&c.lo, b);
      } else {
        tighten_upper(&c.hi, b);
      }
    } else if (k == "multipleOf") {
      DI_CHECK_INPUT(v.is_number() && Decimal::from_json(v).compare(Decimal{}) > 0,
                     "'multipleOf' must be a number greater than 0 (at '", path, "')");
      c.multiples.push_back(Decimal::from_json(v));
    } else if (k == "properties") {
      DI_CHECK_INPUT(v.is_object(), "'properties' must be an object (at '", path, "')");
      for (auto p = v.begin(); p != v.end(); ++p)
        c.props.push_back({p.key(), list_of(store_->child(id, p.value(), "/properties/" + p.key()))});
    } else if (k == "additionalProperties") {
      c.additional = list_of(store_->child(id, v, "/additionalProperties"));
    } else if (k == "required") {
      DI_CHECK_INPUT(v.is_array(), "'required' must be an array of strings (at '", path, "')");
      for (const Json& r : v) {
        DI_CHECK_INPUT(r.is_string(), "'required' must be an array of strings (at '", path, "')");
        if (std::find(c.required.begin(), c.required.end(), r.get<std::string>()) == c.required.end())
          c.required.push_back(r.get<std::string>());
      }
    } else if (k == "minProperties") {
      c.min_props = std::max(c.min_props, get_count(v, k, path));
    } else if (k == "maxProperties") {
      c.max_props = std::min(c.max_props, get_count(v, k, path));
    } else if (k == "prefixItems" || (k == "items" && v.is_array())) {
      schema_array(v, k);
      for (size_t i = 0; i < v.size(); ++i)
        c.prefix.push_back(list_of(store_->child(id, v[i], "/" + k + "/" + std::to_string(i))));
      if (k == "items") {  // draft 2019 and earlier: the rest is additionalItems
        auto rest = s.find("additionalItems");
        if (rest != s.end()) c.items = list_of(store_->child(id, *rest, "/additionalItems"));
      }
    } else if (k == "items") {
      c.items = list_of(store_->child(id, v, "/items"));
    } else if (k == "minItems") {
      c.min_items = std::max(c.min_items, get_count(v, k, path));
    } else if (k == "maxItems") {
      c.max_items = std::min(c.max_items, get_count(v, k, path));
    } else if (k == "uniqueItems") {
      DI_CHECK_INPUT(v.is_boolean(), "'uniqueItems' must be a boolean (at '", path, "')");
      c.unique = c.unique || v.get<bool>();
    } else if (k == "$ref") {
      DI_CHECK_INPUT(v.is_string(), "'$ref' must be a string (at '", path, "')");
      ref = &v;
    } else if (k == "allOf") {
      all_of = &schema_array(v, k);
    } else if (k == "anyOf") {
      any_of = &schema_array(v, k);
    } else if (k == "oneOf") {
      one_of = &schema_array(v, k);
    } else if (k == "not") {
      not_schema = &v;
    } else if (k == "if") {
      DI_CHECK_INPUT(!s.contains("then") && !s.contains("else"), "'if'/'then'/'else' is not supported (at '", path,
                     "')");
    } else if (k == "patternProperties" || k == "dependentRequired" || k == "dependentSchemas" ||
               k == "dependencies") {
      DI_CHECK_INPUT(v.is_object() && v.empty(), "'", k, "' is not supported (at '", path, "')");
    } else if (k == "propertyNames") {
      DI_CHECK_INPUT((v.is_boolean() && v.get<bool>()) || (v.is_object() && v.empty()),
                     "'propertyNames' is not supported (at '", path, "')");
    } else if (is_unsupported_keyword(k)) {
      throw InputError(str_cat("'", k, "' is not supported (at '", path, "')"));
    }
    // Everything else is an annotation or a keyword unknown to the specification,
    // which JSON Schema says to ignore.
  }
  Alts result;
  if (viable(&c)) result.push_back(std::move(c));
  if (ref) result = conjunction(result, node_alts(store_->resolve_ref(id, ref->get<std::string>()), depth + 1));
  if (all_of)
    for (size_t i = 0; i < all_of->size(); ++i)
      result = conjunction(result, node_alts(store_->child(id, (*all_of)[i], "/allOf/" + std::to_string(i)), depth + 1));
  for (const Json* group : {any_of, one_of}) {
    if (!group) continue;
    const char* kw = group == any_of ? "anyOf" : "oneOf";
    std::vector<Alts> branches;
    for (size_t i = 0; i < group->size(); ++i)
      branches.push_back(node_alts(store_->child(id, (*group)[i], std::string("/") + kw + "/" + std::to_string(i)),
                                   depth + 1));
    if (group == one_of) {
      // Within what the rest of the schema allows, no two branches may overlap.
      for (size_t i = 0; i < branches.size(); ++i) {
        for (size_t j = i + 1; j < branches.size(); ++j) {
          for (const Conj& x : conjunction(result, branches[i]))
            for (const Conj& y : branches[j])
              DI_CHECK_INPUT(disjoint(x, y), "oneOf branches ", i, " and ", j,
                             " may both match; only provably exclusive oneOf is supported (at '", path, "')");
        }
      }
    }
    Alts uni;
    for (Alts& b : branches) uni.insert(uni.end(), b.begin(), b.end());
    result = conjunction(result, uni);
  }
  if (not_schema) result = conjunction(result, not_alts(id, *not_schema));
  return result;
}

const Fsa& SchemaModel::pattern_fsa(const std::string& pattern, CharEncoding enc) {
  const auto key = std::make_pair(pattern, int(enc));
  auto it = patterns_.find(key);
  if (it != patterns_.end()) return it->second;
  RegexOptions o;
  o.search = true;
  o.encoding = enc;
  return patterns_[key] = regex_to_fsa(pattern, o, budget_);
}

bool SchemaModel::validate(const Json& value, const SchemaList& list) {
  for (const Conj& c : normalize(list))
    if (validate(value, c, true)) return true;
  return false;
}

bool SchemaModel::validate(const Json& v, const Conj& c, bool check_values) {
  const uint8_t t = type_of(v);
  if (!(c.types & t)) return false;
  if (check_values && c.has_values) {
    bool found = false;
    for (const Json* w : c.values) found = found || json_equal(v, *w);
    if (!found) return false;
  }
  budget_->check_time("instance validation");
  if (t == kString) {
    const std::string& s = v.get_ref<const std::string&>();
    const uint64_t n = codepoint_length(s);
    if (n < c.min_len || n > c.max_len) return false;
    for (const std::string& p : c.patterns)
      if (!fsa_accepts(pattern_fsa(p, CharEncoding::kUtf8), s)) return false;
    for (const std::string& f : c.formats) {
      Fsa fsa;
      if (format_fsa(f, CharEncoding::kUtf8, &fsa) && !fsa_accepts(fsa, s)) return false;
    }
  } else if (t == kInt || t == kFrac) {
    const Decimal d = Decimal::from_json(v);
    if (c.lo.set) {
      const int cmp = d.compare(c.lo.value);
      if (cmp < 0 || (cmp == 0 && c.lo.exclusive)) return false;
    }
    if (c.hi.set) {
      const int cmp = d.compare(c.hi.value);
      if (cmp > 0 || (cmp == 0 && c.hi.exclusive)) return false;
    }
    for (const Decimal& q : c.multiples)
      if (!is_multiple(d, q)) return false;
  } else if (t == kObject) {
    if (v.size() < c.min_props || v.size() > c.max_props) return false;
    for (const std::string& r : c.required)
      if (!v.contains(r)) return false;
    for (auto it = v.begin(); it != v.end(); ++it)
      if (!validate(it.value(), c.prop_schema(it.key()))) return false;
  } else if (t == kArray) {
    if (v.size() < c.min_items || v.size() > c.max_items) return false;
    for (size_t i = 0; i < v.size(); ++i)
      if (!validate(v[i], c.item_schema(i))) return false;
    if (c.unique)
      for (size_t i = 0; i < v.size(); ++i)
        for (size_t j = i + 1; j < v.size(); ++j)
          if (json_equal(v[i], v[j])) return false;
  }
  return true;
}

}  // namespace deepinfer::structured::jsonschema
