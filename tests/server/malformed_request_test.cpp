// Every malformed request gets a 4xx with an OpenAI error body, and none reaches
// the engine.
#include <gtest/gtest.h>

#include "server/chat_request.h"
#include "server_test_util.h"

namespace deepinfer::testing {
namespace {

struct Case {
  const char* name;
  const char* method;
  const char* path;
  std::string body;
  int status;
  const char* param;  // expected "param", or nullptr to skip the check
};

// Keeps gtest from printing the struct's bytes in test names and failures.
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

std::string long_prompt(size_t n) { return json{{"prompt", std::string(n, 'x')}, {"max_tokens", 10}}.dump(); }

std::vector<Case> completion_cases() {
  std::string many_prompts = json{{"prompt", std::vector<std::string>(65, "a")}}.dump();
  std::string many_stops = json{{"prompt", "a"}, {"stop", std::vector<std::string>(17, "z")}}.dump();
  return {
      {"invalid_json", "POST", "/v1/completions", R"({"prompt": "x",)", 400, nullptr},
      {"body_is_array", "POST", "/v1/completions", "[1, 2]", 400, nullptr},
      {"empty_body", "POST", "/v1/completions", "", 400, nullptr},
      {"deep_nesting", "POST", "/v1/completions", "{\"prompt\": " + std::string(100, '[') + std::string(100, ']') + "}",
       400, nullptr},
      {"invalid_utf8", "POST", "/v1/completions", "{\"prompt\": \"\xff\xfe\"}", 400, nullptr},
      {"missing_prompt", "POST", "/v1/completions", "{}", 400, "prompt"},
      {"prompt_number", "POST", "/v1/completions", R"({"prompt": 5})", 400, "prompt"},
      {"prompt_empty_array", "POST", "/v1/completions", R"({"prompt": []})", 400, "prompt"},
      {"prompt_empty_string", "POST", "/v1/completions", R"({"prompt": ""})", 400, "prompt"},
      {"prompt_token_out_of_vocab", "POST", "/v1/completions", R"({"prompt": [300]})", 400, "prompt"},
      {"prompt_negative_token", "POST", "/v1/completions", R"({"prompt": [-1]})", 400, "prompt"},
      {"prompt_mixed_ids", "POST", "/v1/completions", R"({"prompt": [70, "a"]})", 400, "prompt"},
      {"prompt_bad_nested_ids", "POST", "/v1/completions", R"({"prompt": [[70], [71, "x"]]})", 400, "prompt"},
      {"prompt_batch_of_objects", "POST", "/v1/completions", R"({"prompt": [{"a": 1}]})", 400, "prompt"},
      {"too_many_prompts", "POST", "/v1/completions", many_prompts, 400, "prompt"},
      {"context_exceeded", "POST", "/v1/completions", long_prompt(250), 400, "prompt"},
      {"max_tokens_zero", "POST", "/v1/completions", R"({"prompt": "a", "max_tokens": 0})", 400, "max_tokens"},
      {"max_tokens_string", "POST", "/v1/completions", R"({"prompt": "a", "max_tokens": "10"})", 400, "max_tokens"},
      {"max_tokens_fraction", "POST", "/v1/completions", R"({"prompt": "a", "max_tokens": 1.5})", 400, "max_tokens"},
      {"max_tokens_huge", "POST", "/v1/completions", R"({"prompt": "a", "max_tokens": 1000000})", 400, "max_tokens"},
      {"temperature_negative", "POST", "/v1/completions", R"({"prompt": "a", "temperature": -1})", 400, "temperature"},
      {"temperature_too_high", "POST", "/v1/completions", R"({"prompt": "a", "temperature": 3})", 400, "temperature"},
      {"temperature_string", "POST", "/v1/completions", R"({"prompt": "a", "temperature": "hot"})", 400,
       "temperature"},
      {"top_p_zero", "POST", "/v1/completions", R"({"prompt": "a", "top_p": 0})", 400, "top_p"},
      {"top_p_above_one", "POST", "/v1/completions", R"({"prompt": "a", "top_p": 1.5})", 400, "top_p"},
      {"top_k_below_minus_one", "POST", "/v1/completions", R"({"prompt": "a", "top_k": -2})", 400, "top_k"},
      {"min_p_above_one", "POST", "/v1/completions", R"({"prompt": "a", "min_p": 2})", 400, "min_p"},
      {"presence_penalty_range", "POST", "/v1/completions", R"({"prompt": "a", "presence_penalty": 5})", 400,
       "presence_penalty"},
      {"frequency_penalty_range", "POST", "/v1/completions", R"({"prompt": "a", "frequency_penalty": -3})", 400,
       "frequency_penalty"},
      {"repetition_penalty_zero", "POST", "/v1/completions", R"({"prompt": "a", "repetition_penalty": 0})", 400,
       "repetition_penalty"},
      {"n_zero", "POST", "/v1/completions", R"({"prompt": "a", "n": 0})", 400, "n"},
      {"n_too_large", "POST", "/v1/completions", R"({"prompt": "a", "n": 1000})", 400, "n"},
      {"n_string", "POST", "/v1/completions", R"({"prompt": "a", "n": "2"})", 400, "n"},
      {"n_times_prompts", "POST", "/v1/completions", R"({"prompt": ["a", "b", "c"], "n": 128})", 400, "n"},
      {"logprobs_too_many", "POST", "/v1/completions", R"({"prompt": "a", "logprobs": 21})", 400, "logprobs"},
      {"logprobs_bool", "POST", "/v1/completions", R"({"prompt": "a", "logprobs": true})", 400, "logprobs"},
      {"stop_number", "POST", "/v1/completions", R"({"prompt": "a", "stop": 5})", 400, "stop"},
      {"stop_empty_string", "POST", "/v1/completions", R"({"prompt": "a", "stop": [""]})", 400, "stop"},
      {"stop_not_strings", "POST", "/v1/completions", R"({"prompt": "a", "stop": [1]})", 400, "stop"},
      {"stop_too_many", "POST", "/v1/completions", many_stops, 400, "stop"},
      {"logit_bias_array", "POST", "/v1/completions", R"({"prompt": "a", "logit_bias": []})", 400, "logit_bias"},
      {"logit_bias_bad_key", "POST", "/v1/completions", R"({"prompt": "a", "logit_bias": {"abc": 1}})", 400,
       "logit_bias"},
      {"logit_bias_out_of_vocab", "POST", "/v1/completions", R"({"prompt": "a", "logit_bias": {"999": 1}})", 400,
       "logit_bias"},
      {"logit_bias_value_range", "POST", "/v1/completions", R"({"prompt": "a", "logit_bias": {"5": 200}})", 400,
       "logit_bias"},
      {"seed_string", "POST", "/v1/completions", R"({"prompt": "a", "seed": "x"})", 400, "seed"},
      {"seed_fraction", "POST", "/v1/completions", R"({"prompt": "a", "seed": 1.5})", 400, "seed"},
      {"seed_above_int64", "POST", "/v1/completions", R"({"prompt": "a", "seed": 18446744073709551615})", 400, "seed"},
      {"stream_string", "POST", "/v1/completions", R"({"prompt": "a", "stream": "yes"})", 400, "stream"},
      {"stream_options_without_stream", "POST", "/v1/completions",
       R"({"prompt": "a", "stream_options": {"include_usage": true}})", 400, "stream_options"},
      {"include_usage_string", "POST", "/v1/completions",
       R"({"prompt": "a", "stream": true, "stream_options": {"include_usage": "x"}})", 400,
       "stream_options.include_usage"},
      {"unknown_model", "POST", "/v1/completions", R"({"prompt": "a", "model": "gpt-9"})", 404, "model"},
      {"echo_with_logprobs", "POST", "/v1/completions", R"({"prompt": "a", "echo": true, "logprobs": 2})", 400, "echo"},
      {"best_of_unsupported", "POST", "/v1/completions", R"({"prompt": "a", "best_of": 3})", 400, "best_of"},
      // Structured outputs: malformed fields, and constraints the compiler refuses.
      {"response_format_string", "POST", "/v1/completions", R"({"prompt": "a", "response_format": "json"})", 400,
       "response_format"},
      {"response_format_unknown_type", "POST", "/v1/completions",
       R"({"prompt": "a", "response_format": {"type": "yaml"}})", 400, "response_format.type"},
      {"response_format_schema_missing", "POST", "/v1/completions",
       R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})", 400,
       "response_format.json_schema.schema"},
      {"response_format_strict_string", "POST", "/v1/completions",
       R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"schema": {}, "strict": "yes"}}})",
       400, "response_format.json_schema.strict"},
      {"bad_schema_type", "POST", "/v1/completions",
       R"({"prompt": "a", "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "widget"}}}})",
       400, "response_format.json_schema.schema"},
      {"bad_schema_json_text", "POST", "/v1/completions", R"({"prompt": "a", "guided_json": "{\"type\": "})", 400,
       "guided_json"},
      {"schema_unsupported_keyword", "POST", "/v1/completions",
       R"({"prompt": "a", "guided_json": {"type": "object", "if": {"required": ["a"]}, "then": {}}})", 400,
       "guided_json"},
      {"bad_regex", "POST", "/v1/completions", R"({"prompt": "a", "structured_outputs": {"regex": "(a|b"}})", 400,
       "structured_outputs.regex"},
      {"regex_backreference", "POST", "/v1/completions", R"({"prompt": "a", "guided_regex": "(a)\\1"})", 400,
       "guided_regex"},
      {"regex_not_string", "POST", "/v1/completions", R"({"prompt": "a", "guided_regex": ["a"]})", 400,
       "guided_regex"},
      {"bad_grammar", "POST", "/v1/completions", R"({"prompt": "a", "guided_grammar": "root ::= undefined_rule"})",
       400, "guided_grammar"},
      {"choice_empty", "POST", "/v1/completions", R"({"prompt": "a", "guided_choice": []})", 400, "guided_choice"},
      {"choice_not_strings", "POST", "/v1/completions", R"({"prompt": "a", "guided_choice": ["a", 2]})", 400,
       "guided_choice"},
      {"two_constraints", "POST", "/v1/completions",
       R"({"prompt": "a", "response_format": {"type": "json_object"}, "guided_regex": "a+"})", 400, "guided_regex"},
      {"two_structured_outputs", "POST", "/v1/completions",
       R"({"prompt": "a", "structured_outputs": {"regex": "a+", "choice": ["b"]}})", 400, nullptr},
      {"structured_outputs_unknown_key", "POST", "/v1/completions",
       R"({"prompt": "a", "structured_outputs": {"structural_tag": "x"}})", 400, "structured_outputs.structural_tag"},
      {"complete_within_not_bool", "POST", "/v1/completions",
       R"({"prompt": "a", "structured_outputs": {"regex": "a+", "complete_within_max_tokens": "yes"}})", 400,
       "structured_outputs.complete_within_max_tokens"},
      {"complete_within_without_constraint", "POST", "/v1/completions",
       R"({"prompt": "a", "structured_outputs": {"complete_within_max_tokens": true}})", 400,
       "structured_outputs.complete_within_max_tokens"},
      {"complete_within_response_format_not_bool", "POST", "/v1/completions",
       R"({"prompt": "a", "response_format": {"type": "json_object", "complete_within_max_tokens": 1}})", 400,
       "response_format.complete_within_max_tokens"},
      {"complete_within_contradiction", "POST", "/v1/completions",
       R"({"prompt": "a", "response_format": {"type": "json_object", "complete_within_max_tokens": true},
           "structured_outputs": {"complete_within_max_tokens": false}})", 400,
       "structured_outputs.complete_within_max_tokens"},
      {"guided_whitespace_pattern", "POST", "/v1/completions",
       R"({"prompt": "a", "guided_json": {}, "guided_whitespace_pattern": " *"})", 400, "guided_whitespace_pattern"},
      {"beam_search", "POST", "/v1/completions", R"({"prompt": "a", "use_beam_search": true})", 400,
       "use_beam_search"},
      {"suffix", "POST", "/v1/completions", R"({"prompt": "a", "suffix": "z"})", 400, "suffix"},
      {"stop_token_ids_range", "POST", "/v1/completions", R"({"prompt": "a", "stop_token_ids": [1000]})", 400,
       "stop_token_ids"},
      {"ignore_eos_string", "POST", "/v1/completions", R"({"prompt": "a", "ignore_eos": "no"})", 400, "ignore_eos"},
      {"get_on_post_endpoint", "GET", "/v1/completions", "", 405, nullptr},
      {"post_on_get_endpoint", "POST", "/v1/models", "{}", 405, nullptr},
      {"unknown_path", "GET", "/v2/nothing", "", 404, nullptr},
      {"unknown_model_card", "GET", "/v1/models/other", "", 404, "model"},
      {"detokenize_missing_tokens", "POST", "/detokenize", "{}", 400, "tokens"},
      {"detokenize_negative", "POST", "/detokenize", R"({"tokens": [-5]})", 400, "tokens"},
      {"detokenize_not_array", "POST", "/detokenize", R"({"tokens": "abc"})", 400, "tokens"},
      {"tokenize_nothing", "POST", "/tokenize", "{}", 400, nullptr},
      {"tokenize_prompt_number", "POST", "/tokenize", R"({"prompt": 5})", 400, "prompt"},
  };
}

