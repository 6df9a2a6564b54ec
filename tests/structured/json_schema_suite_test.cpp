// The official JSON-Schema-Test-Suite, draft 2020-12 (fetched by
// scripts/fetch_structured_testdata.sh into an ignored cache, never committed).
//
// For every schema that compiles, every valid instance must be accepted and every
// invalid one rejected, each written twice: compactly (nlohmann's dump) and the way
// Python's json.dumps writes it (", " and ": ", non-ASCII as \u escapes). Schemas that
// do not compile must fail with an InputError (a keyword we do not implement), never
// crash or hang. Prints per-file and total counts.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <algorithm>
#include <iterator>
#include <map>

#include "common/check.h"
#include "structured/structured.h"

namespace deepinfer::structured {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

fs::path suite_dir() {
  if (const char* env = std::getenv("DEEPINFER_STRUCTURED_DATA"))
    return fs::path(env) / "JSON-Schema-Test-Suite/tests/draft2020-12";
  return fs::path(DEEPINFER_FIXTURES) / "../../build/.cache/structured/JSON-Schema-Test-Suite/tests/draft2020-12";
}

// json.dumps(value) with Python's defaults: ", " and ": " separators, ensure_ascii.
std::string python_dumps(const Json& v) {
  switch (v.type()) {
    case Json::value_t::array: {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + python_dumps(v[i]);
      return s + "]";
    }
    case Json::value_t::object: {
      std::string s = "{";
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        s += (first ? "" : ", ") + python_dumps(Json(it.key())) + ": " + python_dumps(it.value());
        first = false;
      }
      return s + "}";
    }
    default: return v.dump(-1, ' ', /*ensure_ascii=*/true);
  }
}

// Mismatches that follow from a documented policy (json_schema.h): integers and
// bounded numbers are written without exponent. Each entry is "file: case / test".
const char* const kPolicyDepartures[] = {
    "optional/bignum.json: integer / a bignum is an integer",
    "optional/bignum.json: integer / a negative bignum is an integer",
    "optional/bignum.json: minimum integer comparison / comparison works for very negative numbers",
    "optional/float-overflow.json: all integers are multiples of 0.5, if overflow is handled / valid if optional "
    "overflow handling is implemented",
};

struct Counts {
  int cases = 0, compiled_cases = 0;
  int tests = 0, passed = 0, false_accepts = 0, false_rejects = 0, not_compiled = 0, policy = 0;
  double compile_ms = 0;
  void add(const Counts& o) {
    cases += o.cases, compiled_cases += o.compiled_cases, tests += o.tests, passed += o.passed;
    false_accepts += o.false_accepts, false_rejects += o.false_rejects, not_compiled += o.not_compiled;
    policy += o.policy;
    compile_ms += o.compile_ms;
  }
};

TEST(JsonSchemaSuite, Draft2020_12) {
  const fs::path dir = suite_dir();
  if (!fs::exists(dir)) GTEST_SKIP() << "JSON-Schema-Test-Suite not fetched: run scripts/fetch_structured_testdata.sh";
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::map<std::string, Counts> per_file;
  std::map<std::string, int> errors;
  Counts total, required;
  std::vector<std::string> mismatches;
  for (const fs::path& file : files) {
    const std::string name = fs::relative(file, dir).string();
    std::ifstream in(file);
    const Json cases = Json::parse(in);
    JsonSchemaOptions options;
    // Required tests treat format as an annotation (the 2020-12 default); the optional
    // format tests assert it.
    options.assert_format = name.rfind("optional/format", 0) == 0;
    Counts c;
    for (const Json& tc : cases) {
      ++c.cases;
      std::shared_ptr<const CompiledGrammar> g;
      std::string error;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        g = compile_json_schema(tc["schema"].dump(), options);
      } catch (const InputError& e) {
        error = e.what();
      }
      c.compile_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (!g) {
        c.not_compiled += int(tc["tests"].size());
        c.tests += int(tc["tests"].size());
        ++errors[error.substr(0, error.find(" (at"))];
        continue;
      }
      ++c.compiled_cases;
      for (const Json& t : tc["tests"]) {
        ++c.tests;
        const bool valid = t["valid"].get<bool>();
        const bool a = matches(*g, t["data"].dump());
        const bool b = matches(*g, python_dumps(t["data"]));
        const std::string id =
            name + ": " + tc["description"].get<std::string>() + " / " + t["description"].get<std::string>();
        if (a == valid && b == valid) {
          ++c.passed;
        } else if (std::find(std::begin(kPolicyDepartures), std::end(kPolicyDepartures), id) !=
                   std::end(kPolicyDepartures)) {
          ++c.policy;
        } else {
          ++(valid ? c.false_rejects : c.false_accepts);
          mismatches.push_back(id + (valid ? " (rejected " : " (accepted ") + t["data"].dump() +
                               (a != b ? ", differs by serialization" : "") + ")");
        }
      }
    }
    per_file[name] = c;
    total.add(c);
    if (name.rfind("optional/", 0) != 0) required.add(c);
  }
  // no-cmp: tests of schemas that did not compile; FA / FR: false accepts / rejects;
  // pol: mismatches from a documented policy (kPolicyDepartures).
  std::printf("%-44s %5s %5s %6s %6s %5s %5s %4s %8s\n", "file", "cases", "tests", "passed", "no-cmp", "FA", "FR",
              "pol", "cmp ms");
  for (const auto& [name, c] : per_file)
    std::printf("%-44s %5d %5d %6d %6d %5d %5d %4d %8.1f\n", name.c_str(), c.cases, c.tests, c.passed,
                c.not_compiled, c.false_accepts, c.false_rejects, c.policy, c.compile_ms);
  for (const auto& [label, c] : {std::pair<const char*, Counts>{"required (draft2020-12/*.json)", required},
                                 std::pair<const char*, Counts>{"all (with optional/)", total}})
    std::printf("%-44s %5d %5d %6d %6d %5d %5d %4d %8.1f\n", label, c.cases, c.tests, c.passed, c.not_compiled,
                c.false_accepts, c.false_rejects, c.policy, c.compile_ms);
  std::printf("compile errors by message:\n");
  for (const auto& [msg, n] : errors) std::printf("  %4d  %s\n", n, msg.c_str());
  for (const std::string& m : mismatches) ADD_FAILURE() << m;
}

}  // namespace
}  // namespace deepinfer::structured
