#include "sample/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

#include "common/check.h"

namespace deepinfer::sampling {
namespace {

using Json = nlohmann::json;
constexpr int64_t kVocab = 1000;

// Runs fn, expects an InputError, and returns its message.
std::string input_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const InputError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no InputError";
  return "";
}

TEST(SamplingParams, DefaultsAreValid) {
  SamplingParams p;
  EXPECT_NO_THROW(p.validate(kVocab));
  EXPECT_FALSE(p.greedy());
  EXPECT_EQ(p.effective_seed(1234), 1234u);
  p.seed = 5;
  EXPECT_EQ(p.effective_seed(1234), 5u);
  p.temperature = 0;
  EXPECT_TRUE(p.greedy());
}

TEST(SamplingParams, EdgesOfEveryRangeAreValid) {
  SamplingParams p;
  p.temperature = 100;
  p.top_k = 1;
  p.top_p = 1e-6f;
  p.min_p = 1;
  p.presence_penalty = -2;
  p.frequency_penalty = 2;
  p.repetition_penalty = 10;
  p.logit_bias = {{0, -100.0f}, {kVocab - 1, 100.0f}};
  p.stop = std::vector<std::string>(16, std::string(1024, 'x'));
  p.stop_token_ids = {0, kVocab - 1};
  p.max_tokens = 1;
  p.n = 128;
  p.logprobs = 20;
  EXPECT_NO_THROW(p.validate(kVocab));
  p.top_k = 0;
  p.logprobs = 0;
  EXPECT_NO_THROW(p.validate(kVocab));
}

struct BadCase {
  const char* name;  // must appear in the message
  std::function<void(SamplingParams&)> edit;
};

TEST(SamplingParams, OutOfRangeValuesNameTheParameter) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const BadCase cases[] = {
      {"temperature", [](SamplingParams& p) { p.temperature = -0.1f; }},
      {"temperature", [](SamplingParams& p) { p.temperature = 100.5f; }},
      {"temperature", [&](SamplingParams& p) { p.temperature = nan; }},
      {"top_k", [](SamplingParams& p) { p.top_k = -2; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 0; }},
      {"top_p", [](SamplingParams& p) { p.top_p = 1.01f; }},
      {"top_p", [&](SamplingParams& p) { p.top_p = nan; }},
      {"min_p", [](SamplingParams& p) { p.min_p = -0.01f; }},
      {"min_p", [](SamplingParams& p) { p.min_p = 1.5f; }},
      {"presence_penalty", [](SamplingParams& p) { p.presence_penalty = 2.5f; }},
      {"presence_penalty", [&](SamplingParams& p) { p.presence_penalty = nan; }},
      {"frequency_penalty", [](SamplingParams& p) { p.frequency_penalty = -3; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 0; }},
      {"repetition_penalty", [](SamplingParams& p) { p.repetition_penalty = 11; }},
      {"repetition_penalty", [&](SamplingParams& p) { p.repetition_penalty = inf; }},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias = {{kVocab, 1.0f}}; }},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias = {{-1, 1.0f}}; }},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias = {{3, 101.0f}}; }},
      {"logit_bias", [&](SamplingParams& p) { p.logit_bias = {{3, nan}}; }},
      {"logit_bias", [](SamplingParams& p) { p.logit_bias = {{3, 1.0f}, {3, 2.0f}}; }},
      {"stop", [](SamplingParams& p) { p.stop = std::vector<std::string>(17, "x"); }},
      {"stop", [](SamplingParams& p) { p.stop = {std::string(1025, 'x')}; }},
      {"stop", [](SamplingParams& p) { p.stop = {"ok", ""}; }},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = {kVocab}; }},
      {"stop_token_ids", [](SamplingParams& p) { p.stop_token_ids = std::vector<int64_t>(1025, 1); }},
      {"max_tokens", [](SamplingParams& p) { p.max_tokens = 0; }},
      {"n", [](SamplingParams& p) { p.n = 0; }},
      {"n", [](SamplingParams& p) { p.n = 129; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = 21; }},
      {"logprobs", [](SamplingParams& p) { p.logprobs = -2; }},
  };
  for (const BadCase& c : cases) {
    SamplingParams p;
    c.edit(p);
    std::string msg = input_error([&] { p.validate(kVocab); });
    EXPECT_NE(msg.find(c.name), std::string::npos) << "message \"" << msg << "\" does not name " << c.name;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(SamplingParams, StopTokens) {
  SamplingParams p;
  p.stop_token_ids = {7, 9};
  EXPECT_TRUE(p.is_stop_token(2, /*eos_token_id=*/2));
  EXPECT_TRUE(p.is_stop_token(9, 2));
  EXPECT_FALSE(p.is_stop_token(8, 2));
  p.ignore_eos = true;
  EXPECT_FALSE(p.is_stop_token(2, 2));
  EXPECT_TRUE(p.is_stop_token(7, 2));
}

TEST(SamplingParamsJson, ParsesEveryField) {
  Json body = Json::parse(R"({
    "model": "ignored", "messages": [],
    "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05,
    "max_tokens": 10, "max_completion_tokens": 64,
    "stop": ["\n\n", "END"], "seed": 42,
    "presence_penalty": 0.5, "frequency_penalty": -0.25, "repetition_penalty": 1.1,
    "logit_bias": {"17": -100, "5": 2.5},
    "logprobs": true, "top_logprobs": 5, "n": 3, "ignore_eos": true,
    "stop_token_ids": [1, 2]
  })");
  SamplingParams p = SamplingParams::from_json(body);
  EXPECT_FLOAT_EQ(p.temperature, 0.7f);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);
  EXPECT_EQ(p.max_tokens, 64);
  EXPECT_EQ(p.stop, (std::vector<std::string>{"\n\n", "END"}));
  EXPECT_EQ(p.seed, 42u);
  EXPECT_FLOAT_EQ(p.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(p.frequency_penalty, -0.25f);
  EXPECT_FLOAT_EQ(p.repetition_penalty, 1.1f);
  ASSERT_EQ(p.logit_bias.size(), 2u);
  EXPECT_EQ(p.logit_bias[0], (std::pair<int64_t, float>{17, -100.0f}));  // object keys sort as strings
  EXPECT_EQ(p.logit_bias[1], (std::pair<int64_t, float>{5, 2.5f}));
  EXPECT_EQ(p.logprobs, 5);
  EXPECT_EQ(p.n, 3);
  EXPECT_TRUE(p.ignore_eos);
  EXPECT_EQ(p.stop_token_ids, (std::vector<int64_t>{1, 2}));
  EXPECT_NO_THROW(p.validate(kVocab));
}

