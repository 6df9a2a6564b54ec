// `deepinfer logits` end to end: the binary writes every position's logits, which
// match the reference in all feeding modes; bad invocations fail with one line.
#include <gtest/gtest.h>

#include "run_cli.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "io/safetensors.h"

namespace deepinfer {
namespace {

const std::string kFixture = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_quant";

using RunResult = testing_cli::CliResult;
RunResult run(const std::string& args) { return testing_cli::run_deepinfer(args); }

TEST(LogitsCommand, AllFeedingModesMatchTheReference) {
  auto ref = SafetensorsFile::open(kFixture + "/reference.safetensors");
  const TensorView* tok = ref->find("tokens");
  ASSERT_NE(tok, nullptr);
  std::vector<int64_t> tokens(tok->numel());
  std::memcpy(tokens.data(), tok->data, tokens.size() * 8);
  std::string list;
  for (size_t i = 0; i < tokens.size(); ++i) list += (i ? "," : "") + std::to_string(tokens[i]);
  const TensorView* expect = ref->find("logits_full");
  const std::string out = ::testing::TempDir() + "/logits_cmd.safetensors";
  for (const std::string mode : {"", "--chunk 3", "--prefill 5"}) {
    SCOPED_TRACE(mode);
    RunResult r = run("logits --model " + kFixture + " --tokens " + list + " " + mode + " --out " + out);
    ASSERT_EQ(r.status, 0) << r.output;
    auto got = SafetensorsFile::open(out);
    const TensorView* l = got->find("logits");
    ASSERT_NE(l, nullptr);
    ASSERT_EQ(l->dtype, DType::F32);
    ASSERT_EQ(l->shape, expect->shape);
    const float* a = reinterpret_cast<const float*>(l->data);
    const float* b = reinterpret_cast<const float*>(expect->data);
    double worst = 0;
    for (int64_t i = 0; i < l->numel(); ++i) worst = std::max(worst, double(std::fabs(a[i] - b[i])));
    EXPECT_LE(worst, 1e-3);
  }
}

TEST(LogitsCommand, BadInvocationsFailWithOneLine) {
  const std::string out = ::testing::TempDir() + "/bad.safetensors";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"logits --model " + kFixture + " --tokens 1,2 --chunk 2 --prefill 1 --out " + out, "mutually exclusive"},
      {"logits --model " + kFixture + " --tokens 1,x --out " + out, "--tokens"},
      {"logits --model " + kFixture + " --tokens 1,99999 --out " + out, "out of range"},
      {"logits --model /nonexistent --tokens 1 --out " + out, "does not exist"},
      {"logits --model " + kFixture + " --tokens 1 --bogus 3 --out " + out, "unknown flag"},
      {"logits --model " + kFixture + " --tokens 1", "--out"},
      {"logits --model " + kFixture + " --tokens 1 --chunk 0 --out " + out, "--chunk"},
      {"nosuchcommand", "unknown command"},
  };
  for (const auto& [args, needle] : cases) {
    SCOPED_TRACE(args);
    RunResult r = run(args);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.output.find("deepinfer: error:"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << r.output;
  }
}

}  // namespace
}  // namespace deepinfer
