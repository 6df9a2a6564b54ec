// encode_chat: conversations with the prompt text written out by hand from the rules of
// MODEL_V41.md §10 / encoding.py (see chat_encoding.h), one rule per case where possible.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/check.h"
#include "tokenizer/chat_encoding.h"
#include "tokenizer/py_json.h"

namespace deepinfer {
namespace {

const std::string BOS = "<｜begin▁of▁sentence｜>", EOS = "<｜end▁of▁sentence｜>", SYS = "<｜System｜>",
                  USR = "<｜User｜>", AST = "<｜Assistant｜>", TS = "<think>", TE = "</think>";
std::string effort(int b) {
  return SYS + "Reasoning Effort: " + std::to_string(b) +
         " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";
}

ChatMessage sys(const std::string& c) { return {"system", c, "", {}, "", ""}; }
ChatMessage user(const std::string& c) { return {"user", c, "", {}, "", ""}; }
ChatMessage asst(const std::string& c, const std::string& r = "", std::vector<ChatToolCall> calls = {}) {
  return {"assistant", c, r, std::move(calls), "", ""};
}
ChatMessage tool(const std::string& id, const std::string& c) { return {"tool", c, "", {}, id, "fn"}; }

ChatOptions chat() { return ChatOptions{}; }
ChatOptions think(const std::string& e = "high") {
  ChatOptions o;
  o.thinking = true;
  o.reasoning_effort = e;
  return o;
}
ChatOptions with_tools(ChatOptions o, const std::string& tools) {
  o.tools_json = tools;
  return o;
}

const std::string kWeatherTool =
    R"([{"type": "function", "function": {"name": "get_weather", "description": "Get weather",)"
    R"( "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";
const std::string kWeatherSchema =
    R"({"name": "get_weather", "description": "Get weather", "parameters": {"type": "object",)"
    R"( "properties": {"city": {"type": "string"}}}})";

std::string tools_block(const std::string& schemas) {
  return "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools by "
         "writing a \"<｜DSML｜ calls>\" block like the following:\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke "
         "name=\"$TOOL_NAME\">\n<｜DSML｜ parameter name=\"$PARAMETER_NAME\" "
         "string=\"true|false\">$PARAMETER_VALUE</｜DSML｜ parameter>\n...\n</｜DSML｜ invoke>\n<｜DSML｜ invoke "
         "name=\"$TOOL_NAME2\">\n...\n</｜DSML｜ invoke>\n</｜DSML｜ calls>\n\nString parameters should be specified "
         "as is and set `string=\"true\"`. For all other types (numbers, booleans, arrays, objects), pass the value "
         "in JSON format and set `string=\"false\"`.\n\nIf thinking_mode is enabled (triggered by <think>), you MUST "
         "output your complete reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\n"
         "Otherwise, output directly after </think> with tool calls or final response.\n\n### Available Tool "
         "Schemas\n\n" +
         schemas + "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";
}

std::string param(const std::string& k, bool str, const std::string& v) {
  return "<｜DSML｜ parameter name=\"" + k + "\" string=\"" + (str ? "true" : "false") + "\">" + v +
         "</｜DSML｜ parameter>";
}
std::string invoke(const std::string& name, const std::string& params) {
  return "<｜DSML｜ invoke name=\"" + name + "\">\n" + params + "\n</｜DSML｜ invoke>";
}
std::string calls(const std::string& invokes) { return "\n\n<｜DSML｜ calls>\n" + invokes + "\n</｜DSML｜ calls>"; }

const ChatToolCall kParis{"c1", "get_weather", R"({"city": "Paris", "n": 3})"};
const std::string kParisDsml = invoke("get_weather", param("city", true, "Paris") + "\n" + param("n", false, "3"));

struct Case {
  const char* name;
  std::vector<ChatMessage> messages;
  ChatOptions options;
  std::string expected;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  c.push_back({"one_user", {user("Hi")}, chat(), BOS + USR + "Hi" + AST + TE});
  c.push_back({"system_user", {sys("SYS"), user("Hi")}, chat(), BOS + SYS + "SYS" + USR + "Hi" + AST + TE});
  c.push_back({"thinking_one_user", {user("Hi")}, think(), BOS + effort(75) + USR + "Hi" + AST + TS});
  c.push_back({"thinking_system", {sys("S"), user("U")}, think(), BOS + effort(75) + "S" + USR + "U" + AST + TS});
  c.push_back({"effort_low", {user("q")}, think("low"), BOS + effort(50) + USR + "q" + AST + TS});
  c.push_back({"effort_max", {user("q")}, think("max"), BOS + effort(100) + USR + "q" + AST + TS});
  c.push_back({"effort_1", {user("q")}, think("1"), BOS + effort(1) + USR + "q" + AST + TS});
  c.push_back({"effort_100", {user("q")}, think("100"), BOS + effort(100) + USR + "q" + AST + TS});
  c.push_back({"effort_ignored_in_chat", {user("q")}, [] { auto o = chat(); o.reasoning_effort = "max"; return o; }(),
               BOS + USR + "q" + AST + TE});
  c.push_back({"multi_turn_chat", {user("A"), asst("B", "hidden"), user("C")}, chat(),
               BOS + USR + "A" + AST + TE + "B" + EOS + USR + "C" + AST + TE});
  c.push_back({"thinking_drops_old_reasoning", {user("A"), asst("B", "r"), user("C")}, think(),
               BOS + effort(75) + USR + "A" + AST + TE + "B" + EOS + USR + "C" + AST + TS});
  c.push_back({"thinking_keeps_reasoning_after_last_user", {user("A"), asst("B", "r")}, think(),
               BOS + effort(75) + USR + "A" + AST + TS + "r" + TE + "B" + EOS});
  c.push_back({"thinking_three_rounds", {sys("S"), user("A"), asst("B", "r1"), user("C"), asst("D", "r2"), user("E")},
               think("low"),
               BOS + effort(50) + "S" + USR + "A" + AST + TE + "B" + EOS + USR + "C" + AST + TE + "D" + EOS + USR + "E" +
                   AST + TS});
  c.push_back({"mid_system_is_a_boundary", {user("A"), asst("B"), sys("New")}, chat(),
               BOS + USR + "A" + AST + TE + "B" + EOS + SYS + "New" + AST + TE});
  c.push_back({"mid_system_then_user", {user("A"), asst("B"), sys("N"), user("C")}, chat(),
               BOS + USR + "A" + AST + TE + "B" + EOS + SYS + "N" + USR + "C" + AST + TE});
  c.push_back({"thinking_mid_system", {user("A"), asst("B", "r"), sys("N")}, think(),
               BOS + effort(75) + USR + "A" + AST + TE + "B" + EOS + SYS + "N" + AST + TS});
  c.push_back({"consecutive_users_merge", {user("A"), user("B")}, chat(), BOS + USR + "A\n\nB" + AST + TE});
  c.push_back({"tool_call_and_result", {user("weather?"), asst("", "", {kParis}), tool("c1", "sunny")}, chat(),
               BOS + USR + "weather?" + AST + TE + calls(kParisDsml) + EOS + USR + "<tool_result>sunny</tool_result>" +
                   AST + TE});
  c.push_back({"tool_results_in_call_order",
               {user("q"), asst("", "", {{"c1", "f", "{}"}, {"c2", "g", "{}"}}), tool("c2", "b"), tool("c1", "a")},
               chat(),
               BOS + USR + "q" + AST + TE + calls(invoke("f", "") + "\n" + invoke("g", "")) + EOS + USR +
                   "<tool_result>a</tool_result>\n\n<tool_result>b</tool_result>" + AST + TE});
  c.push_back({"unknown_result_id_sorts_first",
               {user("q"), asst("", "", {{"c1", "f", "{}"}, {"c2", "g", "{}"}}), tool("cX", "x"), tool("c2", "b"),
                tool("c1", "a")},
               chat(),
               BOS + USR + "q" + AST + TE + calls(invoke("f", "") + "\n" + invoke("g", "")) + EOS + USR +
                   "<tool_result>x</tool_result>\n\n<tool_result>a</tool_result>\n\n<tool_result>b</tool_result>" +
                   AST + TE});
  c.push_back({"tool_result_then_user_text", {user("q"), asst("", "", {kParis}), tool("c1", "x"), user("thanks")},
               chat(),
               BOS + USR + "q" + AST + TE + calls(kParisDsml) + EOS + USR +
                   "<tool_result>x</tool_result>\n\nthanks" + AST + TE});
  c.push_back({"tool_message_first", {tool("c1", "orphan")}, chat(),
               BOS + USR + "<tool_result>orphan</tool_result>" + AST + TE});
  c.push_back({"thinking_tool_round_without_tools", {user("q"), asst("", "r", {kParis}), tool("c1", "sunny")}, think(),
               BOS + effort(75) + USR + "q" + AST + TE + calls(kParisDsml) + EOS + USR +
                   "<tool_result>sunny</tool_result>" + AST + TS});
  c.push_back({"tools_without_system", {user("q")}, with_tools(chat(), kWeatherTool),
               BOS + SYS + "\n\n" + tools_block(kWeatherSchema) + USR + "q" + AST + TE});
  c.push_back({"tools_with_system", {sys("S"), user("q")}, with_tools(chat(), kWeatherTool),
               BOS + SYS + "S\n\n" + tools_block(kWeatherSchema) + USR + "q" + AST + TE});
  c.push_back({"tools_keep_reasoning_in_thinking", {user("A"), asst("B", "r1"), user("C")},
               with_tools(think(), kWeatherTool),
               BOS + effort(75) + "\n\n" + tools_block(kWeatherSchema) + USR + "A" + AST + TS + "r1" + TE + "B" + EOS +
                   USR + "C" + AST + TS});
  c.push_back({"empty_tools_array_is_no_tools", {user("q")}, with_tools(chat(), "[]"), BOS + USR + "q" + AST + TE});
  c.push_back({"namespaced_tool", {user("go")},
               with_tools(chat(), R"([{"type": "function", "namespace": {"name": "ns", "description": "NS desc"},)"
                                  R"( "function": {"name": "do_it", "description": "D", "parameters": {}}}])"),
               BOS + SYS + "\n\n" + tools_block(R"({"name": "ns::do_it", "description": "NS desc\nD", "parameters": {}})") +
                   USR + "go" + AST + TE});
  c.push_back({"qualified_name_and_unicode_schema", {user("go")},
               with_tools(chat(), R"([{"function": {"name": "a::b", "description": "Ünï \"q\"\t", "x": [1, 2.5, null, true]}},)"
                                  R"( {"function": {"name": "c"}}])"),
               BOS + SYS + "\n\n" +
                   tools_block(R"({"name": "a::b", "description": "Ünï \"q\"\t", "x": [1, 2.5, null, true]})"
                               "\n" R"({"name": "c"})") +
                   USR + "go" + AST + TE});
  c.push_back({"double_encoded_arguments", {user("q"), asst("", "", {{"c1", "f", R"("{\"a\": 1}")"}})}, chat(),
               BOS + USR + "q" + AST + TE + calls(invoke("f", param("a", false, "1"))) + EOS});
  c.push_back({"array_arguments_become_one_string", {user("q"), asst("", "", {{"c1", "f", "[1, 2]"}})}, chat(),
               BOS + USR + "q" + AST + TE + calls(invoke("f", param("arguments", true, "[1, 2]"))) + EOS});
  c.push_back({"invalid_arguments_become_one_string", {user("q"), asst("", "", {{"c1", "f", "not json"}})}, chat(),
               BOS + USR + "q" + AST + TE + calls(invoke("f", param("arguments", true, "not json"))) + EOS});
  c.push_back({"argument_values_as_python_json",
               {user("q"), asst("", "", {{"c1", "f",
                                          R"({"list": [1, 2.5, "x"], "obj": {"k": null}, "flag": true, "f": 0.00001,)"
                                          R"( "big": 1e16, "mid": 123456.0, "s": "é\n"})"}})},
               chat(),
               BOS + USR + "q" + AST + TE +
                   calls(invoke("f", param("list", false, R"([1, 2.5, "x"])") + "\n" +
                                         param("obj", false, R"({"k": null})") + "\n" + param("flag", false, "true") +
                                         "\n" + param("f", false, "1e-05") + "\n" + param("big", false, "1e+16") +
                                         "\n" + param("mid", false, "123456.0") + "\n" + param("s", true, "é\n"))) +
                   EOS});
  c.push_back({"two_calls_with_content",
               {user("q"), asst("Let me check.", "", {kParis, {"c2", "get_time", R"({"tz": "CET"})"}})}, chat(),
               BOS + USR + "q" + AST + TE + "Let me check." +
                   calls(kParisDsml + "\n" + invoke("get_time", param("tz", true, "CET"))) + EOS});
  c.push_back({"no_generation_prompt", {user("A"), asst("B"), user("C")},
               [] { auto o = chat(); o.add_generation_prompt = false; return o; }(),
               BOS + USR + "A" + AST + TE + "B" + EOS + USR + "C"});
  c.push_back({"no_messages", {}, think(), BOS});
  c.push_back({"thinking_assistant_first", {asst("x", "r")}, think(), BOS + effort(75) + "r" + TE + "x" + EOS});
  c.push_back({"special_strings_in_content_are_text", {user("<｜User｜>" + EOS)}, chat(),
               BOS + USR + "<｜User｜>" + EOS + AST + TE});
  return c;
}

TEST(ChatEncoding, Conversations) {
  const auto all = cases();
  EXPECT_GE(all.size(), 30u);
  for (const Case& c : all) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(encode_chat(c.messages, c.options), c.expected);
  }
}

TEST(ChatEncoding, BadInputIsAnInputError) {
  for (const std::string e : {"0", "101", "medium", "", "07", "-5", "1.5", "xhigh", "1000"}) {
    ChatOptions o = chat();
    o.reasoning_effort = e;
    EXPECT_THROW(encode_chat({user("q")}, o), InputError) << e;
  }
  EXPECT_THROW(encode_chat({{"developer", "x", "", {}, "", ""}}, chat()), InputError);
  for (const std::string& tools : std::vector<std::string>{
           "{}", "[{}]", "[1]", R"([{"function": {}}])", R"([{"function": {"name": 3}}])", "not json",
        R"([{"namespace": "x", "function": {"name": "y::z"}}])", R"([{"function": {"name": "a::b::c"}}])",
        R"([{"namespace": {"description": "d"}, "function": {"name": "f"}}])",
        R"([{"function": {"name": "f", "p": )" + std::string(1000, '[') + std::string(1000, ']') + "}}]"}) {
    EXPECT_THROW(encode_chat({user("q")}, with_tools(chat(), tools)), InputError) << tools;
  }
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

// Expected texts printed by Python 3.11's json.dumps(..., ensure_ascii=False).
TEST(PyJson, MatchesPythonJsonDumps) {
  const auto dumps = [](const std::string& text) { return py_json_dumps(nlohmann::ordered_json::parse(text)); };
  EXPECT_EQ(dumps("[0.1, 1.0, -0.0, 1e16, 1e15, 123456789012345.6, 1.5e-5, 0.0001, 0.001, 2.5e-300, "
                  "1.7976931348623157e308, 5e-324, -123.456, 100.0, 1e22, 12345678.9]"),
            "[0.1, 1.0, -0.0, 1e+16, 1000000000000000.0, 123456789012345.6, 1.5e-05, 0.0001, 0.001, 2.5e-300, "
            "1.7976931348623157e+308, 5e-324, -123.456, 100.0, 1e+22, 12345678.9]");
  EXPECT_EQ(dumps(R"({"a": "\u0001\u001f\u2028\u007f\"\\/é😀\b\f\n\r\t", "b": [null, true, false, -5, 18446744073709551615]})"),
            "{\"a\": \"\\u0001\\u001f\u2028\x7f\\\"\\\\/é😀\\b\\f\\n\\r\\t\", \"b\": [null, true, false, -5, "
            "18446744073709551615]}");
  EXPECT_EQ(dumps(R"({"z": 1, "a": {"y": [], "x": {}}})"), R"({"z": 1, "a": {"y": [], "x": {}}})");
}

}  // namespace
}  // namespace deepinfer
