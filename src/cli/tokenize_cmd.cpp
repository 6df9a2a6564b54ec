#include "cli/tokenize_cmd.h"

#include <iostream>
#include <string>

#include "common/check.h"
#include "tokenizer/tokenize_jsonl.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {

int cmd_tokenize(int argc, char** argv) {
  std::string tokenizer, model;
  bool decode = false;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i], value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
    }
    if (arg == "--decode") {
      DI_CHECK_INPUT(eq == std::string::npos, "flag --decode takes no value");
      DI_CHECK_INPUT(!decode, "flag --decode given twice");
      decode = true;
      continue;
    }
    DI_CHECK_INPUT(arg == "--tokenizer" || arg == "--model", "unexpected argument '", argv[i],
                   "' (usage: deepinfer tokenize --tokenizer FILE | --model DIR [--decode])");
    if (eq == std::string::npos) {
      DI_CHECK_INPUT(i + 1 < argc, "flag ", arg, " needs a value");
      value = argv[++i];
    }
    std::string& target = arg == "--tokenizer" ? tokenizer : model;
    DI_CHECK_INPUT(target.empty(), "flag ", arg, " given twice");
    DI_CHECK_INPUT(!value.empty(), "flag ", arg, " needs a non-empty value");
    target = value;
  }
  DI_CHECK_INPUT(tokenizer.empty() != model.empty(), "give exactly one of --tokenizer FILE and --model DIR");
  const auto tok = Tokenizer::load(tokenizer.empty() ? model + "/tokenizer.json" : tokenizer);
  std::ios::sync_with_stdio(false);
  return tokenize_jsonl(*tok, decode, std::cin, std::cout, std::cerr) > 0 ? 1 : 0;
}

}  // namespace deepinfer::cli
