// One generation request in flight: its sequences (prompts x n choices), their
// outputs, and the response (one JSON body, or an SSE stream). Each prompt is one
// engine request with n samples (the engine computes the prompt once); sample i of
// prompt p is choice p * n + i.
//
// Threading: the engine's callback thread only posts outputs to the connection's
// executor; everything else, including the subclass hooks, runs there, so a job
// needs no lock. The engine callbacks own the job (shared_ptr) until each
// sequence's last output; the connection's close handler holds a weak_ptr.
//
// Lifecycle: start() reserves room (429 when full), submits every sequence (400
// when the engine refuses one; the others are aborted) and, for a stream, sends
// the response head. A peer that disconnects aborts the remaining sequences.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "server/backend.h"
#include "server/http_types.h"
#include "server/json_fields.h"
#include "server/metrics.h"
#include "server/request_common.h"
#include "server/sequence_tracker.h"

namespace deepinfer::server {

// The server-wide objects a job uses; they outlive every job.
struct JobContext {
  GenerationBackend* backend = nullptr;
  Metrics* metrics = nullptr;
  SequenceTracker* tracker = nullptr;
  ModelInfo model;
};

class GenerationJob : public std::enable_shared_from_this<GenerationJob> {
 public:
  using Clock = std::chrono::steady_clock;
  virtual ~GenerationJob() = default;

  // Throws ApiError before anything has been sent; see the lifecycle above.
  void start();

 protected:
  struct Sequence {
    GenerateRequest request;   // the prompt's engine request (params.n set by start())
    int64_t index = 0;         // the choice index in the response
    int64_t prompt_index = 0;  // which prompt of the request
    bool submitted = false, finished = false;
    std::string finish_reason;
    std::vector<int64_t> token_ids;
    int64_t completion_tokens = 0, cached_tokens = 0;
    bool got_token = false;
    Clock::time_point last_token_time;
  };

  GenerationJob(JobContext ctx, std::shared_ptr<ResponseChannel> channel, bool stream, bool include_usage,
                const char* id_prefix);

  // Hooks, on the channel's executor. on_output runs for every engine output after
  // the common bookkeeping (token ids, finish reason); on_sequence_done after a
  // sequence's last output.
  virtual void on_stream_start() {}
  virtual void on_output(Sequence& seq, const RequestOutput& out) = 0;
  virtual void on_sequence_done(Sequence& seq) {}
  virtual Json response_body() = 0;  // non-streaming answer
  virtual const char* chunk_object() const = 0;  // "object" of stream chunks

  // {"id", "object", "created", "model"} for a response or chunk.
  Json object_head(const char* object) const;
  void send_event(Json chunk);  // stream only
  Json usage() const;
  const Engine& engine() const { return ctx_.backend->engine(); }

  JobContext ctx_;
  std::shared_ptr<ResponseChannel> channel_;
  const bool stream_, include_usage_;
  const std::string id_;
  const int64_t created_;
  std::vector<Sequence> seqs_;

 private:
  // One engine request: a prompt's consecutive sequences.
  struct Submission {
    GenerateRequest request;
    std::vector<size_t> seqs;  // sample index -> sequence
    int64_t unfinished = 0;
    bool submitted = false;
  };

  void handle_output(size_t sub, const RequestOutput& out, Clock::time_point at);
  void finish_sequence(Sequence& seq, const RequestOutput& out);
  void complete();
  void abort_all();

  std::vector<Submission> subs_;
  const Clock::time_point arrival_;
  size_t num_done_ = 0;
  bool failed_ = false;  // submission failed: outputs are only accounted for
};

}  // namespace deepinfer::server
