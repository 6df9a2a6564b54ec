// Internal to the JSON Schema front end: schemas as unions of per-type constraints.
//
// A schema (or an AND of schemas) is normalized into Alts, a union of Conj. A Conj
// gathers what one branch requires of each JSON type: allowed types, enum values,
// string lengths / patterns / formats, numeric bounds / multiples, object properties
// (by name, then "additional") and array positions. Subschemas of properties and items
// stay as SchemaLists (ids to be ANDed, normalized lazily), which is what lets recursive
// schemas become recursive grammar rules. allOf intersects Conjs, anyOf unions them,
// oneOf unions them after proving the branches disjoint, $ref inlines its target.
//
// The same model validates instances (for enum/const filtering and oneOf proofs).
#pragma once

#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "structured/fsa.h"
#include "structured/fsa_builder.h"
#include "structured/json_number.h"
#include "structured/json_schema.h"
#include "structured/json_schema_store.h"

namespace deepinfer::structured::jsonschema {

enum TypeBit : uint8_t {
  kNull = 1,
  kBool = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInt = 32,   // numbers with no fractional part
  kFrac = 64,  // numbers with one
  kAnyType = 127,
};
inline constexpr uint64_t kNoLimit = UINT64_MAX;

// Schema ids to AND, sorted and unique. Empty means `true`.
using SchemaList = std::vector<int>;

struct Bound {
  bool set = false;
  Decimal value;
  bool exclusive = false;
};

struct Conj {
  uint8_t types = kAnyType;
  bool has_values = false;  // enum / const: the value must be one of `values`
  std::vector<const Json*> values;
  uint64_t min_len = 0, max_len = kNoLimit;
  std::vector<std::string> patterns, formats;
  Bound lo, hi;
  std::vector<Decimal> multiples;
  std::vector<std::pair<std::string, SchemaList>> props;  // declared order
  SchemaList additional;
  std::vector<std::string> required;
  uint64_t min_props = 0, max_props = kNoLimit;
  std::vector<SchemaList> prefix;
  SchemaList items;
  uint64_t min_items = 0, max_items = kNoLimit;
  bool unique = false;

  const SchemaList& prop_schema(const std::string& name) const;
  const SchemaList& item_schema(size_t index) const { return index < prefix.size() ? prefix[index] : items; }
};
using Alts = std::vector<Conj>;

// JSON Schema equality: numbers by value, objects without regard to order.
bool json_equal(const Json& a, const Json& b);
// The TypeBit of a value (1.0 is kInt).
uint8_t type_of(const Json& v);
// Code points in a UTF-8 string.
uint64_t codepoint_length(const std::string& s);

class SchemaModel {
 public:
  SchemaModel(SchemaStore* store, const JsonSchemaOptions& options, CompileBudget* budget);

  SchemaStore& store() { return *store_; }
  const JsonSchemaOptions& options() const { return options_; }
  bool is_false(const SchemaList& list) const;

  // The union of Conjs equivalent to the AND of `list`. Each Conj is viable as far as
  // simple checks can tell (types left, bounds consistent).
  Alts normalize(const SchemaList& list);

  bool validate(const Json& value, const SchemaList& list);
  bool validate(const Json& value, const Conj& c, bool check_values);

  // A pattern as an automaton: search semantics, characters spelled with `enc`.
  const Fsa& pattern_fsa(const std::string& pattern, CharEncoding enc);

  // The AND of two lists (false absorbs, true is dropped).
  SchemaList both(const SchemaList& a, const SchemaList& b) const;

 private:
  const Alts& node_alts(int id, int depth);
  Alts parse_node(int id, int depth);
  Alts conjunction(const Alts& a, const Alts& b);
  bool intersect(Conj* a, const Conj& b);
  bool viable(Conj* c);
  bool disjoint(const Conj& a, const Conj& b);
  Alts not_alts(int parent, const Json& schema);
  SchemaList list_of(int id) const;

  SchemaStore* store_;
  JsonSchemaOptions options_;
  CompileBudget* budget_;
  std::unordered_map<int, Alts> memo_;
  std::unordered_set<int> in_progress_;
  std::map<std::pair<std::string, int>, Fsa> patterns_;
};

}  // namespace deepinfer::structured::jsonschema
