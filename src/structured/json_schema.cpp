#include "structured/json_schema.h"

#include "common/check.h"

namespace deepinfer::structured {

Grammar json_schema_to_grammar(const nlohmann::ordered_json&, const JsonSchemaOptions&, CompileBudget*) {
  throw InputError("JSON Schema: not implemented yet");
}

}  // namespace deepinfer::structured
