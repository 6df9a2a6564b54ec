// Structured outputs: constrain generation to a regular expression, a JSON Schema or a
// GBNF grammar by masking, at every step, the tokens that cannot extend a valid prefix.
//
// The pieces, in the order a request uses them:
//   1. compile_regex / compile_json_schema / compile_gbnf: constraint text ->
//      CompiledGrammar (byte-level rule automata; vocabulary independent, cacheable by
//      the constraint text). Hostile input fails with InputError (limits.h).
//   2. TokenMasker (token_masker.h): a CompiledGrammar bound to a VocabIndex
//      (vocab.h), holding the per-state token-mask cache. Share it between requests.
//   3. GrammarMatcher (matcher.h): one per request; fills the bitmask, accepts tokens,
//      rolls back, reports the forced continuation.
//
//   auto vocab = std::make_shared<VocabIndex>(token_vocab);        // once per tokenizer
//   auto masker = std::make_shared<TokenMasker>(compile_regex("[0-9]+"), vocab);
//   GrammarMatcher m(masker);
//
// matches() checks a whole byte string without any vocabulary.
#pragma once

#include <memory>
#include <string_view>

#include "structured/compiled_grammar.h"
#include "structured/json_schema.h"
#include "structured/limits.h"

namespace deepinfer::structured {

// The whole input must match the regex (regex.h describes the dialect).
std::shared_ptr<const CompiledGrammar> compile_regex(std::string_view pattern, const CompileLimits& limits = {});

// A GBNF grammar in llama.cpp's syntax (gbnf.h).
std::shared_ptr<const CompiledGrammar> compile_gbnf(std::string_view text, const CompileLimits& limits = {});

// A JSON Schema (draft 2020-12) given as JSON text (json_schema.h).
std::shared_ptr<const CompiledGrammar> compile_json_schema(std::string_view schema_json,
                                                           const JsonSchemaOptions& options = {},
                                                           const CompileLimits& limits = {});
// The same for a schema already parsed.
std::shared_ptr<const CompiledGrammar> compile_json_schema_value(const nlohmann::ordered_json& schema,
                                                           const JsonSchemaOptions& options = {},
                                                           const CompileLimits& limits = {});

// Whether the bytes are a complete match of the grammar.
bool matches(const CompiledGrammar& grammar, std::string_view bytes);

}  // namespace deepinfer::structured
