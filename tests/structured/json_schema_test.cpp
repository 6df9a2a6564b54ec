// JSON Schema front end: documented policies (whitespace, escapes, numbers, property
// order), keyword semantics, explicit errors, and hostile schemas.
#include <gtest/gtest.h>

#include "common/check.h"
#include "structured/check.h"
#include "structured/structured.h"

namespace deepinfer::structured {
namespace {

struct Case {
  std::string text;
  bool ok;
};

void expect(const std::string& schema, std::initializer_list<Case> cases, JsonSchemaOptions options = {}) {
  SCOPED_TRACE(schema);
  auto g = compile_json_schema(schema, options);
  for (const Case& c : cases) EXPECT_EQ(matches(*g, c.text), c.ok) << c.text;
}

std::string error_of(const std::string& schema, JsonSchemaOptions options = {}, CompileLimits limits = {}) {
  try {
    compile_json_schema(schema, options, limits);
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

TEST(JsonSchema, AnyValue) {
  expect("{}", {{"1", true}, {"\"x\"", true}, {"[1,{\"a\":null}]", true}, {"{\"a\" : [ true ]}", true},
                {" 1", false}, {"1 ", false}, {"", false}, {"[1,]", false}});
  expect("true", {{"null", true}});
  expect("false", {{"null", false}, {"{}", false}});
}

TEST(JsonSchema, WhitespacePolicy) {
  const std::string s = R"({"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}}})";
  expect(s, {{"{\"a\":[1,2]}", true}, {"{\"a\": [1, 2]}", true}, {"{\n  \"a\": [\n    1,\n    2\n  ]\n}", true},
             {"{\"a\":[1," + std::string(20, ' ') + "2]}", true}, {"{\"a\":[1," + std::string(21, ' ') + "2]}", false}});
  JsonSchemaOptions compact;
  compact.whitespace = JsonSchemaOptions::Whitespace::kCompact;
  expect(s, {{"{\"a\":[1,2]}", true}, {"{\"a\": [1,2]}", false}}, compact);
  JsonSchemaOptions unbounded;
  unbounded.max_whitespace = -1;
  expect(s, {{"{\"a\":[1," + std::string(500, ' ') + "2]}", true}}, unbounded);
}

TEST(JsonSchema, StringEscapePolicy) {
  expect(R"({"type":"string"})",
         {{"\"é\"", true}, {"\"\\u00e9\"", true}, {"\"\\u00E9\"", true}, {"\"\\ud83d\\ude00\"", true},
          {"\"😀\"", true}, {"\"\\n\\t\\\"\\\\\\/\"", true}, {"\"\\u000a\"", true}, {"\"\\u0041\"", false},
          {"\"\\ud83d\"", false}, {"\"a\nb\"", false}, {"\"\\x41\"", false}, {"\"\xC3\"", false}});
  expect(R"({"const":"A\n/é"})", {{"\"A\\n/é\"", true}, {"\"A\\u000A\\/\\u00e9\"", true}, {"\"\\u0041\\n/é\"", false}});
}

TEST(JsonSchema, StringLengthPatternFormat) {
  expect(R"({"type":"string","minLength":2,"maxLength":3})",
         {{"\"ab\"", true}, {"\"abc\"", true}, {"\"a\"", false}, {"\"abcd\"", false}, {"\"é😀\"", true},
          {"\"\\u00e9\\n\"", true}});
  expect(R"({"type":"string","pattern":"^[a-z]+\\d$"})", {{"\"ab1\"", true}, {"\"ab\"", false}, {"\"1ab1\"", false}});
  expect(R"({"type":"string","pattern":"b"})", {{"\"abc\"", true}, {"\"ac\"", false}});
  expect(R"({"type":"string","pattern":"^a","maxLength":2})", {{"\"ab\"", true}, {"\"abc\"", false}, {"\"ba\"", false}});
  expect(R"({"type":"string","format":"date"})",
         {{"\"2024-02-29\"", true}, {"\"2023-02-29\"", false}, {"\"2024-13-01\"", false}});
  expect(R"({"type":"string","format":"uuid"})", {{"\"2eb8aa08-aa98-11ea-b4aa-73b441d16380\"", true}, {"\"x\"", false}});
  JsonSchemaOptions annotate;
  annotate.assert_format = false;
  expect(R"({"type":"string","format":"date"})", {{"\"nope\"", true}}, annotate);
  expect(R"({"format":"x-custom"})", {{"1", true}}, annotate);
}

