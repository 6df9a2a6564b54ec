// tokenizer.json is hostile input: every malformed file must throw InputError with a
// one-line message, never crash.
#include <gtest/gtest.h>

#include <string>

#include "common/check.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

std::string with_model(const std::string& model, const std::string& rest = "") {
  return R"({"decoder": {"type": "ByteLevel"}, "model": )" + model + rest + "}";
}

const char* kGoodModel = R"({"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]})";

void expect_input_error(const std::string& json, const std::string& needle) {
  try {
    Tokenizer::from_json(json, "test.json");
    ADD_FAILURE() << "no error for: " << json;
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(needle), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

TEST(MalformedTokenizerTest, GoodBaseLoads) {
  const auto tok = Tokenizer::from_json(with_model(kGoodModel), "test.json");
  EXPECT_EQ(tok->size(), 3);
  EXPECT_EQ(tok->decode({0, 1, 2}, false), "abab");
  // Pair-form merges are accepted too.
  Tokenizer::from_json(with_model(R"({"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]})"), "t");
}

TEST(MalformedTokenizerTest, Rejected) {
  expect_input_error("", "not valid JSON");
  expect_input_error("{\"model\": ", "not valid JSON");
  expect_input_error("[1, 2]", "top level");
  expect_input_error(R"({"decoder": null})", "missing object 'model'");
  expect_input_error(with_model(R"({"type": "WordPiece", "vocab": {}, "merges": []})"), "not supported");
  expect_input_error(with_model(R"({"type": "BPE", "merges": []})"), "model.vocab");
  expect_input_error(with_model(R"({"type": "BPE", "vocab": {"a": 0}})"), "model.merges");
  expect_input_error(with_model(R"({"vocab": {"a": -1}, "merges": []})"), "outside");
  expect_input_error(with_model(R"({"vocab": {"a": 1.5}, "merges": []})"), "integer id");
  expect_input_error(with_model(R"({"vocab": {"a": "0"}, "merges": []})"), "integer id");
  expect_input_error(with_model(R"({"vocab": {"a": 4294967296}, "merges": []})"), "outside");
  expect_input_error(with_model(R"({"vocab": {"a": 16777216}, "merges": []})"), "outside");
  expect_input_error(with_model(R"({"vocab": {"a": 0, "b": 0}, "merges": []})"), "used by both");
  expect_input_error(with_model(R"({"vocab": {"a": 0, "b": 1}, "merges": ["a c"]})"), "not in the vocabulary");
  expect_input_error(with_model(R"({"vocab": {"a": 0, "b": 1}, "merges": ["a b"]})"), "makes \"ab\"");
  expect_input_error(with_model(R"({"vocab": {"a": 0, "b": 1}, "merges": ["a b c"]})"), "one space");
  expect_input_error(with_model(R"({"vocab": {"a": 0, "b": 1}, "merges": ["ab"]})"), "one space");
  expect_input_error(with_model(R"({"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a"]]})"), "pair of strings");
  expect_input_error(with_model(R"({"vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"], "a b"]})"),
                     "pair of strings");
  expect_input_error(with_model(R"({"vocab": {"a": 0}, "merges": {}})"), "must be an array");
  expect_input_error(with_model(R"({"vocab": {"a": 0}, "merges": [], "dropout": 1.5})"), "dropout");
  expect_input_error(with_model(R"({"vocab": {"a": 0}, "merges": [], "continuing_subword_prefix": 3})"),
                     "continuing_subword_prefix");
  expect_input_error(with_model(kGoodModel, R"(, "added_tokens": [{"id": 3}])"), "no string 'content'");
  expect_input_error(with_model(kGoodModel, R"(, "added_tokens": [{"id": 3, "content": 5}])"), "content");
  expect_input_error(with_model(kGoodModel, R"(, "added_tokens": [{"content": "x"}])"), "has no 'id'");
  expect_input_error(with_model(kGoodModel, R"(, "added_tokens": [{"id": -4, "content": "x"}])"), "outside");
  expect_input_error(with_model(kGoodModel, R"(, "added_tokens": [{"id": 3, "content": "x", "special": 1}])"),
                     "boolean");
  expect_input_error(with_model(kGoodModel, R"(, "added_tokens": {"x": 1})"), "must be an array");
  expect_input_error(R"({"decoder": {"type": "WordPiece"}, "model": )" + std::string(kGoodModel) + "}",
                     "decoder type 'WordPiece'");
  expect_input_error(R"({"decoder": {"type": "Sequence"}, "model": )" + std::string(kGoodModel) + "}", "decoders");
  expect_input_error(R"({"decoder": 3, "model": )" + std::string(kGoodModel) + "}", "decoder must be");
}

TEST(MalformedTokenizerTest, UnsupportedNormalizerOnlyMattersWhenUsed) {
  const std::string norm = R"(, "normalizer": {"type": "Precompiled", "precompiled_charsmap": ""})";
  // No normalized added token: loads.
  Tokenizer::from_json(with_model(kGoodModel, norm), "t");
  expect_input_error(with_model(kGoodModel, norm + R"(, "added_tokens": [{"id": 3, "content": "x"}])"),
                     "'Precompiled' is not supported");
}

TEST(MalformedTokenizerTest, DeepNestingDoesNotCrash) {
  std::string deep(100000, '[');
  expect_input_error(deep, "not valid JSON");
  std::string nested = R"({"type": "ByteLevel"})";
  for (int i = 0; i < 100; ++i) nested = R"({"type": "Sequence", "decoders": [)" + nested + "]}";
  expect_input_error(R"({"decoder": )" + nested + R"(, "model": )" + kGoodModel + "}", "nested too deeply");
}

TEST(MalformedTokenizerTest, MissingFile) {
  EXPECT_THROW(Tokenizer::load("/nonexistent/tokenizer.json"), InputError);
}

}  // namespace
}  // namespace deepinfer
