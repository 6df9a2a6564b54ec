// Internal to the JSON Schema front end: the schema document indexed for $ref.
//
// Every subschema (every value in a schema position: $defs, properties, items, allOf,
// ...) gets an id, its base URI (from the nearest $id) and a readable path. $ref is
// resolved against the base URI (RFC 3986), to a resource by $id, then to a JSON
// pointer or an $anchor / $dynamicAnchor name. References outside the document are an
// error: we never fetch.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/limits.h"

namespace deepinfer::structured::jsonschema {

using Json = nlohmann::ordered_json;

// Resolves a URI reference against a base URI (RFC 3986 section 5.2).
std::string resolve_uri(const std::string& base, const std::string& ref);

class SchemaStore {
 public:
  // Indexes the document. InputError on malformed $id / $anchor or too deep nesting.
  SchemaStore(const Json& root, CompileBudget* budget);

  // The id of the root schema, and of the synthetic `true` and `false` schemas.
  int root() const { return root_; }
  int true_id() const { return true_id_; }
  int false_id() const { return false_id_; }

  const Json& json(int id) const { return *nodes_[id].json; }
  const std::string& base(int id) const { return nodes_[id].base; }
  const std::string& path(int id) const { return nodes_[id].path; }

  // The id of a subschema of `parent` (the value of one of its keywords).
  int child(int parent, const Json& value, const std::string& path_suffix);
  // The target of `ref` written in schema `from`. InputError when it cannot be found.
  int resolve_ref(int from, const std::string& ref);

 private:
  struct Node {
    const Json* json;
    std::string base;
    std::string path;
  };
  int add(const Json* json, const std::string& base, const std::string& path);
  void index(const Json& schema, const std::string& base, const std::string& path, int depth);

  CompileBudget* budget_;
  std::vector<Node> nodes_;
  std::unordered_map<const Json*, int> ids_;
  std::unordered_map<std::string, const Json*> resources_;  // absolute URI without fragment
  std::unordered_map<std::string, const Json*> anchors_;    // "uri#name"
  std::unordered_map<const Json*, std::string> bases_;      // base URI of each indexed schema
  std::unordered_map<const Json*, std::string> paths_;
  Json true_json_ = true, false_json_ = false;
  int root_ = 0, true_id_ = 0, false_id_ = 0;
};

}  // namespace deepinfer::structured::jsonschema
