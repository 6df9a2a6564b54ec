#include "structured/structured.h"

#include "common/check.h"
#include "structured/earley.h"
#include "structured/gbnf.h"
#include "structured/regex.h"

namespace deepinfer::structured {

std::shared_ptr<const CompiledGrammar> compile_regex(std::string_view pattern, const CompileLimits& limits) {
  CompileBudget budget(limits);
  Grammar g;
  const Grammar::RuleId root = g.add_rule("root");
  g.set_body(root, g.fsa(regex_to_fsa(pattern, RegexOptions{}, &budget)));
  g.set_root(root);
  return compile_grammar(g, &budget);
}

std::shared_ptr<const CompiledGrammar> compile_gbnf(std::string_view text, const CompileLimits& limits) {
  CompileBudget budget(limits);
  return compile_grammar(parse_gbnf(text, &budget), &budget);
}

std::shared_ptr<const CompiledGrammar> compile_json_schema(std::string_view schema_json,
                                                           const JsonSchemaOptions& options,
                                                           const CompileLimits& limits) {
  CompileBudget budget(limits);
  DI_CHECK_INPUT(schema_json.size() <= limits.max_input_bytes, "schema longer than ", limits.max_input_bytes,
                 " bytes");
  DI_CHECK_INPUT(json_text_depth(schema_json) <= size_t(4 * limits.max_nesting), "schema nested deeper than ",
                 4 * limits.max_nesting, " brackets");
  nlohmann::ordered_json schema;
  try {
    schema = nlohmann::ordered_json::parse(schema_json);
  } catch (const nlohmann::json::exception& e) {
    throw InputError(str_cat("schema is not valid JSON: ", e.what()));
  }
  return compile_grammar(json_schema_to_grammar(schema, options, &budget), &budget);
}

std::shared_ptr<const CompiledGrammar> compile_json_schema_value(const nlohmann::ordered_json& schema,
                                                           const JsonSchemaOptions& options,
                                                           const CompileLimits& limits) {
  CompileBudget budget(limits);
  return compile_grammar(json_schema_to_grammar(schema, options, &budget), &budget);
}

bool matches(const CompiledGrammar& grammar, std::string_view bytes) {
  EarleyParser p(&grammar);
  p.start_root();
  for (unsigned char c : bytes)
    if (!p.push(c)) return false;
  return p.can_end();
}

}  // namespace deepinfer::structured
