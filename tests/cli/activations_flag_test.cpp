// --activations f32|bf16 (generate, serve, logits; EngineOptions::activations): a bad
// value is one error line naming the flag on every command; bf16 reaches the CPU model
// (its logits move by bf16-rounding amounts and stay close to the f32 ones).
#include <gtest/gtest.h>

#include "run_cli.h"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "common/check.h"
#include "deepinfer/engine.h"
#include "io/safetensors.h"
#include "runtime/runner.h"

namespace deepinfer {
namespace {

const std::string kModel = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_quant";

using RunResult = testing_cli::CliResult;
RunResult run(const std::string& args) { return testing_cli::run_deepinfer(args); }

TEST(ActivationsFlag, ParseAcceptsF32Bf16AndFp8Only) {
  EXPECT_EQ(runtime::parse_activations("f32", "--activations"), ops::Activations::kF32);
  EXPECT_EQ(runtime::parse_activations("bf16", "--activations"), ops::Activations::kBF16);
  EXPECT_EQ(runtime::parse_activations("fp8", "--activations"), ops::Activations::kFP8);
  for (const char* v : {"", "BF16", "fp32", "fp16", "bf16 ", "FP8", "e4m3"}) {
    SCOPED_TRACE(v);
    try {
      runtime::parse_activations(v, "--activations");
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("--activations must be f32, bf16 or fp8, got '") + v + "'");
    }
  }
}

TEST(ActivationsFlag, BadValuesFailWithOneLine) {
  const std::string out = ::testing::TempDir() + "/act_flag.safetensors";
  for (const std::string& args :
       {"logits --model " + kModel + " --tokens 1,2 --activations fp16 --out " + out,
        "generate --model " + kModel + " --prompt-ids 5,6 --max-tokens 1 --activations fp16",
        "serve --model " + kModel + " --port 0 --activations fp16"}) {
    SCOPED_TRACE(args);
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.output.find("deepinfer: error: --activations must be f32, bf16 or fp8, got 'fp16'"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  }
}

std::vector<float> logits_of(const std::string& path) {
  auto f = SafetensorsFile::open(path);
  const TensorView* t = f->find("logits");
  EXPECT_NE(t, nullptr);
  std::vector<float> v(t ? t->numel() : 0);
  if (t) std::memcpy(v.data(), t->data, v.size() * 4);
  return v;
}

// logits --activations bf16 on the CPU: different bits from f32 (x was rounded), within
// bf16-rounding distance; generate and the default (f32) run.
TEST(ActivationsFlag, Bf16ReachesTheCpuModel) {
  const std::string a = ::testing::TempDir() + "/act_f32.safetensors",
                    b = ::testing::TempDir() + "/act_bf16.safetensors";
  const std::string common = "logits --model " + kModel + " --tokens 5,6,7,8,9,10 --device cpu";
  RunResult r = run(common + " --out " + a);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run(common + " --activations bf16 --out " + b);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto f = logits_of(a), g = logits_of(b);
  ASSERT_EQ(f.size(), g.size());
  ASSERT_FALSE(f.empty());
  double diff = 0, sum = 0, ss = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    const double d = std::fabs(double(f[i]) - double(g[i]));
    diff = std::max(diff, d), sum += d, ss += double(f[i]) * f[i];
  }
  const double rms = std::sqrt(ss / double(f.size())), mean = sum / double(f.size());
  std::printf("[ metric ] logits bf16 vs f32 (cpu): max|diff| %.3g mean|diff| %.3g rms %.3g\n", diff, mean, rms);
  EXPECT_GT(diff, 0.0);
  EXPECT_LT(mean, 0.05 * rms);  // a perturbation, not another model
  r = run("generate --model " + kModel + " --prompt-ids 5,6 --max-tokens 2 --activations bf16");
  EXPECT_EQ(r.status, 0) << r.output;
}

// logits --activations fp8 on the CPU (the quant fixture's dense linears are FP8): the
// dense FP8 linears' x quantized per 32-K block, bf16 elsewhere, so the logits leave both
// the bf16 and the f32 run's, as a perturbation (e4m3 keeps 3 mantissa bits: far coarser
// than bf16's rounding, still not another model).
TEST(ActivationsFlag, Fp8ReachesTheCpuModel) {
  const std::string a = ::testing::TempDir() + "/act8_f32.safetensors",
                    b = ::testing::TempDir() + "/act8_bf16.safetensors",
                    c = ::testing::TempDir() + "/act8_fp8.safetensors";
  const std::string common = "logits --model " + kModel + " --tokens 5,6,7,8,9,10 --device cpu";
  RunResult r = run(common + " --out " + a);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run(common + " --activations bf16 --out " + b);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run(common + " --activations fp8 --out " + c);
  ASSERT_EQ(r.status, 0) << r.output;
  const auto f = logits_of(a), g = logits_of(b), h = logits_of(c);
  ASSERT_EQ(f.size(), h.size());
  ASSERT_EQ(g.size(), h.size());
  ASSERT_FALSE(f.empty());
  double vs_bf16 = 0, vs_f32 = 0, sum = 0, ss = 0;
  for (size_t i = 0; i < f.size(); ++i) {
    ASSERT_TRUE(std::isfinite(h[i])) << i;
    vs_bf16 = std::max(vs_bf16, std::fabs(double(h[i]) - double(g[i])));
    const double d = std::fabs(double(h[i]) - double(f[i]));
    vs_f32 = std::max(vs_f32, d), sum += d, ss += double(f[i]) * f[i];
  }
  const double rms = std::sqrt(ss / double(f.size())), mean = sum / double(f.size());
  std::printf("[ metric ] logits fp8 (cpu): max|fp8 - bf16| %.3g max|fp8 - f32| %.3g mean %.3g rms %.3g\n", vs_bf16,
              vs_f32, mean, rms);
  EXPECT_GT(vs_bf16, 0.0);
  EXPECT_GT(vs_f32, 0.0);
  // Measured 0.25 rms (the tiny random fixture amplifies the e4m3 rounding); another
  // model's logits would sit ~1.4 rms away.
  EXPECT_LT(mean, 0.5 * rms);
  r = run("generate --model " + kModel + " --prompt-ids 5,6 --max-tokens 2 --activations fp8");
  EXPECT_EQ(r.status, 0) << r.output;
}

TEST(ActivationsFlag, EngineOptionsAreChecked) {
  EngineOptions o;
  o.model_dir = kModel;
  o.activations = "half";
  try {
    Engine::create(o);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("activations must be f32, bf16 or fp8, got 'half'"), std::string::npos) << e.what();
  }
  o.activations = "bf16";
  EXPECT_NO_THROW(Engine::create(o));
}

