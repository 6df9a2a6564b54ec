#include "structured/check.h"

#include <memory>

#include "common/check.h"
#include "structured/structured.h"

namespace deepinfer::structured {

std::string check_jsonl_line(std::string_view line, const JsonSchemaOptions& options) {
  using Json = nlohmann::ordered_json;
  Json out = {{"compiled", false}, {"accepted", false}, {"error", nullptr}};
  try {
    const size_t max_depth = size_t(4 * CompileLimits{}.max_nesting);
    DI_CHECK_INPUT(json_text_depth(line) <= max_depth, "line nested deeper than ", max_depth, " brackets");
    Json in;
    try {
      in = Json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(str_cat("line is not valid JSON: ", e.what()));
    }
    DI_CHECK_INPUT(in.is_object(), "line must be a JSON object");
    const int kinds = int(in.contains("schema")) + int(in.contains("regex")) + int(in.contains("ebnf"));
    DI_CHECK_INPUT(kinds == 1, "line must have exactly one of \"schema\", \"regex\" or \"ebnf\"");
    auto text = in.find("instance_text");
    DI_CHECK_INPUT(text != in.end() && text->is_string(), "line needs a string \"instance_text\"");
    std::shared_ptr<const CompiledGrammar> g;
    if (in.contains("schema")) {
      g = compile_json_schema_value(in["schema"], options);  // no dump(): it recurses per level
    } else if (in.contains("regex")) {
      DI_CHECK_INPUT(in["regex"].is_string(), "\"regex\" must be a string");
      g = compile_regex(in["regex"].get<std::string>());
    } else {
      DI_CHECK_INPUT(in["ebnf"].is_string(), "\"ebnf\" must be a string");
      g = compile_gbnf(in["ebnf"].get<std::string>());
    }
    out["compiled"] = true;
    out["accepted"] = matches(*g, text->get_ref<const std::string&>());
  } catch (const InputError& e) {
    out["error"] = e.what();
  } catch (const std::bad_alloc&) {
    out["error"] = "out of memory";
  }
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace deepinfer::structured
