// `deepinfer eval-ppl`: window arithmetic, batch invariance, input errors (on the tiny
// random fixture), and agreement with the transformers reference on the trained model
// models/deepinfer-v41-tiny (reference numbers from tools/train_tiny.py eval, stored in
// bench/results/train_tiny/reference_ppl.json).
#include <gtest/gtest.h>

#include "run_cli.h"
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const fs::path kRepo = fs::path(DEEPINFER_FIXTURES).parent_path().parent_path();
const std::string kFixture = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_quant";

struct CmdResult {
  int status = -1;
  std::string out;  // stdout and stderr together
};

CmdResult run(const std::string& args) {
  const auto r = deepinfer::testing_cli::run_deepinfer("eval-ppl " + args);
  return {r.status, r.output};
}

Json run_json(const std::string& args) {
  CmdResult r = run(args);
  EXPECT_EQ(r.status, 0) << r.out;
  return Json::parse(r.out);
}

std::string write_text(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("eval_ppl_test_" + name);
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

std::string sample_text() {
  std::string t;
  for (int i = 0; i < 12; ++i) t += "The model token layer cache, window index source: compressed attention expert.\n";
  return t;
}

TEST(EvalPpl, NonOverlappingWindows) {
  const std::string text = write_text("a.txt", sample_text());
  Json j = run_json("--model " + kFixture + " --text " + text + " --context 16");
  const int64_t T = j["text_tokens"], W = j["windows"];
  ASSERT_GT(T, 40);
  const int64_t starts = (T + 15) / 16;  // a last window of one token scores nothing and is dropped
  EXPECT_EQ(W, starts - (T % 16 == 1 ? 1 : 0));
  // every window's first token is context only
  EXPECT_EQ(j["tokens"].get<int64_t>(), T - starts);
  EXPECT_NEAR(j["ppl"].get<double>(), std::exp(j["nll"].get<double>()), 1e-9 * j["ppl"].get<double>());
  EXPECT_NEAR(j["nll"].get<double>() * j["tokens"].get<double>(), j["nll_sum"].get<double>(), 1e-6);
  EXPECT_TRUE(std::isfinite(j["nll"].get<double>()));
}

TEST(EvalPpl, StridedWindowsScoreEveryTargetOnce) {
  const std::string text = write_text("b.txt", sample_text());
  Json j = run_json("--model " + kFixture + " --text " + text + " --context 16 --stride 5");
  EXPECT_EQ(j["tokens"].get<int64_t>(), j["text_tokens"].get<int64_t>() - 1);
}

TEST(EvalPpl, BatchDoesNotChangeTheResult) {
  const std::string text = write_text("c.txt", sample_text());
  Json one = run_json("--model " + kFixture + " --text " + text + " --context 12 --stride 7 --batch 1");
  Json many = run_json("--model " + kFixture + " --text " + text + " --context 12 --stride 7 --batch 5");
  EXPECT_EQ(one["tokens"], many["tokens"]);
  EXPECT_EQ(one["nll_sum"].get<double>(), many["nll_sum"].get<double>());
}

TEST(EvalPpl, BadInputsAreOneLineErrors) {
  const std::string text = write_text("d.txt", sample_text());
  const std::string empty = write_text("empty.txt", "");
  const std::string bad_utf8 = write_text("bad.txt", "abc \xff\xfe def");
  for (const std::string& args :
       {std::string("--model ") + kFixture, "--text " + text,
        "--model " + kFixture + " --text /nonexistent/file.txt",
        "--model /nonexistent/model --text " + text,
        "--model " + kFixture + " --text " + empty,
        "--model " + kFixture + " --text " + bad_utf8,
        "--model " + kFixture + " --text " + text + " --context 1",
        "--model " + kFixture + " --text " + text + " --context 8 --stride 9",
        "--model " + kFixture + " --text " + text + " --stride 0",
        "--model " + kFixture + " --text " + text + " --batch 0",
        "--model " + kFixture + " --text " + text + " --context x",
        "--model " + kFixture + " --text " + text + " --bogus 1"}) {
    CmdResult r = run(args);
    EXPECT_EQ(r.status, 2) << args << "\n" << r.out;
    EXPECT_EQ(r.out.rfind("deepinfer: error: ", 0), 0u) << args << "\n" << r.out;
    EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << args << "\n" << r.out;
  }
}

// The trained checkpoint against the transformers reference (fp32, cached path).
TEST(EvalPpl, TrainedModelMatchesTheReference) {
  const fs::path model = kRepo / "models" / "deepinfer-v41-tiny";
  const fs::path results = kRepo / "bench" / "results" / "train_tiny";
  ASSERT_TRUE(fs::exists(model / "config.json")) << "no " << model;  // committed with the repository
  Json ref = Json::parse(std::ifstream(results / "reference_ppl.json"))["heldout_own_small.txt"]["reference_cpu"];
  Json j = run_json("--model " + model.string() + " --text " + (results / "heldout_own_small.txt").string() +
                    " --context " + std::to_string(ref["context"].get<int64_t>()) + " --batch 2");
  EXPECT_EQ(j["tokens"], ref["tokens"]);
  EXPECT_NEAR(j["ppl"].get<double>() / ref["ppl"].get<double>(), 1.0, 1e-4) << j.dump() << "\n" << ref.dump();
}

}  // namespace
