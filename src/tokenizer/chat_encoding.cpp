#include "tokenizer/chat_encoding.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/check.h"
#include "tokenizer/chat_tags.h"
#include "tokenizer/py_json.h"

namespace deepinfer {

namespace {

using nlohmann::ordered_json;
using namespace chat_tags;

std::string tools_block(const std::string& schemas) {
  const std::string calls = std::string("<") + kDsml + kCallsName + ">";
  const std::string invoke = std::string("<") + kDsml + kInvokeName;
  const std::string invoke_end = std::string("</") + kDsml + kInvokeName + ">";
  const std::string param = std::string("<") + kDsml + kParameterName;
  const std::string param_end = std::string("</") + kDsml + kParameterName + ">";
  return "## Tools\n\nYou have access to a set of tools to help answer the user's question. You can invoke tools "
         "by writing a \"" + calls + "\" block like the following:\n\n" +
         calls + "\n" + invoke + " name=\"$TOOL_NAME\">\n" + param +
         " name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE" + param_end + "\n...\n" + invoke_end +
         "\n" + invoke + " name=\"$TOOL_NAME2\">\n...\n" + invoke_end + "\n</" + kDsml + kCallsName + ">\n\n" +
         "String parameters should be specified as is and set `string=\"true\"`. For all other types (numbers, "
         "booleans, arrays, objects), pass the value in JSON format and set `string=\"false\"`.\n\n"
         "If thinking_mode is enabled (triggered by " + kThinkStart + "), you MUST output your complete reasoning "
         "inside " + kThinkStart + "..." + kThinkEnd + " BEFORE any tool calls or final response.\n\n"
         "Otherwise, output directly after " + kThinkEnd + " with tool calls or final response.\n\n"
         "### Available Tool Schemas\n\n" + schemas +
         "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke tool calls.\n";
}

int effort_budget(const std::string& effort) {
  if (effort == "low") return 50;
  if (effort == "high") return 75;
  if (effort == "max") return 100;
  const bool digits = !effort.empty() && effort.size() <= 3 &&
                      std::all_of(effort.begin(), effort.end(), [](char c) { return c >= '0' && c <= '9'; });
  const int value = digits ? std::stoi(effort) : 0;
  DI_CHECK_INPUT(digits && effort[0] != '0' && value >= 1 && value <= 100, "reasoning_effort '", effort,
                 "' must be low, high, max or a whole number from 1 to 100");
  return value;
}

// encoding.py's tool-name rules: "ns::name" or a namespace given beside the name.
std::string qualified_name(const std::string& name, std::optional<std::string> ns) {
  std::string bare = name;
  const size_t sep = name.find("::");
  if (sep != std::string::npos) {
    const std::string prefix = name.substr(0, sep);
    DI_CHECK_INPUT(!ns || *ns == prefix, "tool '", name, "' conflicts with its namespace '", *ns, "'");
    ns = prefix;
    bare = name.substr(sep + 2);
  }
  DI_CHECK_INPUT(bare.find("::") == std::string::npos, "tool name '", bare, "' must not contain '::'");
  DI_CHECK_INPUT(!ns || ns->find("::") == std::string::npos, "tool namespace '", *ns, "' must not contain '::'");
  return ns ? *ns + "::" + bare : bare;
}

std::string tool_schemas(const std::string& tools_json) {
  const ordered_json tools = ordered_json::parse(tools_json, nullptr, /*allow_exceptions=*/false);
  DI_CHECK_INPUT(!tools.is_discarded() && tools.is_array(), "tools must be a JSON array");
  std::string out;
  for (const ordered_json& tool : tools) {
    DI_CHECK_INPUT(tool.is_object() && tool.contains("function") && tool["function"].is_object(),
                   "every tool must be an object with a 'function' object");
    ordered_json function = tool["function"];
    if (tool.contains("namespace") && !tool["namespace"].is_null()) function["namespace"] = tool["namespace"];
    DI_CHECK_INPUT(function.contains("name") && function["name"].is_string(), "every tool function needs a string name");
    std::optional<std::string> ns;
    std::string ns_description;
    if (function.contains("namespace") && !function["namespace"].is_null()) {
      const ordered_json& n = function["namespace"];
      if (n.is_string()) {
        ns = n.get<std::string>();
      } else {
        DI_CHECK_INPUT(n.is_object() && n.contains("name") && n["name"].is_string(),
                       "a tool namespace must be a string or an object with a string name");
        ns = n["name"].get<std::string>();
        if (n.contains("description") && n["description"].is_string()) ns_description = n["description"];
      }
    }
    function["name"] = qualified_name(function["name"].get<std::string>(), ns);
    function.erase("namespace");
    if (!ns_description.empty()) {
      const auto d = function.find("description");
      const std::string own = d != function.end() && d->is_string() ? d->get<std::string>() : "";
      function["description"] = ns_description + "\n" + own;
    }
    if (!out.empty()) out += "\n";
    out += py_json_dumps(function);
  }
  return out;
}

// encoding.py's encode_arguments_to_dsml: the arguments JSON (decoded up to twice, for
// double-encoded strings) as one parameter per key; anything but an object becomes a
// single "arguments" string parameter.
std::string dsml_arguments(const std::string& arguments_json) {
  ordered_json value = arguments_json;
  for (int i = 0; i < 2 && value.is_string(); ++i) {
    ordered_json parsed = ordered_json::parse(value.get<std::string>(), nullptr, false);
    if (parsed.is_discarded()) break;
    value = std::move(parsed);
  }
  if (!value.is_object()) value = ordered_json::object({{"arguments", arguments_json}});
  std::string out;
  for (auto it = value.begin(); it != value.end(); ++it) {
    if (!out.empty()) out += "\n";
    const bool is_string = it.value().is_string();
    out += std::string("<") + kDsml + kParameterName + " name=\"" + it.key() + "\" string=\"" +
           (is_string ? "true" : "false") + "\">" +
           (is_string ? it.value().get<std::string>() : py_json_dumps(it.value())) + "</" + kDsml + kParameterName +
           ">";
  }
  return out;
}

struct Block {
  bool tool_result = false;
  std::string text, tool_call_id;
};

struct Turn {
  std::string role;
  std::string content, reasoning;
  std::vector<Block> blocks;  // user
  const std::vector<ChatToolCall>* tool_calls = nullptr;
  bool tools = false;
};

Turn make_turn(const std::string& role, const std::string& content = "", const std::string& reasoning = "") {
  Turn t;
  t.role = role;
  t.content = content;
  t.reasoning = reasoning;
  return t;
}

// Tool messages become <tool_result> blocks of the user turn before them, and
// consecutive user messages merge (encoding.py's merge_tool_messages).
std::vector<Turn> merge_turns(const std::vector<ChatMessage>& messages) {
  std::vector<Turn> turns;
  for (const ChatMessage& m : messages) {
    DI_CHECK_INPUT(m.role == "system" || m.role == "user" || m.role == "assistant" || m.role == "tool",
                   "unsupported chat role '", m.role, "' (system, user, assistant or tool)");
    if (m.role == "tool" || m.role == "user") {
      Block block{m.role == "tool", m.content, m.tool_call_id};
      if (turns.empty() || turns.back().role != "user") turns.push_back(make_turn("user"));
      turns.back().blocks.push_back(std::move(block));
      continue;
    }
    Turn t = make_turn(m.role, m.content, m.reasoning_content);
    if (m.role == "assistant") t.tool_calls = &m.tool_calls;
    turns.push_back(std::move(t));
  }
  return turns;
}

// Several results in one user turn follow the order of the calls of the latest assistant
// turn with calls; unknown ids sort as the first call (encoding.py's key default 0).
void sort_tool_results(std::vector<Turn>* turns) {
  std::map<std::string, size_t> order;
  for (Turn& t : *turns) {
    if (t.role == "assistant" && t.tool_calls && !t.tool_calls->empty()) {
      order.clear();
      for (size_t i = 0; i < t.tool_calls->size(); ++i)
        if (!(*t.tool_calls)[i].id.empty()) order[(*t.tool_calls)[i].id] = i;
    } else if (t.role == "user" && !order.empty()) {
      std::vector<Block> results;
      for (const Block& b : t.blocks)
        if (b.tool_result) results.push_back(b);
      if (results.size() < 2) continue;
      const auto key = [&](const Block& b) {
        const auto it = order.find(b.tool_call_id);
        return it == order.end() ? size_t(0) : it->second;
      };
      std::stable_sort(results.begin(), results.end(), [&](const Block& a, const Block& b) { return key(a) < key(b); });
      size_t next = 0;
      for (Block& b : t.blocks)
        if (b.tool_result) b = results[next++];
    }
  }
}

std::string render_calls(const std::vector<ChatToolCall>& calls) {
  std::string inner;
  for (const ChatToolCall& c : calls) {
    if (!inner.empty()) inner += "\n";
    inner += std::string("<") + kDsml + kInvokeName + " name=\"" + c.name + "\">\n" + dsml_arguments(c.arguments_json) +
             "\n</" + kDsml + kInvokeName + ">";
  }
  return std::string("\n\n<") + kDsml + kCallsName + ">\n" + inner + "\n</" + kDsml + kCallsName + ">";
}

}  // namespace

std::string encode_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options) {
  const int budget = effort_budget(options.reasoning_effort);
  std::vector<Turn> turns = merge_turns(messages);
  std::string schemas;
  if (!options.tools_json.empty()) schemas = tool_schemas(options.tools_json);
  const bool has_tools = !schemas.empty();
  if (has_tools) {
    if (turns.empty() || turns[0].role != "system") turns.insert(turns.begin(), make_turn("system"));
    turns[0].tools = true;
  }
  sort_tool_results(&turns);

  // With tools, earlier turns keep their reasoning (encoding.py turns drop_thinking off).
  const bool drop_thinking = !has_tools;
  int64_t last_user = -1;
  for (int64_t i = int64_t(turns.size()) - 1; i >= 0; --i) {
    if (turns[i].role == "user" || (turns[i].role == "system" && i > 0)) {
      last_user = i;
      break;
    }
  }

  std::string prompt = kBos;
  for (int64_t i = 0; i < int64_t(turns.size()); ++i) {
    const Turn& t = turns[i];
    if (i == 0 && (options.thinking || t.role == "system")) prompt += kSystem;
    if (i == 0 && options.thinking) {
      prompt += "Reasoning Effort: " + std::to_string(budget) +
                " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";
    }
    if (t.role == "system") {
      if (i > 0) prompt += kSystem;
      prompt += t.content;
      if (t.tools) prompt += "\n\n" + tools_block(schemas);
    } else if (t.role == "user") {
      prompt += kUser;
      for (size_t b = 0; b < t.blocks.size(); ++b) {
        if (b > 0) prompt += "\n\n";
        const Block& block = t.blocks[b];
        prompt += block.tool_result ? "<tool_result>" + block.text + "</tool_result>" : block.text;
      }
    } else {  // assistant
      if (options.thinking && (!drop_thinking || i > last_user)) prompt += t.reasoning + kThinkEnd;
      prompt += t.content;
      if (t.tool_calls && !t.tool_calls->empty()) prompt += render_calls(*t.tool_calls);
      prompt += kEos;
    }
    const bool last = i + 1 == int64_t(turns.size());
    if (!last && turns[i + 1].role != "assistant") continue;
    if (t.role == "user" || (t.role == "system" && i > 0)) {
      if (options.add_generation_prompt || !last) {
        prompt += kAssistant;
        prompt += options.thinking && (!drop_thinking || i >= last_user) ? kThinkStart : kThinkEnd;
      }
    }
  }
  return prompt;
}

}  // namespace deepinfer
