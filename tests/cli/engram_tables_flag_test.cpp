// --engram-tables auto|device|host (generate, serve, logits; EngineOptions::engram_tables):
// the spelling is checked on every device, so a typo is one error line whether or not
// the build or the run uses CUDA; the CPU backend accepts every valid value and ignores
// it (its tables stay in the mapped checkpoint). Placement itself: tests/model_cuda.
#include <gtest/gtest.h>

#include "run_cli.h"

#include <array>
#include <cstdio>
#include <string>

#include "common/check.h"
#include "deepinfer/engine.h"
#include "runtime/runner.h"

namespace deepinfer {
namespace {

const std::string kModel = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_f32";

using RunResult = testing_cli::CliResult;
RunResult run(const std::string& args) { return testing_cli::run_deepinfer(args); }

TEST(EngramTablesFlag, CheckAcceptsTheThreeValuesOnly) {
  for (const char* v : {"auto", "device", "host"}) EXPECT_NO_THROW(runtime::check_engram_tables(v, "--engram-tables"));
  for (const char* v : {"", "Host", "cpu", "gpu", "device "}) {
    SCOPED_TRACE(v);
    try {
      runtime::check_engram_tables(v, "--engram-tables");
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("--engram-tables must be auto, device or host, got '") + v + "'");
    }
  }
}

TEST(EngramTablesFlag, BadValuesFailWithOneLine) {
  const std::string out = ::testing::TempDir() + "/engram_flag.safetensors";
  for (const std::string& args :
       {"logits --model " + kModel + " --tokens 1,2 --engram-tables pinned --out " + out,
        "generate --model " + kModel + " --prompt-ids 5,6 --max-tokens 1 --engram-tables pinned",
        "serve --model " + kModel + " --port 0 --engram-tables pinned"}) {
    SCOPED_TRACE(args);
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.output.find("deepinfer: error: --engram-tables must be auto, device or host, got 'pinned'"),
              std::string::npos)
        << r.output;
  }
}

// The CPU backend ignores a valid placement: the logits are those of the default.
TEST(EngramTablesFlag, TheCpuIgnoresAValidValue) {
  const std::string a = ::testing::TempDir() + "/engram_flag_a.safetensors",
                    b = ::testing::TempDir() + "/engram_flag_b.safetensors";
  const std::string common = "logits --model " + kModel + " --tokens 5,6,7,8 --device cpu";
  RunResult r = run(common + " --out " + a);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run(common + " --engram-tables host --out " + b);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run("generate --model " + kModel + " --prompt-ids 5,6 --max-tokens 2 --engram-tables device");
  EXPECT_EQ(r.status, 0) << r.output;
  FILE* fa = std::fopen(a.c_str(), "rb");
  FILE* fb = std::fopen(b.c_str(), "rb");
  ASSERT_TRUE(fa && fb);
  std::string ca, cb;
  std::array<char, 4096> buf;
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), fa)) > 0;) ca.append(buf.data(), n);
  for (size_t n; (n = fread(buf.data(), 1, buf.size(), fb)) > 0;) cb.append(buf.data(), n);
  std::fclose(fa);
  std::fclose(fb);
  EXPECT_FALSE(ca.empty());
  EXPECT_EQ(ca, cb);
}

TEST(EngramTablesFlag, EngineOptionsAreChecked) {
  EngineOptions o;
  o.model_dir = kModel;
  o.engram_tables = "pinned";
  try {
    Engine::create(o);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("engram_tables must be auto, device or host"), std::string::npos) << e.what();
  }
  o.engram_tables = "host";  // valid; the CPU runner ignores it
  EXPECT_NO_THROW(Engine::create(o));
}

}  // namespace
}  // namespace deepinfer
