// JSON Schema (draft 2020-12) to grammar.
//
// The grammar accepts exactly the JSON texts whose value validates against the schema,
// within these documented policies:
//
//  * Whitespace. Compact JSON is always accepted. With Whitespace::kFlexible (default)
//    every place JSON allows whitespace accepts a run of [ \t\n\r] of at most
//    max_whitespace characters (default 20; -1 = unbounded), so `json.dumps` output
//    (", " and ": ") and modest pretty-printing pass while runaway whitespace does not.
//    Whitespace::kCompact accepts none.
//  * Strings. The escape policy of CharEncoding::kJsonString (fsa_builder.h): printable
//    ASCII is written raw, other characters raw or escaped. Lengths count code points.
//  * Numbers. Integers are written without exponent ("1.0" is an integer, as JSON Schema
//    says). Unbounded `number` accepts every JSON number; a bounded one is written
//    without exponent. enum/const numbers accept their value with or without trailing
//    fractional zeros.
//  * Number digits (number_digits; default unbounded, which validation needs). For
//    generation the engine passes kGenerationNumberDigits, so that a model that keeps
//    writing digits is made to end the number instead of running to max_tokens:
//      - at most 19 digits without a point: every int64 (integers parse exactly);
//      - at most 15 digits with a point, both sides together (DBL_DIG): every such
//        decimal survives a round trip through an IEEE double, so consumers that read
//        fractions as doubles (Python's json, JavaScript) still see a non-integer where
//        the grammar checked one, and the same side of a bound that has at most 15
//        significant digits itself (19 digits would let
//        2762712830047862789.76 through, which a double makes an integer);
//      - at most 2 exponent digits: with these mantissas every number is a finite,
//        normal double (1e999 would read as infinity).
//    Where minimum, maximum, exclusive* or multipleOf apply, the bound widens to what the
//    schema's own numbers need (their integer digits + 1; with a point, those plus
//    fraction digits + 1), and it is dropped for that number if no value within it
//    satisfies the keywords (e.g. common multiples of several multipleOf), so it never
//    empties a satisfiable schema. enum/const values keep their own digits; only their
//    optional padding zeros are bounded.
//  * Objects. Properties may appear in any order. When an object declares at most
//    max_any_order_properties (default 6) properties, each declared key appears at most
//    once; with more, only the required ones are checked for repeats (at most
//    max_required_any_order of them, default 12, else InputError) and optional declared
//    keys, like undeclared ones, are not (a repeated key is outside the JSON data model,
//    so no valid instance is refused). Other properties (where additionalProperties
//    allows them) may appear anywhere.
//  * oneOf is accepted when its alternatives are provably disjoint (by type, const/enum,
//    or a required property with disjoint values); otherwise it is an error.
//  * format is asserted (assert_format) for date, time, date-time, duration, uuid,
//    email, hostname, ipv4, ipv6, uri, uri-reference; other formats are errors. With
//    assert_format = false, format is an annotation, as the 2020-12 default.
//
//  * The top-level value has no whitespace before or after it.
//  * $schema must name a JSON Schema draft (json-schema.org); other metaschemas could
//    change the vocabulary, so they are refused.
//
// Keywords that are not implemented (not, if/then/else, contains, uniqueItems: true,
// dependent*, propertyNames, unevaluated*, $dynamicRef, ...) are an InputError naming
// the keyword, never ignored. Annotations ($comment, title, description, default,
// examples, deprecated, readOnly, writeOnly, contentMediaType, ...) are ignored.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "structured/grammar.h"
#include "structured/json_number.h"
#include "structured/limits.h"

namespace deepinfer::structured {

struct JsonSchemaOptions {
  enum class Whitespace { kFlexible, kCompact };
  Whitespace whitespace = Whitespace::kFlexible;
  int max_whitespace = 20;
  bool assert_format = true;
  // Objects declaring at most this many properties track every declared key seen (2^n
  // automaton positions); larger ones track the required keys only (2^r positions), and
  // refuse objects with more than max_required_any_order required properties.
  int max_any_order_properties = 6;
  int max_required_any_order = 12;
  // Digits of generated numbers (see the policy above); -1 = unbounded. Each bound is
  // at most kMaxNumberDigits; integer at least 1, decimal 0 or at least 2.
  NumberDigits number_digits;
};

// The engine's number policy for generation (constraints.h), justified above.
inline constexpr NumberDigits kGenerationNumberDigits{19, 15, 2};
constexpr int kMaxNumberDigits = 1000;

Grammar json_schema_to_grammar(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options,
                               CompileBudget* budget);

// The bracket nesting depth of JSON text (strings skipped), found without parsing.
// Check it before nlohmann parses hostile text: parsing into ordered_json copies object
// members recursively, so very deep input would overflow the stack.
size_t json_text_depth(std::string_view text);

}  // namespace deepinfer::structured
