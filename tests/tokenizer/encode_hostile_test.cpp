// Encoding is fed hostile text and tokenizer.json files: errors are one-line
// InputErrors at load or encode time, large inputs finish quickly, and concurrent
// encodes agree with single-threaded ones.
#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/check.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

std::string fixture(const std::string& name) { return std::string(DEEPINFER_FIXTURES) + "/tokenizer/" + name; }

std::string with_pre_tokenizer(const std::string& pre) {
  return R"({"decoder": {"type": "ByteLevel"}, "pre_tokenizer": )" + pre +
         R"(, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}})";
}

void expect_load_error(const std::string& json, const std::string& needle) {
  try {
    Tokenizer::from_json(json, "t.json");
    ADD_FAILURE() << "no error for: " << json;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(EncodeHostile, MalformedPreTokenizers) {
  expect_load_error(with_pre_tokenizer(R"({"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"})"),
                    "does not compile");
  expect_load_error(with_pre_tokenizer(R"({"type": "Split", "pattern": {"Regex": "[a[b]]"}, "behavior": "Isolated"})"),
                    "nested brackets");
  expect_load_error(with_pre_tokenizer(R"({"type": "Split", "pattern": {"Glob": "a"}, "behavior": "Isolated"})"),
                    "String");
  expect_load_error(with_pre_tokenizer(R"({"type": "Split", "pattern": {"String": "a"}, "behavior": "Sideways"})"),
                    "unknown");
  expect_load_error(with_pre_tokenizer(R"({"type": "Split", "pattern": {"String": "a"}})"), "behavior");
  expect_load_error(with_pre_tokenizer(R"({"type": "ByteLevel", "use_regex": "yes"})"), "boolean");
  expect_load_error(with_pre_tokenizer(R"({"type": "Sequence"})"), "pretokenizers");
  expect_load_error(with_pre_tokenizer(R"([1])"), "'type'");
  std::string deep = R"({"type": "ByteLevel"})";
  for (int i = 0; i < 40; ++i) deep = R"({"type": "Sequence", "pretokenizers": [)" + deep + "]}";
  expect_load_error(with_pre_tokenizer(deep), "nested too deeply");
  expect_load_error(R"({"model": {"vocab": {"a": 0}, "merges": [], "unk_token": 5}})", "unk_token");
}

TEST(EncodeHostile, UnknownUnkTokenFailsAtEncode) {
  const auto tok = Tokenizer::from_json(
      R"({"model": {"vocab": {"a": 0}, "merges": [], "unk_token": "<unk>"}})", "t.json");
  EXPECT_EQ(tok->encode("aaa"), (std::vector<int64_t>{0, 0, 0}));
  EXPECT_THROW(tok->encode("b"), InputError);
}

TEST(EncodeHostile, LargeInputsAreFast) {
  const auto tok = Tokenizer::load(fixture("bpe_tokenizer.json"));
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& text : {std::string(1 << 20, 'a'), std::string(1 << 20, ' '), std::string(1 << 20, '\n'),
                                  std::string(1 << 19, '<'), std::string(1 << 20, '1')}) {
    const auto ids = tok->encode(text);
    EXPECT_EQ(tok->decode(ids, false), text);
  }
  std::string mixed;
  std::mt19937 rng(3);
  while (mixed.size() < (1 << 20)) {
    char32_t cp = char32_t(rng() % 0x10FFFF);
    if (cp >= 0xD800 && cp < 0xE000) continue;
    append_utf8(cp, &mixed);
  }
  EXPECT_EQ(tok->decode(tok->encode(mixed), false), mixed);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 30.0);
}

TEST(EncodeHostile, ConcurrentEncodesAgree) {
  const auto tok = Tokenizer::load(fixture("bpe_variant_bytelevel.json"));
  std::vector<std::string> texts;
  std::mt19937 rng(11);
  const char* pieces[] = {"the ", "hello world", "日本", " <L> ", "<R>  x", "word", "été", "123", "\r\n", "😀"};
  for (int i = 0; i < 200; ++i) {
    std::string t;
    for (int k = 0; k < 12; ++k) t += pieces[rng() % 10];
    texts.push_back(t);
  }
  std::vector<std::vector<int64_t>> expected;
  for (const auto& t : texts) expected.push_back(tok->encode(t));
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 5; ++round)
        for (size_t i = 0; i < texts.size(); ++i) mismatches[w] += tok->encode(texts[i]) != expected[i];
    });
  }
  for (auto& t : threads) t.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace deepinfer