std::vector<Case> chat_cases() {
  return {
      {"chat_missing_messages", "POST", "/v1/chat/completions", "{}", 400, "messages"},
      {"chat_empty_messages", "POST", "/v1/chat/completions", R"({"messages": []})", 400, "messages"},
      {"chat_messages_string", "POST", "/v1/chat/completions", R"({"messages": "hi"})", 400, "messages"},
      {"chat_message_not_object", "POST", "/v1/chat/completions", R"({"messages": [5]})", 400, "messages[0]"},
      {"chat_bad_role", "POST", "/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "x"}]})", 400,
       "messages[0].role"},
      {"chat_content_number", "POST", "/v1/chat/completions", R"({"messages": [{"role": "user", "content": 5}]})", 400,
       "messages[0].content"},
      {"chat_image_part", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})", 400,
       "messages[0].content"},
      {"chat_top_logprobs_alone", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", 400, "top_logprobs"},
      {"chat_tools_not_array", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "tools": {"a": 1}})", 400, "tools"},
      {"chat_tool_without_name", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {}}]})", 400,
       "tools[0].function.name"},
      {"chat_tool_choice_required", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", 400, "tool_choice"},
      {"chat_thinking_string", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "thinking": "yes"})", 400, "thinking"},
      {"chat_bad_effort", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "extreme"})", 400, "reasoning_effort"},
      {"chat_max_completion_tokens_zero", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0})", 400,
       "max_completion_tokens"},
      {"chat_tool_calls_in_user_message", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})", 400, "messages[0].tool_calls"},
      {"chat_response_format_schema", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}})", 400,
       "response_format.json_schema"},
      {"chat_bad_schema", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
           "json_schema": {"name": "x", "schema": {"type": "object", "minProperties": "two"}}}})",
       400, "response_format.json_schema.schema"},
      {"chat_bad_regex", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "structured_outputs": {"regex": "[z-a]"}})", 400,
       "structured_outputs.regex"},
      {"chat_constraint_with_thinking", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "thinking": true,
           "response_format": {"type": "json_object"}})", 400, "thinking"},
      {"chat_template_kwargs_not_object", "POST", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": true})", 400,
       "chat_template_kwargs"},
  };
}

