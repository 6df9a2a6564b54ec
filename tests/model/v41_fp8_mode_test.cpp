// --activations fp8 (ops::activations_for / rounding_of) on the CPU model: a checkpoint
// without FP8 weights (the f32 fixture: F32 weights only) has
// nothing for the per-32-block activation quantization to touch, so its logits are the
// bf16 mode's bit for bit. The GPU test CudaModelFp8.Fp8ModeIsBf16ModeWithoutFp8Weights
// asserts the same on the CUDA model.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "golden_feeds.h"
#include "model/v41/model.h"
#include "ops/linear.h"

namespace deepinfer {
namespace {

TEST(V41Fp8Mode, IsBf16ModeWithoutFp8Weights) {
  const std::string dir = std::string(DEEPINFER_FIXTURES) + "/v41_tiny_f32";
  auto m8 = v41::Model::load(dir, {ops::Activations::kFP8});
  auto m16 = v41::Model::load(dir, {ops::Activations::kBF16});
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < 40; ++i) tokens.push_back((i * 7919 + 13) % m8->config().vocab_size);
  const std::vector<size_t> whole = {tokens.size()}, chunks = {17, 1, 22};
  EXPECT_EQ(feed_cpu(*m8, tokens, whole), feed_cpu(*m16, tokens, whole));
  EXPECT_EQ(feed_cpu(*m8, tokens, chunks), feed_cpu(*m16, tokens, chunks));
}

// The trained default model has FP8 weights (attention wkv, the Engram tables): there the
// quantization reaches the logits.
TEST(V41Fp8Mode, ChangesLogitsWithFp8Weights) {
  const std::string dir = std::string(DEEPINFER_FIXTURES) + "/../../models/deepinfer-v41-tiny";
  auto m8 = v41::Model::load(dir, {ops::Activations::kFP8});
  auto m16 = v41::Model::load(dir, {ops::Activations::kBF16});
  std::vector<int64_t> tokens;
  for (int64_t i = 0; i < 24; ++i) tokens.push_back((i * 7919 + 13) % m8->config().vocab_size);
  EXPECT_NE(feed_cpu(*m8, tokens, {tokens.size()}), feed_cpu(*m16, tokens, {tokens.size()}));
}

}  // namespace
}  // namespace deepinfer
