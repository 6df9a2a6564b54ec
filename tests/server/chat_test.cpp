// /v1/chat/completions against the scripted engine and the real V4.1 encoding:
// message rendering, reasoning_content, tool calls (whole and streamed),
// logprobs, n, usage and the vLLM extras.
#include <gtest/gtest.h>

#include "server_test_util.h"
#include "tokenizer/chat_encoding.h"

namespace deepinfer::testing {
namespace {

const std::string kCall =
    "\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n"
    "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris</｜DSML｜ parameter>\n"
    "</｜DSML｜ invoke>\n</｜DSML｜ calls>";

json user(const std::string& text) { return json::array({{{"role", "user"}, {"content", text}}}); }

json tools() {
  return json::array({{{"type", "function"},
                       {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}});
}

TEST(Chat, PlainAnswer) {
  ServerFixture fx({}, 4096);
  Reply r = fx.post("/v1/chat/completions", {{"messages", user("[[say:Hello!]]")}});
  ASSERT_EQ(r.status, 200) << r.body;
  json b = r.json_body();
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_EQ(b["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  const json& c = b["choices"][0];
  EXPECT_EQ(c["message"]["role"], "assistant");
  EXPECT_EQ(c["message"]["content"], "Hello!");
  EXPECT_TRUE(c["message"]["reasoning_content"].is_null());
  EXPECT_FALSE(c["message"].contains("tool_calls"));
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_TRUE(c["logprobs"].is_null());
  // The prompt is the V4.1 encoding of the messages.
  ChatOptions opts;
  ChatMessage m;
  m.role = "user";
  m.content = "[[say:Hello!]]";
  const int64_t prompt_tokens = int64_t(encode_chat({m}, opts).size());  // one token per byte
  EXPECT_EQ(b["usage"]["prompt_tokens"], prompt_tokens);
  EXPECT_EQ(b["usage"]["completion_tokens"], 7);
}

TEST(Chat, ThinkingSplitsReasoning) {
  ServerFixture fx({}, 4096);
  for (json extra : {json{{"thinking", true}}, json{{"chat_template_kwargs", {{"thinking", true}}}},
                     json{{"reasoning_effort", "low"}}, json{{"thinking", {{"type", "enabled"}}}}}) {
    json body = {{"messages", user("[[say:hmm, sunny</think>Sunny.]]")}};
    body.update(extra);
    json m = fx.post("/v1/chat/completions", body).json_body()["choices"][0]["message"];
    EXPECT_EQ(m["reasoning_content"], "hmm, sunny") << extra;
    EXPECT_EQ(m["content"], "Sunny.") << extra;
  }
  // Thinking off: the tag is just text.
  json m = fx.post("/v1/chat/completions", {{"messages", user("[[say:a</think>b]]")}}).json_body()["choices"][0];
  EXPECT_EQ(m["message"]["content"], "a</think>b");
}

TEST(Chat, StreamedReasoningAndContent) {
  ServerFixture fx({}, 4096);
  Reply r = fx.post("/v1/chat/completions", {{"messages", user("[[say:why</think>Because.]]")},
                                             {"thinking", true},
                                             {"stream", true},
                                             {"stream_options", {{"include_usage", true}}}});
  std::vector<json> ev = r.events();
  ASSERT_GE(ev.size(), 4u);
  EXPECT_EQ(ev[0]["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_EQ(ev.back(), "[DONE]");
  EXPECT_EQ(ev[ev.size() - 2]["choices"], json::array());
  std::string reasoning, content;
  for (size_t i = 0; i + 2 < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["object"], "chat.completion.chunk");
    const json& d = ev[i]["choices"][0]["delta"];
    reasoning += d.value("reasoning_content", "");
    content += d.value("content", "");
  }
  EXPECT_EQ(reasoning, "why");
  EXPECT_EQ(content, "Because.");
  EXPECT_EQ(ev[ev.size() - 3]["choices"][0]["finish_reason"], "stop");
}

TEST(Chat, ToolCalls) {
  ServerFixture fx({}, 4096);
  json body = {{"messages", user("[[say:Let me check." + kCall + "]]")}, {"tools", tools()}};
  json c = fx.post("/v1/chat/completions", body).json_body()["choices"][0];
  EXPECT_EQ(c["finish_reason"], "tool_calls");
  EXPECT_EQ(c["message"]["content"], "Let me check.");
  ASSERT_EQ(c["message"]["tool_calls"].size(), 1u);
  const json& tc = c["message"]["tool_calls"][0];
  EXPECT_EQ(tc["type"], "function");
  EXPECT_EQ(tc["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(tc["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(tc["function"]["arguments"].get<std::string>()), json({{"city", "Paris"}}));

  // Only a call: content is null, as in OpenAI's API.
  body["messages"] = user("[[say:" + kCall.substr(2) + "]]");
  c = fx.post("/v1/chat/completions", body).json_body()["choices"][0];
  EXPECT_TRUE(c["message"]["content"].is_null());

  // Streamed: one delta carries the whole call with its index.
  body["stream"] = true;
  std::vector<json> ev = fx.post("/v1/chat/completions", body).events();
  json calls = json::array();
  for (size_t i = 0; i + 1 < ev.size(); ++i)
    for (const json& call : ev[i]["choices"][0]["delta"].value("tool_calls", json::array())) calls.push_back(call);
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(ev[ev.size() - 2]["choices"][0]["finish_reason"], "tool_calls");

  // tool_choice "none": tools are not rendered and the markup stays text.
  body = {{"messages", user("[[say:x" + kCall + "]]")}, {"tools", tools()}, {"tool_choice", "none"}};
  c = fx.post("/v1/chat/completions", body).json_body()["choices"][0];
  EXPECT_EQ(c["finish_reason"], "stop");
  EXPECT_FALSE(c["message"].contains("tool_calls"));
}

TEST(Chat, MultiTurnWithToolResults) {
  ServerFixture fx({}, 4096);
  json messages = {
      {{"role", "system"}, {"content", "You are terse."}},
      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Weather "}}, {{"type", "text"}, {"text", "now?"}}}}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"tool_calls", {{{"id", "call_1"}, {"type", "function"},
                        {"function", {{"name", "get_weather"}, {"arguments", "{\"city\": \"Paris\"}"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "sunny"}},
      {{"role", "developer"}, {"content", "[[say:It is sunny.]]"}},
  };
  Reply r = fx.post("/v1/chat/completions", {{"messages", messages}, {"tools", tools()}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json_body()["choices"][0]["message"]["content"], "It is sunny.");
  json tok = fx.post("/tokenize", {{"messages", messages}, {"tools", tools()}}).json_body();
  EXPECT_EQ(tok["count"], r.json_body()["usage"]["prompt_tokens"]);
}

TEST(Chat, LogprobsNSeedsAndTokenIds) {
  ServerFixture fx({}, 4096);
  json body = {{"messages", user("hi")}, {"n", 3},         {"seed", 5}, {"max_completion_tokens", 4},
               {"logprobs", true},       {"top_logprobs", 2}, {"return_token_ids", true}};
  json b = fx.post("/v1/chat/completions", body).json_body();
  ASSERT_EQ(b["choices"].size(), 3u);
  EXPECT_EQ(b["usage"]["completion_tokens"], 12);
  EXPECT_EQ(b["prompt_token_ids"].size(), b["usage"]["prompt_tokens"].get<size_t>());
  for (const json& c : b["choices"]) {
    EXPECT_EQ(c["finish_reason"], "length");
    ASSERT_EQ(c["logprobs"]["content"].size(), 4u);
    const json& first = c["logprobs"]["content"][0];
    EXPECT_EQ(first["logprob"], -0.25);
    EXPECT_EQ(first["top_logprobs"].size(), 2u);
    EXPECT_EQ(first["bytes"].size(), 1u);
    EXPECT_EQ(c["token_ids"].size(), 4u);
  }
  EXPECT_NE(b["choices"][0]["message"]["content"], b["choices"][1]["message"]["content"]);
  json again = fx.post("/v1/chat/completions", body).json_body();
  for (int i = 0; i < 3; ++i) EXPECT_EQ(again["choices"][i]["message"], b["choices"][i]["message"]);
}

TEST(Chat, DefaultMaxTokensFillsTheContext) {
  ServerFixture fx({}, 128);
  json b = fx.post("/v1/chat/completions", {{"messages", user("hi")}}).json_body();
  EXPECT_EQ(b["usage"]["total_tokens"], 128);
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  Reply r = fx.post("/v1/chat/completions", {{"messages", user(std::string(200, 'x'))}});
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(r.json_body()["error"]["code"], "context_length_exceeded");
}

}  // namespace
}  // namespace deepinfer::testing
