// OutputParser (chat_encoding.h): a small state machine over a buffer of text not yet
// returned. Each step either decides something from text that is already there, or
// waits; nothing depends on where the chunks were cut.
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "tokenizer/chat_encoding.h"
#include "tokenizer/chat_tags.h"
#include "tokenizer/py_json.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

namespace {

using namespace chat_tags;

const std::string kEosTag = kEos;
const std::string kThinkStartTag = kThinkStart;
const std::string kThinkEndTag = kThinkEnd;
const std::string kCallsOpen = std::string("<") + kDsml + kCallsName + ">";
const std::string kCallsClose = std::string("</") + kDsml + kCallsName + ">";
const std::string kInvokeOpen = std::string("<") + kDsml + kInvokeName + " name=\"";
const std::string kInvokeClose = std::string("</") + kDsml + kInvokeName + ">";
const std::string kParamOpen = std::string("<") + kDsml + kParameterName + " name=\"";
const std::string kParamClose = std::string("</") + kDsml + kParameterName + ">";
const std::string kStringAttr = "\" string=\"";

bool starts_with(std::string_view text, std::string_view prefix) { return text.substr(0, prefix.size()) == prefix; }

// The length of the longest suffix of `text` that is a proper prefix of `tag`.
size_t partial_suffix(std::string_view text, std::string_view tag) {
  for (size_t n = std::min(text.size(), tag.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

size_t skip_space(std::string_view text, size_t pos) {
  while (pos < text.size() && is_space(text[pos])) ++pos;
  return pos;
}

// One complete `<｜DSML｜ invoke name="..."> ... </｜DSML｜ invoke>` element.
bool parse_invoke(std::string_view text, ChatToolCall* call) {
  size_t pos = kInvokeOpen.size();
  const size_t name_end = text.find('"', pos);
  if (name_end == std::string_view::npos || !starts_with(text.substr(name_end), "\">")) return false;
  call->name = std::string(text.substr(pos, name_end - pos));
  pos = name_end + 2;
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  while (true) {
    pos = skip_space(text, pos);
    if (starts_with(text.substr(pos), kInvokeClose)) break;
    if (!starts_with(text.substr(pos), kParamOpen)) return false;
    pos += kParamOpen.size();
    const size_t key_end = text.find('"', pos);
    if (key_end == std::string_view::npos || !starts_with(text.substr(key_end), kStringAttr)) return false;
    const std::string key(text.substr(pos, key_end - pos));
    pos = key_end + kStringAttr.size();
    bool is_string;
    if (starts_with(text.substr(pos), "true\">")) {
      is_string = true;
      pos += 6;
    } else if (starts_with(text.substr(pos), "false\">")) {
      is_string = false;
      pos += 7;
    } else {
      return false;
    }
    const size_t value_end = text.find(kParamClose, pos);
    if (value_end == std::string_view::npos) return false;
    const std::string value(text.substr(pos, value_end - pos));
    pos = value_end + kParamClose.size();
    nlohmann::ordered_json parsed;
    if (!is_string) parsed = nlohmann::ordered_json::parse(value, nullptr, /*allow_exceptions=*/false);
    args[key] = is_string || parsed.is_discarded() ? nlohmann::ordered_json(value) : std::move(parsed);
  }
  try {
    call->arguments_json = py_json_dumps(args);
  } catch (const InputError&) {  // nested too deeply to re-serialise: keep the values as text
    for (auto it = args.begin(); it != args.end(); ++it) it.value() = it.value().dump();
    call->arguments_json = py_json_dumps(args);
  }
  return true;
}

}  // namespace

OutputParser::OutputParser(bool thinking, bool tools)
    : tools_(tools), state_(thinking ? State::kThinkStart : State::kContent) {}

OutputParser::Delta OutputParser::feed(std::string_view text) {
  Delta delta;
  buf_.append(text);
  process(false, &delta);
  return delta;
}

OutputParser::Delta OutputParser::finish() {
  Delta delta;
  process(true, &delta);
  buf_.clear();
  state_ = State::kDone;
  return delta;
}

void OutputParser::emit(size_t n, bool final, std::string* out) {
  const size_t cut = final ? n : complete_utf8_prefix(std::string_view(buf_).substr(0, n));
  out->append(buf_, 0, cut);
  buf_.erase(0, cut);
}

void OutputParser::process(bool final, Delta* delta) {
  while (true) {
    bool again = false;
    switch (state_) {
      case State::kThinkStart:
        if (starts_with(buf_, kThinkStartTag)) {
          buf_.erase(0, kThinkStartTag.size());
        } else if (!final && starts_with(kThinkStartTag, buf_)) {
          return;  // could still become <think>
        }
        state_ = State::kReasoning;
        again = true;
        break;
      case State::kReasoning:
        again = step_reasoning(final, delta);
        break;
      case State::kContent:
        again = step_content(final, delta);
        break;
      case State::kCalls:
        again = step_calls(final, delta);
        break;
      case State::kDone:
        buf_.clear();
        return;
    }
    if (!again) return;
  }
}

bool OutputParser::step_reasoning(bool final, Delta* delta) {
  const size_t end = buf_.find(kThinkEndTag), eos = buf_.find(kEosTag);
  if (end != std::string::npos && (eos == std::string::npos || end < eos)) {
    emit(end, true, &delta->reasoning_content);
    buf_.erase(0, kThinkEndTag.size());
    state_ = State::kContent;
    return true;
  }
  if (eos != std::string::npos) {
    emit(eos, true, &delta->reasoning_content);
    state_ = State::kDone;
    return true;
  }
  const size_t hold = final ? 0 : std::max(partial_suffix(buf_, kThinkEndTag), partial_suffix(buf_, kEosTag));
  emit(buf_.size() - hold, final, &delta->reasoning_content);
  return false;
}

bool OutputParser::step_content(bool final, Delta* delta) {
  const size_t calls = tools_ ? buf_.find(kCallsOpen) : std::string::npos, eos = buf_.find(kEosTag);
  if (calls != std::string::npos && (eos == std::string::npos || calls < eos)) {
    // encode_chat writes a blank line before the block; it is not part of the answer.
    size_t newlines = 0;
    while (newlines < 2 && newlines < calls && buf_[calls - 1 - newlines] == '\n') ++newlines;
    emit(calls - newlines, true, &delta->content);
    buf_.erase(0, newlines + kCallsOpen.size());
    state_ = State::kCalls;
    return true;
  }
  if (eos != std::string::npos) {
    emit(eos, true, &delta->content);
    state_ = State::kDone;
    return true;
  }
  size_t hold = 0;
  if (!final) {
    hold = partial_suffix(buf_, kEosTag);
    if (tools_) {
      for (const std::string& tag : {"\n\n" + kCallsOpen, "\n" + kCallsOpen, kCallsOpen})
        hold = std::max(hold, partial_suffix(buf_, tag));
    }
  }
  emit(buf_.size() - hold, final, &delta->content);
  return false;
}

bool OutputParser::step_calls(bool final, Delta* delta) {
  const size_t start = skip_space(buf_, 0);
  const std::string_view rest = std::string_view(buf_).substr(start);
  if (rest.empty()) {
    if (final) buf_.clear();
    return false;
  }
  if (starts_with(rest, kCallsClose)) {
    buf_.erase(0, start + kCallsClose.size());
    state_ = State::kContent;
    return true;
  }
  if (starts_with(rest, kInvokeOpen)) {
    const size_t close = rest.find(kInvokeClose);
    if (close == std::string_view::npos && !final) return false;  // the element is still arriving
    ChatToolCall call;
    if (close != std::string_view::npos && parse_invoke(rest.substr(0, close + kInvokeClose.size()), &call)) {
      call.id = "call_" + std::to_string(next_call_++);
      delta->tool_calls.push_back(std::move(call));
      buf_.erase(0, start + close + kInvokeClose.size());
      return true;
    }
  } else if (!final && (starts_with(kCallsClose, rest) || starts_with(kInvokeOpen, rest))) {
    return false;  // a tag still arriving
  }
  state_ = State::kContent;  // markup that does not parse is returned as text
  return true;
}

}  // namespace deepinfer
