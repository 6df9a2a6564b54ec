#include "server/completion_job.h"

#include "server/openai_format.h"

namespace deepinfer::server {

namespace {

class CompletionJob : public GenerationJob {
 public:
  CompletionJob(JobContext ctx, std::shared_ptr<ResponseChannel> channel, CompletionRequest request)
      : GenerationJob(std::move(ctx), std::move(channel), request.stream.stream, request.stream.include_usage, "cmpl-"),
        req_(std::move(request)) {
    for (size_t p = 0; p < req_.prompts.size(); ++p) {
      for (int64_t c = 0; c < req_.n; ++c) {
        Sequence seq;
        seq.index = int64_t(p) * req_.n + c;
        seq.prompt_index = int64_t(p);
        seq.request.prompt_ids = req_.prompts[p].ids;
        seq.request.params = req_.sampling;  // the engine runs the n choices as one request
        seqs_.push_back(std::move(seq));
        Choice choice;
        if (req_.echo) choice.text = req_.prompts[p].text;
        if (req_.sampling.logprobs >= 0) choice.logprobs = empty_completion_logprobs();
        choices_.push_back(std::move(choice));
      }
    }
  }

 private:
  struct Choice {
    std::string text;
    Json logprobs;  // null unless requested
  };

  const char* chunk_object() const override { return "text_completion"; }

  Json chunk(const Sequence& seq, std::string text, Json logprobs) {
    Json c = {{"index", seq.index}, {"text", std::move(text)}, {"logprobs", std::move(logprobs)},
              {"finish_reason", nullptr}};
    return c;
  }

  void emit(Json choice) {
    Json event = object_head("text_completion");
    event["choices"] = Json::array({std::move(choice)});
    send_event(std::move(event));
  }

  void on_stream_start() override {
    for (const Sequence& seq : seqs_) {
      const bool echo = req_.echo;
      if (!echo && !req_.return_token_ids) continue;
      Json c = chunk(seq, echo ? req_.prompts[seq.prompt_index].text : "", nullptr);
      if (req_.return_token_ids) c["prompt_token_ids"] = seq.request.prompt_ids;
      emit(std::move(c));
    }
  }

  void on_output(Sequence& seq, const RequestOutput& out) override {
    Choice& choice = choices_[seq.index];
    Json delta_logprobs = nullptr;
    if (!choice.logprobs.is_null() && !out.logprobs.empty()) {
      if (stream_) {
        delta_logprobs = empty_completion_logprobs();
        append_completion_logprobs(delta_logprobs, out.logprobs, engine(), choice.text.size());
      } else {
        append_completion_logprobs(choice.logprobs, out.logprobs, engine(), choice.text.size());
      }
    }
    choice.text += out.text_delta;
    if (!stream_) return;
    if (out.text_delta.empty() && out.new_token_ids.empty() && !out.finished) return;
    Json c = chunk(seq, out.text_delta, std::move(delta_logprobs));
    if (out.finished) c["finish_reason"] = seq.finish_reason;
    if (req_.return_token_ids) c["token_ids"] = out.new_token_ids;
    emit(std::move(c));
  }

  Json response_body() override {
    Json body = object_head("text_completion");
    Json choices = Json::array();
    for (const Sequence& seq : seqs_) {
      Choice& choice = choices_[seq.index];
      Json c = {{"index", seq.index}, {"text", choice.text}, {"logprobs", choice.logprobs},
                {"finish_reason", seq.finish_reason}};
      if (req_.return_token_ids) {
        c["prompt_token_ids"] = seq.request.prompt_ids;
        c["token_ids"] = seq.token_ids;
      }
      choices.push_back(std::move(c));
    }
    body["choices"] = std::move(choices);
    body["usage"] = usage();
    return body;
  }

  CompletionRequest req_;
  std::vector<Choice> choices_;
};

}  // namespace

std::shared_ptr<GenerationJob> make_completion_job(JobContext ctx, std::shared_ptr<ResponseChannel> channel,
                                                   CompletionRequest request) {
  return std::make_shared<CompletionJob>(std::move(ctx), std::move(channel), std::move(request));
}

}  // namespace deepinfer::server