TEST(JsonSchema, Numbers) {
  expect(R"({"type":"integer"})", {{"0", true}, {"-7", true}, {"1.0", true}, {"1.5", false}, {"01", false},
                                   {"1e2", false}, {"-0", true}});
  expect(R"({"type":"number"})", {{"1.5e-3", true}, {"-0.0", true}, {".5", false}, {"1.", false}});
  expect(R"({"type":"integer","minimum":-3,"exclusiveMaximum":10})",
         {{"-3", true}, {"-4", false}, {"9", true}, {"10", false}, {"9.0", true}, {"0", true}});
  expect(R"({"type":"number","minimum":1.25,"maximum":1.5})",
         {{"1.25", true}, {"1.2499", false}, {"1.5", true}, {"1.50000", true}, {"1.5001", false}, {"1.3", true}});
  expect(R"({"type":"number","exclusiveMinimum":0})", {{"0", false}, {"-0.0", false}, {"0.0001", true}});
  expect(R"({"type":"number","maximum":-1.5})", {{"-1.5", true}, {"-1.49", false}, {"-20", true}, {"0", false}});
  expect(R"({"type":"integer","multipleOf":7})", {{"0", true}, {"21", true}, {"-14", true}, {"15", false}});
  expect(R"({"type":"number","multipleOf":0.25})", {{"0.75", true}, {"2", true}, {"0.3", false}, {"1.250", true}});
  expect(R"({"minimum":3})", {{"\"x\"", true}, {"2", false}});  // numeric keywords only constrain numbers
}

TEST(JsonSchema, EnumAndConst) {
  expect(R"({"enum":[1, "a", null, [1,{"b":2}], {"x":1,"y":2}]})",
         {{"1", true}, {"1.0", true}, {"1e0", true}, {"\"a\"", true}, {"null", true}, {"[1, {\"b\": 2}]", true},
          {"{\"y\":2,\"x\":1}", true}, {"2", false}, {"\"b\"", false}, {"{\"x\":1}", false}});
  expect(R"({"const":1e20})", {{"100000000000000000000", true}, {"1e+20", true}, {"1E20", true}, {"1e21", false}});
  expect(R"({"enum":[1, 2.5, "x"], "type":"number", "maximum": 2})", {{"1", true}, {"2.5", false}, {"\"x\"", false}});
}

TEST(JsonSchema, Objects) {
  const std::string s =
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"],"additionalProperties":false})";
  expect(s, {{"{\"a\":1}", true}, {"{\"a\":1,\"b\":\"x\"}", true}, {"{\"b\":\"x\",\"a\":1}", true}, {"{}", false},
             {"{\"a\":1,\"c\":2}", false}, {"{\"a\":1,\"a\":2}", false}, {"{\"a\":\"1\"}", false}});
  expect(R"({"properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string"}})",
         {{"{\"x\":\"s\",\"a\":1,\"y\":\"t\"}", true}, {"{\"x\":1}", false}, {"{\"a\":\"s\"}", false}});
  expect(R"({"type":"object","required":["k"],"minProperties":2,"maxProperties":3})",
         {{"{\"k\":1}", false}, {"{\"k\":1,\"z\":2}", true}, {"{\"z\":2,\"k\":1,\"y\":3}", true},
          {"{\"k\":1,\"z\":2,\"y\":3,\"w\":4}", false}, {"{\"z\":2,\"y\":3}", false}});
}

// An object schema with n integer properties p0..p(n-1), of which `required` are required.
std::string many_properties(int n, std::initializer_list<int> required, const std::string& extra = "") {
  std::string s = R"({"type":"object","properties":{)";
  for (int i = 0; i < n; ++i) s += std::string(i ? "," : "") + "\"p" + std::to_string(i) + "\":{\"type\":\"integer\"}";
  s += "},\"required\":[";
  bool first = true;
  for (int r : required) s += std::string(first ? "" : ",") + "\"p" + std::to_string(r) + "\"", first = false;
  return s + "]" + extra + "}";
}