// --bf16-weights off|on|auto (EngineOptions::bf16_weights): spelling checked on every
// command and device, "on" refused without bf16 activations (one line), and accepted
// with them on the CPU, which ignores it (its linears read the mapped weights).
TEST(Bf16WeightsFlag, ParseAndPairing) {
  for (const char* v : {"off", "on", "auto"}) EXPECT_NO_THROW(runtime::check_bf16_weights_for(v, "bf16", "--bf16-weights"));
  EXPECT_NO_THROW(runtime::check_bf16_weights_for("auto", "f32", "--bf16-weights"));
  EXPECT_NO_THROW(runtime::check_bf16_weights_for("off", "f32", "--bf16-weights"));
  for (const char* v : {"", "ON", "true", "1"}) {
    SCOPED_TRACE(v);
    try {
      runtime::check_bf16_weights(v, "--bf16-weights");
      ADD_FAILURE() << "accepted";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), std::string("--bf16-weights must be off, on or auto, got '") + v + "'");
    }
  }
  EXPECT_THROW(runtime::check_bf16_weights_for("on", "f32", "--bf16-weights"), InputError);
}

TEST(Bf16WeightsFlag, BadValuesFailWithOneLine) {
  const std::string out = ::testing::TempDir() + "/bf16w_flag.safetensors";
  for (const std::string& args :
       {"logits --model " + kModel + " --tokens 1,2 --bf16-weights yes --out " + out,
        "generate --model " + kModel + " --prompt-ids 5,6 --max-tokens 1 --bf16-weights yes",
        "serve --model " + kModel + " --port 0 --bf16-weights yes"}) {
    SCOPED_TRACE(args);
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.output.find("deepinfer: error: --bf16-weights must be off, on or auto, got 'yes'"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  }
  for (const std::string& args :
       {"logits --model " + kModel + " --tokens 1,2 --bf16-weights on --out " + out,
        "generate --model " + kModel + " --prompt-ids 5,6 --max-tokens 1 --bf16-weights on",
        "serve --model " + kModel + " --port 0 --bf16-weights on"}) {
    SCOPED_TRACE(args);
    const RunResult r = run(args);
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.output.find("deepinfer: error: --bf16-weights on needs bf16 or fp8 activations"), std::string::npos)
        << r.output;
    EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << "one line: " << r.output;
  }
}

TEST(Bf16WeightsFlag, CpuIgnoresItAndEngineChecksIt) {
  const std::string a = ::testing::TempDir() + "/bf16w_off.safetensors",
                    b = ::testing::TempDir() + "/bf16w_on.safetensors";
  const std::string common = "logits --model " + kModel + " --tokens 5,6,7 --device cpu --activations bf16";
  RunResult r = run(common + " --out " + a);
  ASSERT_EQ(r.status, 0) << r.output;
  r = run(common + " --bf16-weights on --out " + b);
  ASSERT_EQ(r.status, 0) << r.output;
  EXPECT_EQ(logits_of(a), logits_of(b));
  EngineOptions o;
  o.model_dir = kModel;
  o.bf16_weights = "on";
  try {
    Engine::create(o);
    ADD_FAILURE() << "accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("bf16_weights on needs bf16 or fp8 activations"), std::string::npos)
        << e.what();
  }
  o.bf16_weights = "sometimes";
  o.activations = "bf16";
  EXPECT_THROW(Engine::create(o), InputError);
  o.bf16_weights = "auto";
  EXPECT_NO_THROW(Engine::create(o));
}

}  // namespace
}  // namespace deepinfer
