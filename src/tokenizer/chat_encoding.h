// DeepSeek-V4.1's prompt format (MODEL_V41.md §10) and the parser for what the model
// writes back. The rules follow the checkpoint's encoding/encoding.py as ported by
// NVIDIA TensorRT-LLM (tensorrt_llm/tokenizer/deepseek_v41, whose tests check it against
// that file); where our API differs from encoding.py's, the choice is documented on the
// field. In short, a prompt is
//
//   BOS [<｜System｜>[Reasoning Effort: B (range 1-100, ...)\n\n][system text][\n\n## Tools ...]]
//   <｜User｜>user text / <tool_result>..</tool_result> blocks, joined by blank lines
//   <｜Assistant｜> then <think> (thinking) or </think> (chat)
//   [reasoning</think>]answer[\n\n<｜DSML｜ calls>...</｜DSML｜ calls>]<｜end▁of▁sentence｜>
//   ...
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

struct ChatToolCall {
  std::string id, name, arguments_json;
};

struct ChatMessage {
  std::string role;  // system|user|assistant|tool
  std::string content, reasoning_content;
  std::vector<ChatToolCall> tool_calls;  // assistant
  std::string tool_call_id, name;        // tool (name is not rendered)
};

struct ChatOptions {
  bool thinking = false;
  // low (50) | high (75) | max (100) | "1".."100". Checked even without thinking, as
  // encoding.py does.
  std::string reasoning_effort = "high";
  // The OpenAI tools array as JSON text; empty = none. The tools are rendered into the
  // first message when it is a system message, else into an empty system message put
  // first (encoding.py reads them from a message's "tools" field).
  std::string tools_json;
  // false leaves out the <｜Assistant｜> header after the last message (encoding.py
  // always adds it; TensorRT-LLM's port makes it optional the same way).
  bool add_generation_prompt = true;
};

// The full prompt text, starting with the BOS string. Previous turns' reasoning is
// dropped in thinking mode unless tools are given (encoding.py's drop_thinking). Tool
// messages fold into the user turn before them; several results are ordered by the
// preceding assistant's call order. InputError for an unknown role, a bad effort, or
// tools_json that is not an array of {"function": {"name": ...}} objects.
std::string encode_chat(const std::vector<ChatMessage>& messages, const ChatOptions& options);

// Splits generated text into reasoning, answer and tool calls as it streams in. In
// thinking mode everything before </think> is reasoning (a leading <think> is dropped);
// with tools, each <｜DSML｜ calls> block becomes tool calls (the blank line before it is
// not content). Text that could still turn out to be part of a tag, or an unfinished
// UTF-8 character, is held back until it is decided. <｜end▁of▁sentence｜> ends the
// output: nothing after it is returned. Tool-call markup that does not parse is
// returned as content from the point where parsing failed. Tool call ids are call_0,
// call_1, ... in order. The deltas of any split of the text concatenate to the same
// result.
class OutputParser {
 public:
  OutputParser(bool thinking, bool tools);
  struct Delta {
    std::string reasoning_content, content;
    std::vector<ChatToolCall> tool_calls;
  };
  Delta feed(std::string_view text);
  Delta finish();

 private:
  enum class State { kThinkStart, kReasoning, kContent, kCalls, kDone };
  void process(bool final, Delta* delta);
  bool step_reasoning(bool final, Delta* delta);
  bool step_content(bool final, Delta* delta);
  bool step_calls(bool final, Delta* delta);
  // Emits buf_[0, n) (less an unfinished UTF-8 tail unless final) into `out`.
  void emit(size_t n, bool final, std::string* out);

  bool tools_;
  State state_;
  std::string buf_;
  int next_call_ = 0;
};

}  // namespace deepinfer