TEST(JsonSchema, ManyPropertiesAnyOrder) {
  // Past max_any_order_properties the order stays free; required keys are tracked (each
  // once, all present), optional declared keys are not checked for repeats.
  expect(many_properties(8, {}), {{"{\"p0\":0,\"p5\":5}", true},
                                  {"{\"p5\":5,\"p0\":0}", true},
                                  {"{\"p7\":7,\"p3\":3,\"p6\":6,\"p0\":0,\"p1\":1,\"p5\":5,\"p2\":2,\"p4\":4}", true},
                                  {"{\"p5\":\"x\",\"p0\":0}", false},
                                  {"{\"p0\":0,\"p0\":1}", true},
                                  {"{\"q\":1}", true},
                                  {"{}", true}});
  expect(many_properties(9, {1, 6}, R"(,"additionalProperties":false)"),
         {{"{\"p6\":1,\"p1\":2}", true},
          {"{\"p6\":1,\"p3\":1,\"p1\":2,\"p0\":0}", true},
          {"{\"p8\":8,\"p1\":1,\"p7\":7,\"p6\":6}", true},
          {"{\"p1\":1}", false},
          {"{\"p6\":1}", false},
          {"{\"p1\":1,\"p6\":2,\"p1\":3}", false},
          {"{\"p6\":\"x\",\"p1\":1}", false},
          {"{\"p6\":1,\"p1\":2,\"q\":3}", false},
          {"{}", false}});
  expect(many_properties(12, {0, 2, 4, 6, 8, 10, 11}, R"(,"maxProperties":8)"),
         {{"{\"p11\":1,\"p10\":1,\"p8\":1,\"p6\":1,\"p4\":1,\"p2\":1,\"p0\":1}", true},
          {"{\"p11\":1,\"p10\":1,\"p8\":1,\"p6\":1,\"p4\":1,\"p2\":1,\"p0\":1,\"p1\":1}", true},
          {"{\"p11\":1,\"p10\":1,\"p8\":1,\"p6\":1,\"p4\":1,\"p2\":1,\"p0\":1,\"p1\":1,\"p3\":1}", false},
          {"{\"p11\":1,\"p10\":1,\"p8\":1,\"p6\":1,\"p4\":1,\"p2\":1}", false}});
  // A required set too large to track is refused by name, not narrowed silently.
  EXPECT_NE(error_of(many_properties(14, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})).find("max_required_any_order"),
            std::string::npos);
  JsonSchemaOptions narrow;
  narrow.max_required_any_order = 4;
  EXPECT_NE(error_of(many_properties(9, {0, 1, 2, 3, 4}), narrow).find("max_required_any_order"), std::string::npos);
  expect(many_properties(9, {0, 1, 2, 3}), {{"{\"p3\":1,\"p2\":1,\"p1\":1,\"p0\":1}", true},
                                            {"{\"p3\":1,\"p2\":1,\"p1\":1,\"p8\":1}", false}},
         narrow);
}

TEST(JsonSchema, Arrays) {
  expect(R"({"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"items":false})",
         {{"[]", true}, {"[1]", true}, {"[1,\"a\"]", true}, {"[1,\"a\",2]", false}, {"[\"a\"]", false}});
  expect(R"({"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2})",
         {{"[]", false}, {"[true]", true}, {"[true,false]", true}, {"[true,false,true]", false}});
  expect(R"({"items":[{"type":"integer"}],"additionalItems":{"type":"string"}})",  // draft 7 form
         {{"[1,\"a\",\"b\"]", true}, {"[1,2]", false}});
}

