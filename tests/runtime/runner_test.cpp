// The engine's runner seam (runtime/runner.h) on the CPU: the CPU runner is the
// oracle model behind the interface, and a device the build or the machine lacks is a
// clear InputError. (The CUDA runner's tests are tests/model_cuda, label gpu.)
#include <gtest/gtest.h>

#include <numeric>

#include "common/check.h"
#include "deepinfer/engine.h"
#include "model/v41/model.h"
#include "runtime/runner.h"

namespace deepinfer {
namespace {

const std::string kModel = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_quant";

TEST(Runner, CpuRunnerIsTheOracleBehindTheInterface) {
  runtime::RunnerOptions o;
  o.max_num_seqs = 2;
  o.num_blocks = 4;
  auto runner = runtime::create_runner(kModel, o);
  EXPECT_EQ(runner->num_blocks(), 4);
  auto model = v41::Model::load(kModel);
  const std::vector<int64_t> a{5, 6, 7, 8, 9, 10, 11}, b{20, 21, 22};
  auto seq_a = model->new_sequence(), seq_b = model->new_sequence();
  const auto want_a = model->forward(seq_a, a), want_b = model->forward(seq_b, b);
  const int64_t vocab = model->config().vocab_size;

  // Two sequences in one batch, in slots 1 and 0 with their own blocks.
  const std::vector<int64_t> blocks_a{0, 1}, blocks_b{2, 3};
  runner->reset_slot(0, 0, 0, {});
  runner->reset_slot(1, 0, 0, {});
  std::vector<runtime::RunItem> items(2);
  items[0].slot = 1;
  items[0].blocks = &blocks_a;
  items[0].tokens = a;
  items[0].all_logits = true;
  items[1].slot = 0;
  items[1].blocks = &blocks_b;
  items[1].tokens = b;  // last row only
  const auto got = runner->forward(items);
  ASSERT_EQ(got.size(), (a.size() + 1) * size_t(vocab));
  EXPECT_TRUE(std::equal(want_a.begin(), want_a.end(), got.begin()));
  EXPECT_TRUE(std::equal(want_b.end() - vocab, want_b.end(), got.begin() + int64_t(a.size()) * vocab));
  EXPECT_EQ(runner->slot_position(1), int64_t(a.size()));
  EXPECT_EQ(runner->slot_position(0), int64_t(b.size()));
}

// Without a block count the CPU pool takes at most half the available host memory, as the
// GPU's takes the free device memory: a config whose context would make the default pool
// larger than the machine gets a smaller one, never an OOM kill halfway through a run.
TEST(Runner, CpuPoolIsSizedByTheAvailableMemory) {
  const ModelConfig cfg = load_model_config(kModel + "/config.json");
  runtime::RunnerOptions o;
  o.default_blocks = 1000;
  const int64_t per_block = v41::HistoryPool::bytes_per_block(cfg, o.block_size);
  ASSERT_GT(per_block, 0);
  o.host_memory_bytes = per_block * 40;
  EXPECT_EQ(runtime::create_runner(kModel, o)->num_blocks(), 20);
  o.host_memory_bytes = per_block * 10000;
  EXPECT_EQ(runtime::create_runner(kModel, o)->num_blocks(), 1000);
  // An explicit count is taken as given, or refused when it cannot fit at all.
  o.host_memory_bytes = per_block * 40;
  o.num_blocks = 30;
  EXPECT_EQ(runtime::create_runner(kModel, o)->num_blocks(), 30);
  o.num_blocks = 41;
  try {
    runtime::create_runner(kModel, o);
    ADD_FAILURE() << "41 blocks accepted in memory for 40";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("do not fit"), std::string::npos) << err.what();
  }
  o.num_blocks = 0;
  o.host_memory_bytes = per_block;
  EXPECT_THROW(runtime::create_runner(kModel, o), InputError);
}

TEST(Runner, UnavailableDevicesAreInputErrors) {
  runtime::RunnerOptions o;
  o.device = "tpu";
  EXPECT_THROW(runtime::create_runner(kModel, o), InputError);
  EngineOptions e;
  e.model_dir = kModel;
  e.device = "tpu";
  EXPECT_THROW(Engine::create(e), InputError);
#ifndef DEEPINFER_HAVE_CUDA
  // A CPU-only build names what is missing.
  o.device = "cuda";
  try {
    runtime::create_runner(kModel, o);
    ADD_FAILURE() << "cuda accepted by a CPU-only build";
  } catch (const InputError& err) {
    EXPECT_NE(std::string(err.what()).find("not available in this build"), std::string::npos) << err.what();
  }
  EXPECT_EQ(runtime::available_devices(), std::vector<std::string>{"cpu"});
#endif
}

}  // namespace
}  // namespace deepinfer