TEST(SamplingParamsJson, AlternativeForms) {
  SamplingParams p = SamplingParams::from_json(Json::parse(R"({"stop": "###", "logprobs": 3, "max_tokens": 5.0})"));
  EXPECT_EQ(p.stop, std::vector<std::string>{"###"});
  EXPECT_EQ(p.logprobs, 3);  // legacy completions: an integer
  EXPECT_EQ(p.max_tokens, 5);
  p = SamplingParams::from_json(Json::parse(R"({"logprobs": true})"));
  EXPECT_EQ(p.logprobs, 0);
  p = SamplingParams::from_json(Json::parse(R"({"logprobs": false, "temperature": null, "seed": -1})"));
  EXPECT_EQ(p.logprobs, -1);
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.seed, ~uint64_t{0});
  p = SamplingParams::from_json(Json::parse(R"({"seed": 18446744073709551615})"));
  EXPECT_EQ(p.seed, ~uint64_t{0});
  p = SamplingParams::from_json(Json::object());
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_EQ(p.max_tokens, 16);
}

TEST(SamplingParamsJson, WrongTypesNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {"temperature", R"({"temperature": "hot"})"},
      {"top_p", R"({"top_p": [0.5]})"},
      {"top_k", R"({"top_k": 2.5})"},
      {"top_k", R"({"top_k": true})"},
      {"min_p", R"({"min_p": {}})"},
      {"max_tokens", R"({"max_tokens": "10"})"},
      {"max_tokens", R"({"max_tokens": 1e30})"},
      {"max_completion_tokens", R"({"max_completion_tokens": 18446744073709551615})"},
      {"stop", R"({"stop": 5})"},
      {"stop", R"({"stop": ["a", 1]})"},
      {"stop", R"({"stop": ["1","2","3","4","5","6","7","8","9","10","11","12","13","14","15","16","17"]})"},
      {"seed", R"({"seed": "abc"})"},
      {"seed", R"({"seed": 1.5})"},
      {"presence_penalty", R"({"presence_penalty": "0"})"},
      {"frequency_penalty", R"({"frequency_penalty": false})"},
      {"repetition_penalty", R"({"repetition_penalty": []})"},
      {"logit_bias", R"({"logit_bias": [1, 2]})"},
      {"logit_bias", R"({"logit_bias": {"abc": 1}})"},
      {"logit_bias", R"({"logit_bias": {"12x": 1}})"},
      {"logit_bias", R"({"logit_bias": {"": 1}})"},
      {"logit_bias", R"({"logit_bias": {"5": "1"}})"},
      {"logprobs", R"({"logprobs": "yes"})"},
      {"logprobs", R"({"logprobs": -3})"},
      {"top_logprobs", R"({"top_logprobs": 3})"},
      {"top_logprobs", R"({"logprobs": false, "top_logprobs": 3})"},
      {"top_logprobs", R"({"logprobs": true, "top_logprobs": "3"})"},
      {"top_logprobs", R"({"logprobs": true, "top_logprobs": -1})"},
      {"n", R"({"n": "2"})"},
      {"ignore_eos", R"({"ignore_eos": 1})"},
      {"stop_token_ids", R"({"stop_token_ids": 3})"},
      {"stop_token_ids", R"({"stop_token_ids": [1, "2"]})"},
      {"request body", R"([1, 2])"},
  };
  for (const auto& [name, text] : cases) {
    const auto& body = text;  // clang before 16 cannot capture a structured binding
    std::string msg = input_error([&] { SamplingParams::from_json(Json::parse(body)); });
    EXPECT_NE(msg.find(name), std::string::npos) << text << " -> \"" << msg << "\"";
  }
}

TEST(SamplingParamsJson, HugeNumbersBecomeRangeErrors) {
  SamplingParams p = SamplingParams::from_json(Json::parse(R"({"temperature": 1e300})"));
  EXPECT_TRUE(std::isinf(p.temperature));
  EXPECT_NE(input_error([&] { p.validate(kVocab); }).find("temperature"), std::string::npos);
  // A token id that does not fit in 64 bits is rejected while parsing.
  const char* huge_id = R"({"logit_bias": {"99999999999999999999": 1}})";
  EXPECT_NE(input_error([&] { SamplingParams::from_json(Json::parse(huge_id)); }).find("logit_bias"),
            std::string::npos);
}

}  // namespace
}  // namespace deepinfer::sampling