TEST(JsonSchema, Combinators) {
  expect(R"({"anyOf":[{"type":"integer","minimum":10},{"type":"string","maxLength":1}]})",
         {{"12", true}, {"3", false}, {"\"a\"", true}, {"\"ab\"", false}});
  expect(R"({"allOf":[{"type":"integer"},{"minimum":2},{"maximum":4}]})", {{"3", true}, {"5", false}, {"2.5", false}});
  expect(R"({"oneOf":[{"type":"string"},{"type":"integer"}]})", {{"\"s\"", true}, {"1", true}, {"1.5", false}});
  // A discriminated union; without "type":"object" both branches would accept 5.
  expect(R"({"type":"object","oneOf":[{"properties":{"k":{"const":"a"},"v":{"type":"integer"}},"required":["k"]},
                      {"properties":{"k":{"const":"b"},"v":{"type":"string"}},"required":["k"]}]})",
         {{"{\"k\":\"a\",\"v\":1}", true}, {"{\"k\":\"b\",\"v\":\"x\"}", true}, {"{\"k\":\"a\",\"v\":\"x\"}", false}});
  EXPECT_NE(error_of(R"({"oneOf":[{"type":"integer"},{"minimum":2}]})").find("oneOf branches 0 and 1"), std::string::npos);
  EXPECT_FALSE(error_of(R"({"oneOf":[{"properties":{"k":{"const":"a"}},"required":["k"]},
                                     {"properties":{"k":{"const":"b"}},"required":["k"]}]})").empty());
  expect(R"({"not":{"type":"string"}})", {{"1", true}, {"\"s\"", false}});
  expect(R"({"type":"number","not":{"type":"integer"}})", {{"1.5", true}, {"2", false}, {"2.0", false}});
}

TEST(JsonSchema, References) {
  const std::string tree = R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],"additionalProperties":false}},
      "$ref":"#/$defs/node"})";
  expect(tree, {{"{\"v\":1,\"kids\":[{\"v\":2},{\"v\":3,\"kids\":[{\"v\":4}]}]}", true},
                {"{\"v\":1,\"kids\":[{\"v\":\"x\"}]}", false}});
  expect(R"({"$id":"https://example.com/root.json","$defs":{"a":{"$anchor":"A","type":"integer"},
             "b":{"$id":"sub/b.json","type":"string"}},
             "properties":{"x":{"$ref":"#A"},"y":{"$ref":"sub/b.json"},"z":{"$ref":"https://example.com/root.json#/$defs/a"}}})",
         {{"{\"x\":1,\"y\":\"s\",\"z\":2}", true}, {"{\"x\":\"s\"}", false}, {"{\"y\":1}", false}});
  expect(R"({"definitions":{"a":{"type":"boolean"}},"items":{"$ref":"#/definitions/a"}})", {{"[true]", true}, {"[1]", false}});
}

