#include "server/chat_request.h"

#include "common/check.h"

namespace deepinfer::server {

namespace {

// Text of a message's content: a string, null, or an array of {"type": "text"} parts.
std::string content_text(const Json& msg, const std::string& param) {
  auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (!it->is_array())
    throw bad_request(str_cat("'", param, ".content' must be a string or an array of parts"), param + ".content");
  std::string text;
  for (const Json& part : *it) {
    if (!part.is_object()) throw bad_request(str_cat("'", param, ".content' parts must be objects"), param + ".content");
    auto type = part.find("type");
    auto t = part.find("text");
    if (type == part.end() || *type != "text" || t == part.end() || !t->is_string())
      throw bad_request(str_cat("'", param, ".content': only {\"type\": \"text\", \"text\": ...} parts are supported"),
                        param + ".content");
    text += t->get<std::string>();
  }
  return text;
}

std::vector<ChatToolCall> parse_tool_calls(const Json& msg, const std::string& param) {
  auto it = msg.find("tool_calls");
  if (it == msg.end() || it->is_null()) return {};
  const std::string p = param + ".tool_calls";
  if (!it->is_array()) throw bad_request(str_cat("'", p, "' must be an array"), p);
  std::vector<ChatToolCall> calls;
  for (const Json& call : *it) {
    auto fn = call.is_object() ? call.find("function") : call.end();
    if (fn == call.end() || !fn->is_object())
      throw bad_request(str_cat("'", p, "' entries must be {\"id\", \"type\": \"function\", \"function\": {...}}"), p);
    JsonFields f(*fn, p + "[].function.");
    ChatToolCall tc;
    tc.name = f.string("name", 1024).value_or("");
    if (tc.name.empty()) throw f.error("name", "is required");
    // Clients should send arguments as JSON text; accept an object too.
    const Json* args = f.get("arguments");
    tc.arguments_json = !args ? "{}" : args->is_string() ? args->get<std::string>() : dump_json(*args);
    if (auto id = call.find("id"); id != call.end() && id->is_string()) tc.id = id->get<std::string>();
    calls.push_back(std::move(tc));
  }
  return calls;
}

ChatMessage parse_message(const Json& msg, size_t index) {
  const std::string param = str_cat("messages[", index, "]");
  if (!msg.is_object()) throw bad_request(str_cat("'", param, "' must be an object"), param);
  JsonFields f(msg, param + ".");
  ChatMessage m;
  m.role = f.string("role", 64).value_or("");
  if (m.role == "developer") m.role = "system";
  if (m.role != "system" && m.role != "user" && m.role != "assistant" && m.role != "tool")
    throw f.error("role", "must be one of system, developer, user, assistant, tool");
  m.content = content_text(msg, param);
  m.name = f.string("name", 1024).value_or("");
  if (m.role == "assistant") {
    m.reasoning_content = f.string("reasoning_content").value_or("");
    m.tool_calls = parse_tool_calls(msg, param);
  } else if (f.has("tool_calls")) {
    throw f.error("tool_calls", "is only allowed in assistant messages");
  }
  if (m.role == "tool") m.tool_call_id = f.string("tool_call_id", 1024).value_or("");
  return m;
}

// Validates the OpenAI tools array and returns it as JSON text for the encoder.
std::string parse_tools(const JsonFields& f) {
  const Json* tools = f.array("tools");
  if (!tools || tools->empty()) return "";
  if (int64_t(tools->size()) > kMaxTools) throw f.error("tools", str_cat("has more than ", kMaxTools, " entries"));
  for (size_t i = 0; i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string p = str_cat("tools[", i, "]");
    auto fn = t.is_object() ? t.find("function") : t.end();
    auto type = t.is_object() ? t.find("type") : t.end();
    if (type == t.end() || *type != "function" || fn == t.end() || !fn->is_object())
      throw bad_request(str_cat("'", p, "' must be {\"type\": \"function\", \"function\": {...}}"), p);
    JsonFields ff(*fn, p + ".function.");
    if (ff.string("name", 1024).value_or("").empty()) throw ff.error("name", "is required");
    (void)ff.string("description");
    (void)ff.object("parameters");
  }
  return dump_json(*tools);
}

// thinking: bool or {"type": "enabled" | "disabled"}.
std::optional<bool> parse_thinking(const JsonFields& f, const char* name) {
  const Json* v = f.get(name);
  if (!v) return std::nullopt;
  if (v->is_boolean()) return v->get<bool>();
  if (v->is_object()) {
    auto type = v->find("type");
    if (type != v->end() && *type == "enabled") return true;
    if (type != v->end() && *type == "disabled") return false;
  }
  throw f.error(name, "must be a boolean or {\"type\": \"enabled\" | \"disabled\"}");
}

std::optional<std::string> parse_effort(const JsonFields& f) {
  auto effort = f.string("reasoning_effort", 64);
  if (!effort) return std::nullopt;
  if (*effort == "minimal" || *effort == "low") return "low";
  if (*effort == "medium" || *effort == "high") return "high";
  if (*effort == "max" || *effort == "xhigh") return "max";
  if (*effort == "none") return "none";
  throw f.error("reasoning_effort", "must be one of low, high, max (minimal, medium, none also accepted)");
}

}  // namespace

RenderedChat render_chat_prompt(const Json& body, const ModelInfo& model) {
  JsonFields f(body);
  const Json* messages = f.array("messages");
  if (!messages) throw ApiError(400, "'messages' is required", "messages", "missing_required_parameter");
  if (messages->empty()) throw f.error("messages", "must not be empty");
  if (int64_t(messages->size()) > kMaxMessages) throw f.error("messages", str_cat("has more than ", kMaxMessages, " entries"));
  std::vector<ChatMessage> msgs;
  msgs.reserve(messages->size());
  for (size_t i = 0; i < messages->size(); ++i) msgs.push_back(parse_message((*messages)[i], i));

  ChatOptions opts;
  std::optional<bool> thinking = parse_thinking(f, "thinking");
  std::optional<std::string> effort = parse_effort(f);
  if (const Json* kw = f.object("chat_template_kwargs")) {
    JsonFields k(*kw, "chat_template_kwargs.");
    if (auto t = parse_thinking(k, "thinking")) thinking = t;
    if (auto t = parse_thinking(k, "enable_thinking")) thinking = t;
    if (auto e = parse_effort(k)) effort = e;
  }
  if (effort == "none") {
    thinking = false;
    effort.reset();
  }
  opts.thinking = thinking.value_or(effort.has_value());
  if (effort) opts.reasoning_effort = *effort;

  std::string tools = parse_tools(f);
  if (const Json* choice = f.get("tool_choice")) {
    if (*choice == "none") tools.clear();
    else if (*choice != "auto")
      throw ApiError(400, "tool_choice other than \"auto\" or \"none\" is not supported yet", "tool_choice",
                     "unsupported_parameter");
  }
  (void)f.boolean("parallel_tool_calls");
  opts.tools_json = tools;
  opts.add_generation_prompt = f.boolean("add_generation_prompt").value_or(true);
  if (f.boolean("continue_final_message").value_or(false))
    throw ApiError(400, "continue_final_message is not supported yet", "continue_final_message", "unsupported_parameter");
  try {
    return RenderedChat{encode_chat(msgs, opts), opts.thinking, !tools.empty()};
  } catch (const InputError& e) {
    throw bad_request(str_cat("messages cannot be encoded: ", e.what()), "messages");
  }
}

ChatRequest parse_chat_request(const Json& body, const Engine& engine, const ModelInfo& model) {
  JsonFields f(body);
  check_model(f, model);
  reject_unsupported_fields(f);
  (void)f.string("user");
  if (f.boolean("echo").value_or(false)) throw ApiError(400, "echo is not supported for chat", "echo", "unsupported_parameter");
  ChatRequest r;
  r.n = f.integer("n", 1, kMaxChoices).value_or(1);
  r.return_token_ids = f.boolean("return_token_ids").value_or(false);
  r.stream = parse_stream_flags(f);
  r.sampling = parse_sampling(f, model.vocab_size);
  auto max_tokens = f.integer("max_completion_tokens", 1, model.max_model_len);
  if (!max_tokens) max_tokens = f.integer("max_tokens", 1, model.max_model_len);
  const bool logprobs = f.boolean("logprobs").value_or(false);
  auto top = f.integer("top_logprobs", 0, kMaxTopLogprobs);
  if (top && !logprobs) throw f.error("top_logprobs", "requires 'logprobs': true");
  r.sampling.logprobs = logprobs ? top.value_or(0) : -1;

  r.prompt = render_chat_prompt(body, model);
  r.sampling.structured = parse_structured_outputs(body, engine);
  // The constraint covers the whole completion, so reasoning text would have to match it.
  if (r.sampling.structured && r.prompt.thinking)
    throw ApiError(400, "structured outputs (response_format, structured_outputs, guided_*) cannot be combined with "
                   "thinking; turn thinking off", "thinking", "unsupported_parameter");
  r.prompt_ids = engine.tokenize(r.prompt.text);
  if (r.prompt_ids.empty()) throw f.error("messages", "render to an empty prompt");
  const int64_t prompt_len = int64_t(r.prompt_ids.size());
  check_context_length(prompt_len, max_tokens.value_or(0), model, "messages");
  // Without a limit, the completion may use the rest of the context (vLLM's default).
  r.sampling.max_tokens = max_tokens.value_or(model.max_model_len - prompt_len);
  return r;
}

}  // namespace deepinfer::server
