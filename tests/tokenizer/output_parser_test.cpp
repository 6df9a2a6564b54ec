// OutputParser: expected splits of model output into reasoning, content and tool calls,
// and the same result whatever byte offsets the text arrives in.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/chat_encoding.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

const std::string EOS = "<｜end▁of▁sentence｜>";

std::string param(const std::string& k, bool str, const std::string& v) {
  return "<｜DSML｜ parameter name=\"" + k + "\" string=\"" + (str ? "true" : "false") + "\">" + v +
         "</｜DSML｜ parameter>";
}
std::string invoke(const std::string& name, const std::string& params) {
  return "<｜DSML｜ invoke name=\"" + name + "\">\n" + params + "\n</｜DSML｜ invoke>";
}
std::string calls(const std::string& invokes) { return "\n\n<｜DSML｜ calls>\n" + invokes + "\n</｜DSML｜ calls>"; }

struct Result {
  std::string reasoning, content;
  std::vector<ChatToolCall> calls;
  bool valid_utf8 = true;
  void add(const OutputParser::Delta& d) {
    valid_utf8 = valid_utf8 && is_valid_utf8(d.reasoning_content) && is_valid_utf8(d.content);
    reasoning += d.reasoning_content;
    content += d.content;
    calls.insert(calls.end(), d.tool_calls.begin(), d.tool_calls.end());
  }
};

void expect_same(const Result& a, const Result& b, const std::string& where) {
  EXPECT_EQ(a.reasoning, b.reasoning) << where;
  EXPECT_EQ(a.content, b.content) << where;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << where;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].id, b.calls[i].id) << where;
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << where;
    EXPECT_EQ(a.calls[i].arguments_json, b.calls[i].arguments_json) << where;
  }
}

Result parse_chunks(bool thinking, bool tools, const std::vector<std::string_view>& chunks) {
  OutputParser p(thinking, tools);
  Result r;
  for (std::string_view c : chunks) r.add(p.feed(c));
  r.add(p.finish());
  return r;
}

struct Case {
  const char* name;
  bool thinking, tools;
  std::string text;
  Result expected;
};

std::vector<Case> cases() {
  const std::string paris = invoke("get_weather", param("city", true, "Paris") + "\n" + param("n", false, "3"));
  std::vector<Case> c;
  c.push_back({"plain_chat", false, false, "Hello world", {"", "Hello world", {}}});
  c.push_back({"reasoning_then_answer", true, false, "reasoning here</think>The answer.",
               {"reasoning here", "The answer.", {}}});
  c.push_back({"leading_think_tag_dropped", true, false, "<think>r</think>a", {"r", "a", {}}});
  c.push_back({"never_ends_thinking", true, false, "still thinking <thi", {"still thinking <thi", "", {}}});
  c.push_back({"eos_ends_output", false, false, "answer" + EOS + "garbage", {"", "answer", {}}});
  c.push_back({"eos_inside_reasoning", true, true, "r" + EOS + "</think>x", {"r", "", {}}});
  c.push_back({"one_call", false, true, "Let me check." + calls(paris) + EOS,
               {"", "Let me check.", {{"call_0", "get_weather", R"({"city": "Paris", "n": 3})"}}}});
  c.push_back({"thinking_two_calls", true, true,
               "r</think>" + calls(paris + "\n" + invoke("get_time", param("tz", true, "C\"E\nT"))),
               {"r", "", {{"call_0", "get_weather", R"({"city": "Paris", "n": 3})"},
                          {"call_1", "get_time", R"({"tz": "C\"E\nT"})"}}}});
  c.push_back({"calls_ignored_without_tools", false, false, "x" + calls(paris), {"", "x" + calls(paris), {}}});
  c.push_back({"text_after_block_is_content", false, true, "a" + calls(paris) + "\ntrailing",
               {"", "a\ntrailing", {{"call_0", "get_weather", R"({"city": "Paris", "n": 3})"}}}});
  c.push_back({"malformed_invoke_becomes_text", false, true,
               "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"x\">\n<bogus>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>",
               {"", "\n<｜DSML｜ invoke name=\"x\">\n<bogus>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>", {}}});
  c.push_back({"unterminated_invoke_at_end", false, true,
               "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"x\">\n" + std::string("<｜DSML｜ parameter name=\"a\" string=\"true\">1"),
               {"", "\n<｜DSML｜ invoke name=\"x\">\n<｜DSML｜ parameter name=\"a\" string=\"true\">1", {}}});
  c.push_back({"unterminated_block_after_call", false, true, "<｜DSML｜ calls>\n" + paris + "\n",
               {"", "", {{"call_0", "get_weather", R"({"city": "Paris", "n": 3})"}}}});
  c.push_back({"bad_json_value_kept_as_string", false, true,
               calls(invoke("f", param("x", false, "not json") + "\n" + param("y", false, "[1,2, {\"a\":1.50}]"))),
               {"", "", {{"call_0", "f", R"({"x": "not json", "y": [1, 2, {"a": 1.5}]})"}}}});
  c.push_back({"call_without_parameters", false, true, calls(invoke("noop", "")),
               {"", "", {{"call_0", "noop", "{}"}}}});
  c.push_back({"partial_tag_at_end_is_text", false, true, "a <｜DSML｜ cal", {"", "a <｜DSML｜ cal", {}}});
  c.push_back({"blank_lines_without_calls_stay", false, true, "x\n\n", {"", "x\n\n", {}}});
  c.push_back({"three_newlines_keep_one", false, true, "x\n\n\n<｜DSML｜ calls>\n</｜DSML｜ calls>", {"", "x\n", {}}});
  c.push_back({"multibyte_text", true, false, "日本語😀</think>é👨‍👩‍👧", {"日本語😀", "é👨‍👩‍👧", {}}});
  c.push_back({"other_tags_are_text", false, true, "<think>x</think><｜User｜><｜DSML｜ invoke",
               {"", "<think>x</think><｜User｜><｜DSML｜ invoke", {}}});
  return c;
}

TEST(OutputParser, ExpectedResults) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    expect_same(parse_chunks(c.thinking, c.tools, {c.text}), c.expected, "whole");
  }
}

TEST(OutputParser, EverySplitGivesTheSameResult) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const std::string_view text = c.text;
    for (size_t k = 0; k <= text.size(); ++k) {
      const Result r = parse_chunks(c.thinking, c.tools, {text.substr(0, k), text.substr(k)});
      expect_same(r, c.expected, "split at " + std::to_string(k));
      EXPECT_TRUE(r.valid_utf8) << "split at " << k;
    }
    std::vector<std::string_view> bytes;
    for (size_t k = 0; k < text.size(); ++k) bytes.push_back(text.substr(k, 1));
    const Result r = parse_chunks(c.thinking, c.tools, bytes);
    expect_same(r, c.expected, "byte by byte");
    EXPECT_TRUE(r.valid_utf8);
  }
}

TEST(OutputParser, HoldsBackOnlyWhatCouldBeATag) {
  OutputParser p(true, true);
  EXPECT_EQ(p.feed("abc</thi").reasoning_content, "abc");
  EXPECT_EQ(p.feed("nk>hello\n").content, "hello");
  EXPECT_EQ(p.feed("\n<｜DS").content, "");
  EXPECT_EQ(p.feed("x").content, "\n\n<｜DSx");
  EXPECT_EQ(p.feed("\xE6\x97").content, "");
  EXPECT_EQ(p.feed("\xA5").content, "\xE6\x97\xA5");
  EXPECT_EQ(p.finish().content, "");
}

}  // namespace
}  // namespace deepinfer
