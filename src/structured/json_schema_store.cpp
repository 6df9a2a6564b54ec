#include "structured/json_schema_store.h"

#include "common/check.h"

namespace deepinfer::structured::jsonschema {
namespace {

const char* const kDefaultBase = "https://deepinfer.invalid/schema.json";

struct Uri {
  std::string scheme, authority, path, query, fragment;
  bool has_scheme = false, has_authority = false, has_query = false, has_fragment = false;
};

Uri parse_uri(const std::string& s) {
  Uri u;
  size_t i = 0;
  const size_t colon = s.find(':');
  const size_t delim = s.find_first_of("/?#");
  if (colon != std::string::npos && colon > 0 && (delim == std::string::npos || colon < delim)) {
    u.scheme = s.substr(0, colon);
    u.has_scheme = true;
    i = colon + 1;
  }
  if (s.compare(i, 2, "//") == 0) {
    const size_t end = s.find_first_of("/?#", i + 2);
    u.authority = s.substr(i + 2, (end == std::string::npos ? s.size() : end) - i - 2);
    u.has_authority = true;
    i = end == std::string::npos ? s.size() : end;
  }
  const size_t path_end = s.find_first_of("?#", i);
  u.path = s.substr(i, (path_end == std::string::npos ? s.size() : path_end) - i);
  i = path_end == std::string::npos ? s.size() : path_end;
  if (i < s.size() && s[i] == '?') {
    const size_t end = s.find('#', i);
    u.query = s.substr(i + 1, (end == std::string::npos ? s.size() : end) - i - 1);
    u.has_query = true;
    i = end == std::string::npos ? s.size() : end;
  }
  if (i < s.size() && s[i] == '#') {
    u.fragment = s.substr(i + 1);
    u.has_fragment = true;
  }
  return u;
}

std::string remove_dot_segments(const std::string& path) {
  std::vector<std::string> out;
  size_t i = 0;
  const bool absolute = !path.empty() && path[0] == '/';
  std::string seg;
  std::vector<std::string> segs;
  while (i <= path.size()) {
    const size_t end = path.find('/', i);
    segs.push_back(path.substr(i, (end == std::string::npos ? path.size() : end) - i));
    if (end == std::string::npos) break;
    i = end + 1;
  }
  for (size_t k = absolute ? 1 : 0; k < segs.size(); ++k) {
    const std::string& s = segs[k];
    const bool last = k + 1 == segs.size();
    if (s == ".") {
      if (last) out.push_back("");
    } else if (s == "..") {
      if (!out.empty()) out.pop_back();
      if (last) out.push_back("");
    } else {
      out.push_back(s);
    }
  }
  std::string r = absolute ? "/" : "";
  for (size_t k = 0; k < out.size(); ++k) r += (k ? "/" : "") + out[k];
  return r;
}

std::string build(const Uri& u) {
  std::string s;
  if (u.has_scheme) s += u.scheme + ":";
  if (u.has_authority) s += "//" + u.authority;
  s += u.path;
  if (u.has_query) s += "?" + u.query;
  if (u.has_fragment) s += "#" + u.fragment;
  return s;
}

std::string strip_fragment(const std::string& uri) { return uri.substr(0, uri.find('#')); }

std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && isxdigit(uint8_t(s[i + 1])) && isxdigit(uint8_t(s[i + 2]))) {
      out += char(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

bool is_map_keyword(const std::string& k) {
  return k == "$defs" || k == "definitions" || k == "properties" || k == "patternProperties" ||
         k == "dependentSchemas";
}
bool is_schema_keyword(const std::string& k) {
  return k == "additionalProperties" || k == "items" || k == "additionalItems" || k == "not" || k == "if" ||
         k == "then" || k == "else" || k == "contains" || k == "propertyNames" || k == "unevaluatedItems" ||
         k == "unevaluatedProperties" || k == "contentSchema";
}
bool is_array_keyword(const std::string& k) {
  return k == "allOf" || k == "anyOf" || k == "oneOf" || k == "prefixItems" || k == "items";
}

}  // namespace

std::string resolve_uri(const std::string& base, const std::string& ref) {
  const Uri r = parse_uri(ref);
  const Uri b = parse_uri(base);
  Uri t;
  if (r.has_scheme) {
    t = r;
    t.path = remove_dot_segments(r.path);
  } else {
    if (r.has_authority) {
      t = r;
      t.path = remove_dot_segments(r.path);
    } else {
      if (r.path.empty()) {
        t.path = b.path;
        t.query = r.has_query ? r.query : b.query;
        t.has_query = r.has_query || b.has_query;
      } else {
        if (r.path[0] == '/') {
          t.path = remove_dot_segments(r.path);
        } else {
          std::string merged;
          if (b.has_authority && b.path.empty()) {
            merged = "/" + r.path;
          } else {
            const size_t slash = b.path.rfind('/');
            merged = (slash == std::string::npos ? "" : b.path.substr(0, slash + 1)) + r.path;
          }
          t.path = remove_dot_segments(merged);
        }
        t.query = r.query;
        t.has_query = r.has_query;
      }
      t.authority = b.authority;
      t.has_authority = b.has_authority;
    }
    t.scheme = b.scheme;
    t.has_scheme = b.has_scheme;
  }
  t.fragment = r.fragment;
  t.has_fragment = r.has_fragment;
  return build(t);
}

SchemaStore::SchemaStore(const Json& root, CompileBudget* budget) : budget_(budget) {
  true_id_ = add(&true_json_, kDefaultBase, "true");
  false_id_ = add(&false_json_, kDefaultBase, "false");
  resources_[kDefaultBase] = &root;
  index(root, kDefaultBase, "#", 0);
  root_ = add(&root, bases_[&root], "#");
}

int SchemaStore::add(const Json* json, const std::string& base, const std::string& path) {
  auto [it, inserted] = ids_.try_emplace(json, int(nodes_.size()));
  if (inserted) nodes_.push_back({json, base, path});
  return it->second;
}

void SchemaStore::index(const Json& schema, const std::string& base_in, const std::string& path, int depth) {
  DI_CHECK_INPUT(depth <= budget_->limits().max_nesting, "schema nested deeper than ",
                 budget_->limits().max_nesting, " levels");
  budget_->check_time("schema indexing");
  std::string base = base_in;
  if (schema.is_object()) {
    auto id = schema.find("$id");
    if (id != schema.end()) {
      DI_CHECK_INPUT(id->is_string(), "$id must be a string (at '", path, "')");
      base = strip_fragment(resolve_uri(base, id->get<std::string>()));
      resources_[base] = &schema;
    }
    for (const char* kw : {"$anchor", "$dynamicAnchor"}) {
      auto a = schema.find(kw);
      if (a != schema.end()) {
        DI_CHECK_INPUT(a->is_string(), kw, " must be a string (at '", path, "')");
        anchors_[base + "#" + a->get<std::string>()] = &schema;
      }
    }
  }
  bases_[&schema] = base;
  paths_[&schema] = path;
  if (!schema.is_object()) return;
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (is_map_keyword(k) && v.is_object()) {
      for (auto s = v.begin(); s != v.end(); ++s) index(s.value(), base, path + "/" + k + "/" + s.key(), depth + 1);
    } else if (is_array_keyword(k) && v.is_array()) {
      for (size_t i = 0; i < v.size(); ++i) index(v[i], base, path + "/" + k + "/" + std::to_string(i), depth + 1);
    } else if (is_schema_keyword(k) && (v.is_object() || v.is_boolean())) {
      index(v, base, path + "/" + k, depth + 1);
    }
  }
}

int SchemaStore::child(int parent, const Json& value, const std::string& path_suffix) {
  auto known = ids_.find(&value);
  if (known != ids_.end()) return known->second;
  auto b = bases_.find(&value);
  const std::string base = b != bases_.end() ? b->second : nodes_[parent].base;
  return add(&value, base, nodes_[parent].path + path_suffix);
}

int SchemaStore::resolve_ref(int from, const std::string& ref) {
  const std::string target = resolve_uri(nodes_[from].base, ref);
  const size_t hash = target.find('#');
  const std::string doc = target.substr(0, hash);
  const std::string fragment = hash == std::string::npos ? "" : percent_decode(target.substr(hash + 1));
  auto res = resources_.find(doc);
  DI_CHECK_INPUT(res != resources_.end(), "$ref '", ref, "' points outside the schema (remote references are not supported)");
  const Json* node = res->second;
  std::string path = paths_.count(node) ? paths_[node] : "#";
  std::string base = doc;
  if (!fragment.empty() && fragment[0] == '/') {
    size_t i = 1;
    while (i <= fragment.size()) {
      const size_t end = fragment.find('/', i);
      std::string token = fragment.substr(i, (end == std::string::npos ? fragment.size() : end) - i);
      std::string key;
      for (size_t k = 0; k < token.size(); ++k) {
        if (token[k] == '~' && k + 1 < token.size() && (token[k + 1] == '0' || token[k + 1] == '1')) {
          key += token[k + 1] == '0' ? '~' : '/';
          ++k;
        } else {
          key += token[k];
        }
      }
      if (node->is_object()) {
        auto f = node->find(key);
        DI_CHECK_INPUT(f != node->end(), "$ref '", ref, "': no '", key, "' in the schema");
        node = &f.value();
      } else if (node->is_array()) {
        char* endp = nullptr;
        const unsigned long idx = std::strtoul(key.c_str(), &endp, 10);
        DI_CHECK_INPUT(!key.empty() && *endp == 0 && idx < node->size(), "$ref '", ref, "': bad array index '", key,
                       "'");
        node = &(*node)[idx];
      } else {
        throw InputError(str_cat("$ref '", ref, "' goes through a non-container"));
      }
      path += "/" + key;
      if (node->is_object() && node->contains("$id") && (*node)["$id"].is_string())
        base = strip_fragment(resolve_uri(base, (*node)["$id"].get<std::string>()));
      if (end == std::string::npos) break;
      i = end + 1;
    }
  } else if (!fragment.empty()) {
    auto a = anchors_.find(doc + "#" + fragment);
    DI_CHECK_INPUT(a != anchors_.end(), "$ref '", ref, "': no anchor '", fragment, "'");
    node = a->second;
    path = paths_.count(node) ? paths_[node] : path;
  }
  DI_CHECK_INPUT(node->is_object() || node->is_boolean(), "$ref '", ref, "' does not point to a schema");
  auto b = bases_.find(node);
  return add(node, b != bases_.end() ? b->second : base, path);
}

}  // namespace deepinfer::structured::jsonschema
