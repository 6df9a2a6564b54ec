#include "server/chat_job.h"

#include "server/chat_request.h"
#include "server/openai_format.h"

namespace deepinfer::server {

namespace {

// The parser numbers calls call_0, call_1, ... per output; ids must stay unique
// across the turns of a conversation, so each gets a fresh one.
Json tool_call_json(const ChatToolCall& call) {
  return Json{{"id", new_response_id("call_")},
              {"type", "function"},
              {"function", {{"name", call.name}, {"arguments", call.arguments_json}}}};
}

class ChatJob : public GenerationJob {
 public:
  ChatJob(JobContext ctx, std::shared_ptr<ResponseChannel> channel, ChatRequest request)
      : GenerationJob(std::move(ctx), std::move(channel), request.stream.stream, request.stream.include_usage,
                      "chatcmpl-"),
        req_(std::move(request)) {
    for (int64_t c = 0; c < req_.n; ++c) {
      Sequence seq;
      seq.index = c;
      seq.request.prompt_ids = req_.prompt_ids;
      seq.request.params = req_.sampling;  // the engine runs the n choices as one request
      seqs_.push_back(std::move(seq));
      choices_.push_back(std::make_unique<Choice>(req_.prompt.thinking, req_.prompt.tools));
    }
  }

 private:
  struct Choice {
    Choice(bool thinking, bool tools) : parser(thinking, tools) {}
    OutputParser parser;
    std::string reasoning, content;
    Json tool_calls = Json::array();
    Json logprobs = Json::array();
  };

  const char* chunk_object() const override { return "chat.completion.chunk"; }

  void emit(const Sequence& seq, Json delta, Json logprobs, Json finish_reason, Json token_ids) {
    Json event = object_head("chat.completion.chunk");
    Json c = {{"index", seq.index}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
              {"finish_reason", std::move(finish_reason)}};
    if (!token_ids.is_null()) c["token_ids"] = std::move(token_ids);
    event["choices"] = Json::array({std::move(c)});
    send_event(std::move(event));
  }

  void on_stream_start() override {
    for (const Sequence& seq : seqs_) {
      Json event = object_head("chat.completion.chunk");
      event["choices"] = Json::array({{{"index", seq.index},
                                       {"delta", {{"role", "assistant"}, {"content", ""}}},
                                       {"logprobs", nullptr},
                                       {"finish_reason", nullptr}}});
      if (req_.return_token_ids) event["prompt_token_ids"] = req_.prompt_ids;
      send_event(std::move(event));
    }
  }

  // Adds a parser delta to the choice; returns it as an OpenAI delta object.
  Json absorb(Choice& choice, const OutputParser::Delta& d) {
    Json delta = Json::object();
    if (!d.reasoning_content.empty()) {
      choice.reasoning += d.reasoning_content;
      delta["reasoning_content"] = d.reasoning_content;
    }
    if (!d.content.empty()) {
      choice.content += d.content;
      delta["content"] = d.content;
    }
    for (const ChatToolCall& call : d.tool_calls) {
      Json tc = tool_call_json(call);
      Json streamed = tc;
      streamed["index"] = choice.tool_calls.size();
      choice.tool_calls.push_back(std::move(tc));
      delta["tool_calls"].push_back(std::move(streamed));
    }
    return delta;
  }

  void on_output(Sequence& seq, const RequestOutput& out) override {
    Choice& choice = *choices_[seq.index];
    Json delta = absorb(choice, choice.parser.feed(out.text_delta));
    if (out.finished) {
      Json tail = absorb(choice, choice.parser.finish());
      for (auto& [key, value] : tail.items()) {
        if (key == "tool_calls") {
          for (Json& tc : value) delta["tool_calls"].push_back(std::move(tc));
        } else {
          delta[key] = delta.value(key, std::string()) + value.get<std::string>();
        }
      }
    }
    Json logprobs = nullptr;
    if (req_.sampling.logprobs >= 0 && !out.logprobs.empty()) {
      Json entries = chat_logprob_entries(out.logprobs, engine());
      if (stream_) logprobs = Json{{"content", std::move(entries)}};
      else for (Json& e : entries) choice.logprobs.push_back(std::move(e));
    }
    if (!stream_) return;
    if (delta.empty() && logprobs.is_null() && !out.finished) return;
    emit(seq, std::move(delta), std::move(logprobs), out.finished ? Json(finish_reason(seq)) : Json(nullptr),
         req_.return_token_ids ? Json(out.new_token_ids) : Json(nullptr));
  }

  std::string finish_reason(const Sequence& seq) const {
    const Choice& choice = *choices_[seq.index];
    return seq.finish_reason == "stop" && !choice.tool_calls.empty() ? "tool_calls" : seq.finish_reason;
  }

  Json response_body() override {
    Json body = object_head("chat.completion");
    Json choices = Json::array();
    for (const Sequence& seq : seqs_) {
      Choice& choice = *choices_[seq.index];
      Json message = {{"role", "assistant"},
                      {"content", choice.content.empty() && !choice.tool_calls.empty() ? Json(nullptr)
                                                                                      : Json(choice.content)},
                      {"reasoning_content", choice.reasoning.empty() ? Json(nullptr) : Json(choice.reasoning)}};
      if (!choice.tool_calls.empty()) message["tool_calls"] = choice.tool_calls;
      Json c = {{"index", seq.index},
                {"message", std::move(message)},
                {"logprobs", req_.sampling.logprobs >= 0 ? Json{{"content", choice.logprobs}} : Json(nullptr)},
                {"finish_reason", finish_reason(seq)}};
      if (req_.return_token_ids) c["token_ids"] = seq.token_ids;
      choices.push_back(std::move(c));
    }
    body["choices"] = std::move(choices);
    body["usage"] = usage();
    if (req_.return_token_ids) body["prompt_token_ids"] = req_.prompt_ids;
    return body;
  }

  ChatRequest req_;
  std::vector<std::unique_ptr<Choice>> choices_;  // OutputParser need not be movable
};

}  // namespace

std::shared_ptr<GenerationJob> make_chat_job(JobContext ctx, std::shared_ptr<ResponseChannel> channel,
                                             const Json& body) {
  ChatRequest request = parse_chat_request(body, ctx.backend->engine(), ctx.model);
  return std::make_shared<ChatJob>(std::move(ctx), std::move(channel), std::move(request));
}

}  // namespace deepinfer::server
