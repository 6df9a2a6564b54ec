#include "server/generation_job.h"

#include "common/check.h"
#include "server/openai_format.h"

namespace deepinfer::server {

GenerationJob::GenerationJob(JobContext ctx, std::shared_ptr<ResponseChannel> channel, bool stream, bool include_usage,
                             const char* id_prefix)
    : ctx_(std::move(ctx)),
      channel_(std::move(channel)),
      stream_(stream),
      include_usage_(include_usage),
      id_(new_response_id(id_prefix)),
      created_(unix_time_s()),
      arrival_(Clock::now()) {}

void GenerationJob::start() {
  DI_CHECK(!seqs_.empty());
  const int64_t n = int64_t(seqs_.size());
  if (!ctx_.tracker->try_reserve(n))
    throw ApiError(429, str_cat("The server is busy (", ctx_.tracker->in_flight(), " sequences in flight, at most ",
                                ctx_.tracker->capacity(), "); retry later."),
                   "", "server_busy");
  // One engine request per prompt: its choices are consecutive sequences.
  for (size_t i = 0; i < seqs_.size(); ++i) {
    if (i == 0 || seqs_[i].prompt_index != seqs_[i - 1].prompt_index) {
      Submission sub;
      sub.request = seqs_[i].request;
      sub.request.request_id = str_cat(id_, "-", subs_.size());
      subs_.push_back(std::move(sub));
    }
    subs_.back().seqs.push_back(i);
  }
  for (Submission& sub : subs_) {
    sub.request.params.n = int64_t(sub.seqs.size());
    sub.unfinished = sub.request.params.n;
    for (size_t i : sub.seqs) seqs_[i].request.request_id = sub.request.request_id;
  }
  auto self = shared_from_this();
  int64_t submitted_seqs = 0;
  for (size_t k = 0; k < subs_.size(); ++k) {
    Submission& sub = subs_[k];
    // Callbacks may come before submit() returns; attach first so finish() finds the id.
    ctx_.tracker->attach(sub.request.request_id);
    try {
      ctx_.backend->submit(sub.request, [self, k](const RequestOutput& out) {
        const Clock::time_point at = Clock::now();
        self->channel_->post([self, k, out, at] { self->handle_output(k, out, at); });
      });
    } catch (...) {
      // Undo: free the unsubmitted slots and abort what was already submitted (its
      // callbacks still come, and are only accounted for).
      ctx_.tracker->finish(sub.request.request_id);
      ctx_.tracker->release(n - submitted_seqs - 1);
      failed_ = true;
      for (size_t j = 0; j < k; ++j) ctx_.backend->abort(subs_[j].request.request_id);
      num_done_ = seqs_.size() - size_t(submitted_seqs);  // the unsubmitted ones count as done
      try {
        throw;
      } catch (const InputError& e) {
        throw bad_request(e.what());
      }
    }
    sub.submitted = true;
    submitted_seqs += int64_t(sub.seqs.size());
    for (size_t i : sub.seqs) seqs_[i].submitted = true;
  }
  std::weak_ptr<GenerationJob> weak = self;
  channel_->on_close([weak] {
    if (auto job = weak.lock()) job->abort_all();
  });
  if (stream_) {
    channel_->begin_stream(200, "text/event-stream");
    on_stream_start();
  }
}

void GenerationJob::abort_all() {
  for (const Submission& sub : subs_)
    if (sub.submitted && sub.unfinished > 0) ctx_.backend->abort(sub.request.request_id);
}

void GenerationJob::handle_output(size_t k, const RequestOutput& out, Clock::time_point at) {
  Submission& sub = subs_[k];
  if (out.index < 0 || size_t(out.index) >= sub.seqs.size()) return;  // engines must not
  Sequence& seq = seqs_[sub.seqs[size_t(out.index)]];
  if (seq.finished) return;  // engines must not, but never count a sequence twice
  if (const size_t n = out.new_token_ids.size()) {
    const double since = std::chrono::duration<double>(at - (seq.got_token ? seq.last_token_time : arrival_)).count();
    if (!seq.got_token) ctx_.metrics->observe_time_to_first_token(since);
    // A step can bring several tokens (speculative decoding): spread the gap evenly.
    for (size_t t = seq.got_token ? 0 : 1; t < n; ++t) ctx_.metrics->observe_inter_token_latency(since / double(n));
    seq.got_token = true;
    seq.last_token_time = at;
    seq.token_ids.insert(seq.token_ids.end(), out.new_token_ids.begin(), out.new_token_ids.end());
  }
  if (out.finished) {
    seq.finished = true;
    seq.finish_reason = out.finish_reason.empty() ? "stop" : out.finish_reason;
    seq.completion_tokens = out.completion_tokens > 0 ? out.completion_tokens : int64_t(seq.token_ids.size());
    seq.cached_tokens = out.cached_tokens;
  }
  if (!failed_ && !channel_->closed()) on_output(seq, out);
  if (out.finished) {
    // The request's last sample frees its id; the others give back one reservation each.
    if (--sub.unfinished == 0) ctx_.tracker->finish(sub.request.request_id);
    else ctx_.tracker->release(1);
    finish_sequence(seq, out);
  }
}

void GenerationJob::finish_sequence(Sequence& seq, const RequestOutput& out) {
  if (!failed_ && !channel_->closed()) on_sequence_done(seq);
  ctx_.metrics->count_finished(seq.finish_reason);
  if (++num_done_ == seqs_.size()) complete();
}

Json GenerationJob::usage() const {
  int64_t prompt = 0, completion = 0, cached = 0;
  std::vector<bool> counted;
  for (const Sequence& seq : seqs_) {
    completion += seq.completion_tokens;
    // A prompt shared by n choices is billed once (OpenAI's convention).
    if (size_t(seq.prompt_index) >= counted.size()) counted.resize(seq.prompt_index + 1);
    if (counted[seq.prompt_index]) continue;
    counted[seq.prompt_index] = true;
    prompt += int64_t(seq.request.prompt_ids.size());
    cached += seq.cached_tokens;
  }
  return usage_json(prompt, completion, cached);
}

void GenerationJob::complete() {
  if (failed_) return;
  const Json u = usage();
  ctx_.metrics->add_tokens(u["prompt_tokens"].get<int64_t>(), u["completion_tokens"].get<int64_t>());
  ctx_.metrics->observe_request_latency(std::chrono::duration<double>(Clock::now() - arrival_).count());
  if (channel_->closed()) return;
  if (stream_) {
    if (include_usage_) {
      Json chunk = object_head(chunk_object());
      chunk["choices"] = Json::array();
      chunk["usage"] = u;
      channel_->write(sse_event(chunk));
    }
    channel_->write(std::string(kSseDone));
    channel_->end_stream();
  } else {
    channel_->respond(HttpResponse{200, "application/json", {}, dump_json(response_body())});
  }
}

Json GenerationJob::object_head(const char* object) const {
  return Json{{"id", id_}, {"object", object}, {"created", created_}, {"model", ctx_.model.name}};
}

void GenerationJob::send_event(Json chunk) {
  // With include_usage, OpenAI puts "usage": null in every chunk but the last.
  if (include_usage_) chunk["usage"] = nullptr;
  channel_->write(sse_event(chunk));
}

}  // namespace deepinfer::server
