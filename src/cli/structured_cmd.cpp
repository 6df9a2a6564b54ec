#include "cli/structured_cmd.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "cli/args.h"
#include "common/check.h"
#include "structured/check.h"

namespace deepinfer::cli {
namespace {

const char* kStructuredUsage =
    "usage: deepinfer structured check --jsonl FILE [--out FILE] [--whitespace flexible|compact]\n"
    "                                  [--max-whitespace N] [--assert-format true|false]\n"
    "                                  [--number-digits INT,DEC,EXP]\n"
    "  Each line of FILE ('-' for stdin) holds one of \"schema\", \"regex\" or \"ebnf\" plus\n"
    "  \"instance_text\"; each output line is {\"compiled\", \"accepted\", \"error\"}.\n"
    "  --number-digits bounds the digits of JSON Schema numbers as generation does: digits\n"
    "  without a point, with a point, of the exponent (generation uses 19,15,2; -1 =\n"
    "  unbounded); by default any valid number passes.\n";

int cmd_check(int argc, char** argv) {
  Args a(argc, argv, 3, {"jsonl", "out", "whitespace", "max-whitespace", "assert-format", "number-digits"});
  structured::JsonSchemaOptions options;
  const std::string ws = a.get("whitespace", "flexible");
  DI_CHECK_INPUT(ws == "flexible" || ws == "compact", "--whitespace must be flexible or compact");
  options.whitespace = ws == "compact" ? structured::JsonSchemaOptions::Whitespace::kCompact
                                       : structured::JsonSchemaOptions::Whitespace::kFlexible;
  options.max_whitespace = int(a.get_int("max-whitespace", options.max_whitespace, -1, 1 << 20));
  const std::string fmt = a.get("assert-format", "true");
  DI_CHECK_INPUT(fmt == "true" || fmt == "false", "--assert-format must be true or false");
  options.assert_format = fmt == "true";
  if (a.has("number-digits")) {
    // INT,DEC,EXP, each an integer; the compiler checks their ranges.
    const std::string spec = a.get("number-digits");
    int parts[3];
    char end = 0;
    DI_CHECK_INPUT(std::sscanf(spec.c_str(), "%d,%d,%d%c", &parts[0], &parts[1], &parts[2], &end) == 3,
                   "--number-digits must be INT,DEC,EXP (e.g. 19,15,2), got '", spec, "'");
    options.number_digits = {parts[0], parts[1], parts[2]};
  }

  const std::string path = a.require("jsonl");
  std::ifstream file;
  if (path != "-") {
    file.open(path);
    DI_CHECK_INPUT(file.good(), "cannot open ", path);
  }
  std::istream& in = path == "-" ? std::cin : file;
  std::ofstream out_file;
  if (a.has("out")) {
    out_file.open(a.get("out"));
    DI_CHECK_INPUT(out_file.good(), "cannot write ", a.get("out"));
  }
  std::ostream& out = a.has("out") ? out_file : std::cout;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    out << structured::check_jsonl_line(line, options) << "\n";
  }
  out.flush();
  DI_CHECK_INPUT(out.good(), "writing the output failed");
  return 0;
}

}  // namespace

int cmd_structured(int argc, char** argv) {
  const std::string sub = argc > 2 ? argv[2] : "";
  if (sub == "check") return cmd_check(argc, argv);
  if (sub == "help" || sub == "--help") {
    std::fputs(kStructuredUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "deepinfer: error: unknown structured command '%s'\n%s", sub.c_str(), kStructuredUsage);
  return 2;
}

}  // namespace deepinfer::cli