class MalformedRequest : public ::testing::TestWithParam<Case> {};

TEST_P(MalformedRequest, Answers4xxWithErrorBody) {
  const Case& c = GetParam();
  ServerFixture fx;
  Reply r = fx.call(c.method, c.path, c.body);
  EXPECT_EQ(r.status, c.status) << r.body;
  EXPECT_FALSE(r.streamed);
  EXPECT_EQ(r.content_type, "application/json");
  json body = json::parse(r.body, nullptr, false);
  ASSERT_TRUE(body.is_object() && body.contains("error")) << r.body;
  const json& err = body["error"];
  EXPECT_TRUE(err["message"].is_string() && !err["message"].get<std::string>().empty()) << r.body;
  EXPECT_TRUE(err["type"].is_string()) << r.body;
  EXPECT_TRUE(err.contains("param") && err.contains("code")) << r.body;
  if (c.param) {
    EXPECT_EQ(err["param"], c.param) << r.body;
  }
  EXPECT_EQ(fx.backend->num_submitted(), 0);
}

std::vector<Case> all_cases() {
  std::vector<Case> cases = completion_cases();
  for (Case& c : chat_cases()) cases.push_back(c);
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Server, MalformedRequest, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(MalformedRequest, SuiteIsLarge) { EXPECT_GE(all_cases().size(), 60u); }

TEST(MalformedRequest, OversizedErrorQuotesAreTruncated) {
  ServerFixture fx;
  std::string huge(100000, 'q');
  Reply r = fx.post("/detokenize", json{{"tokens", {huge}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_LT(r.body.size(), 1000u);
}

}  // namespace
}  // namespace deepinfer::testing
