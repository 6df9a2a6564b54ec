// Routes one HTTP request to its endpoint and turns every failure into an
// OpenAI-style error response. Thread-safe: the transport calls handle() from any
// io thread (on the connection's strand).
//
//   GET  /health                 200 when ready, 503 while loading or draining (never needs a key)
//   GET  /metrics                Prometheus text (never needs a key)
//   GET  /v1/models[/{id}]       the served model
//   POST /v1/completions         text completions, stream or not
//   POST /v1/chat/completions    chat completions (V4.1 prompt encoding), stream or not
//   POST /tokenize, /detokenize  vLLM-compatible
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "server/backend.h"
#include "server/http_types.h"
#include "server/metrics.h"
#include "server/request_common.h"
#include "server/sequence_tracker.h"

namespace deepinfer::server {

struct RouterOptions {
  std::string api_key;             // empty: no authentication
  std::string served_model_name;   // empty: the engine's model_name()
  int64_t max_sequences = 1024;    // running + waiting sequences before 429
};

class Router {
 public:
  explicit Router(RouterOptions options);

  // Called once, when the model has loaded; until then generation endpoints and
  // /health answer 503. The backend must outlive every request.
  void set_backend(GenerationBackend* backend);
  // Graceful shutdown: new generation requests get 503; running ones continue.
  void set_draining() { draining_ = true; }
  bool draining() const { return draining_; }

  void handle(HttpRequest request, std::shared_ptr<ResponseChannel> channel);

  Metrics& metrics() { return metrics_; }
  SequenceTracker& tracker() { return tracker_; }
  const ModelInfo& model() const { return model_; }

 private:
  void dispatch(const HttpRequest& request, const std::shared_ptr<ResponseChannel>& channel);
  bool authorized(const HttpRequest& request) const;
  HttpResponse models(const std::string& path) const;
  HttpResponse tokenize(const HttpRequest& request) const;
  HttpResponse detokenize(const HttpRequest& request) const;
  GenerationBackend& ready_backend() const;  // 503 while loading or draining

  const RouterOptions options_;
  Metrics metrics_;
  SequenceTracker tracker_;
  std::atomic<GenerationBackend*> backend_{nullptr};
  std::atomic<bool> draining_{false};
  ModelInfo model_;  // written once by set_backend, before backend_ is published
  int64_t created_ = 0;
};

// A response carrying an error body; 429 and 503 get Retry-After.
HttpResponse error_response(const ApiError& error);

}  // namespace deepinfer::server
