#include "tokenizer/tokenize_jsonl.h"

#include <nlohmann/json.hpp>
#include <string>

#include "common/check.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {

namespace {

using nlohmann::json;

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json process_line(const Tokenizer& tok, bool decode, const std::string& line) {
  const json in = json::parse(line, nullptr, /*allow_exceptions=*/false);
  DI_CHECK_INPUT(!in.is_discarded(), "not valid JSON");
  DI_CHECK_INPUT(in.is_object(), "expected a JSON object");
  if (!decode) {
    const auto text = in.find("text");
    DI_CHECK_INPUT(text != in.end() && text->is_string(), "expected a string field \"text\"");
    return json{{"ids", tok.encode(text->get_ref<const std::string&>())}};
  }
  const auto ids = in.find("ids");
  DI_CHECK_INPUT(ids != in.end() && ids->is_array(), "expected an array field \"ids\"");
  std::vector<int64_t> list;
  list.reserve(ids->size());
  for (const json& id : *ids) {
    DI_CHECK_INPUT(id.is_number_integer(), "ids must be integers, got ", dump(id));
    DI_CHECK_INPUT(!id.is_number_unsigned() || id.get<uint64_t>() <= uint64_t(INT64_MAX), "token id ", dump(id),
                   " is out of range");
    list.push_back(id.get<int64_t>());
  }
  return json{{"text", tok.decode(list, /*skip_special_tokens=*/false)}};
}

}  // namespace

int tokenize_jsonl(const Tokenizer& tokenizer, bool decode, std::istream& in, std::ostream& out, std::ostream& err) {
  int bad = 0;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      out << dump(process_line(tokenizer, decode, line)) << '\n';
    } catch (const InputError& e) {
      const std::string message = str_cat("line ", number, ": ", e.what());
      out << dump(json{{"error", message}}) << '\n';
      err << "deepinfer: error: " << message << '\n';
      ++bad;
    }
  }
  out.flush();
  return bad;
}

}  // namespace deepinfer