TEST(JsonSchema, UnsupportedKeywordsAreErrors) {
  for (const char* s : {R"({"contains":{}})", R"({"unevaluatedProperties":false})", R"({"if":{},"then":{}})",
                        R"({"patternProperties":{"a":{}}})", R"({"propertyNames":{"maxLength":2}})",
                        R"({"dependentRequired":{"a":["b"]}})", R"({"$dynamicRef":"#x"})",
                        R"({"type":"array","uniqueItems":true})", R"({"format":"iri"})",
                        R"({"not":{"minimum":2}})", R"({"$ref":"http://example.com/s.json"})",
                        R"({"$schema":"http://example.com/meta"})"}) {
    const std::string e = error_of(s);
    EXPECT_FALSE(e.empty()) << s;
  }
  EXPECT_NE(error_of(R"({"properties":{"a":{"contains":{}}}})").find("'contains' is not supported (at '#/properties/a')"),
            std::string::npos);
  // Unknown (non-specification) keywords are ignored, as JSON Schema says.
  expect(R"({"type":"integer","x-vendor":{"anything":1}})", {{"1", true}});
}

TEST(JsonSchema, MalformedKeywordValues) {
  for (const char* s : {R"({"type":5})", R"({"type":"int"})", R"({"minLength":-1})", R"({"minLength":"2"})",
                        R"({"required":"a"})", R"({"enum":3})", R"({"pattern":"(a"})", R"({"allOf":[]})",
                        R"({"multipleOf":0})", R"([1])", R"({"$ref":"#/nope"})", R"({"properties":[]})"}) {
    EXPECT_FALSE(error_of(s).empty()) << s;
  }
  EXPECT_FALSE(error_of("{\"type\":").empty());  // not JSON
}

TEST(JsonSchema, HostileSchemas) {
  // Deep nesting is refused by the depth cap, not by a stack overflow.
  std::string deep;
  for (int i = 0; i < 100000; ++i) deep += "{\"items\":";
  deep += "{}";
  for (int i = 0; i < 100000; ++i) deep += "}";
  EXPECT_NE(error_of(deep).find("nested deeper"), std::string::npos);
  // A reference cycle that consumes nothing.
  EXPECT_NE(error_of(R"({"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"})")
                .find("refers to itself"),
            std::string::npos);
  // Recursion through a property is fine.
  expect(R"({"properties":{"next":{"$ref":"#"}}})", {{"{\"next\":{\"next\":{}}}", true}});
  // Exponential allOf x anyOf expansion hits the alternatives cap.
  std::string blowup = R"({"allOf":[)";
  for (int i = 0; i < 16; ++i) blowup += std::string(i ? "," : "") + R"({"anyOf":[{"minimum":1},{"maximum":5}]})";
  blowup += "]}";
  EXPECT_NE(error_of(blowup).find("alternatives"), std::string::npos);
  // Deeply nested const / enum values are refused too (they are compared and emitted
  // recursively), also through the check-line entry point.
  std::string deep_value(200000, '[');
  deep_value += std::string(200000, ']');
  EXPECT_NE(error_of("{\"const\":" + deep_value + "}").find("nested deeper"), std::string::npos);
  EXPECT_NE(check_jsonl_line("{\"schema\":{\"enum\":[" + deep_value + "]},\"instance_text\":\"1\"}", {})
                .find("nested deeper"),
            std::string::npos);
  // Within the text cap, the value cap still applies.
  std::string mid(500, '[');
  mid += std::string(500, ']');
  EXPECT_NE(error_of("{\"const\":" + mid + "}").find("nested deeper"), std::string::npos);
  // Huge bounds and enums are refused by their caps.
  EXPECT_FALSE(error_of(R"({"type":"string","maxLength":1000000000})").empty());
  EXPECT_FALSE(error_of(R"({"type":"array","minItems":1000000000})").empty());
  CompileLimits small;
  small.max_enum_values = 10;
  EXPECT_NE(error_of(R"({"enum":[1,2,3,4,5,6,7,8,9,10,11]})", {}, small).find("enum"), std::string::npos);
  // A tight time budget stops a large compile.
  CompileLimits quick;
  quick.max_seconds = 1e-4;
  EXPECT_NE(error_of(R"({"type":"string","maxLength":5000,"pattern":"a.*b.*c"})", {}, quick).find("time limit"),
            std::string::npos);
}

TEST(JsonSchema, CheckLines) {
  JsonSchemaOptions o;
  EXPECT_EQ(check_jsonl_line(R"({"schema":{"type":"integer"},"instance_text":"12"})", o),
            R"({"compiled":true,"accepted":true,"error":null})");
  EXPECT_EQ(check_jsonl_line(R"({"regex":"a+","instance_text":"ab"})", o),
            R"({"compiled":true,"accepted":false,"error":null})");
  EXPECT_EQ(check_jsonl_line(R"({"ebnf":"root ::= \"x\"","instance_text":"x"})", o),
            R"({"compiled":true,"accepted":true,"error":null})");
  EXPECT_NE(check_jsonl_line(R"({"schema":{"contains":{}},"instance_text":"[]"})", o)
                .find(R"("compiled":false,"accepted":false,"error":"'contains' is not supported)"),
            std::string::npos);
  EXPECT_NE(check_jsonl_line("not json", o).find("not valid JSON"), std::string::npos);
  EXPECT_NE(check_jsonl_line(R"({"regex":"a"})", o).find("instance_text"), std::string::npos);
  EXPECT_NE(check_jsonl_line(R"({"regex":"a","ebnf":"x","instance_text":""})", o).find("exactly one"),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer::structured
