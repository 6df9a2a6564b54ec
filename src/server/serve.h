// `deepinfer serve`: flags, start-up, and graceful shutdown around the HTTP server.
//
//   ServeOptions opts = parse_serve_flags(argc, argv, /*first=*/2);
//   return serve(opts, [](const EngineOptions& e) { return make_async_backend(Engine::create(e)); });
//
// The listening socket opens before the model loads, so /health answers 503 during
// loading. SIGTERM or SIGINT stops accepting, lets running requests finish for the
// grace period, aborts the rest, and returns 0; a second signal skips the grace.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "deepinfer/engine.h"
#include "server/backend.h"
#include "server/http_server.h"

namespace deepinfer::server {

struct ServeOptions {
  EngineOptions engine;
  std::string host = "127.0.0.1";
  uint16_t port = 8000;             // 0: any free port (printed on stderr)
  std::string api_key;              // --api-key or $DEEPINFER_API_KEY; empty: no auth
  std::string served_model_name;
  int64_t max_waiting_seqs = 1024;  // beyond max_num_seqs running, before 429
  int io_threads = 0;               // 0: min(4, hardware threads)
  double shutdown_grace_s = 30;
  HttpLimits limits;
};

extern const char* const kServeUsage;

// Parses argv[first..]: `--flag value` or `--flag=value`. InputError on unknown
// flags, missing values and out-of-range numbers. --model may be left out (the
// caller picks a default: engine.model_dir stays empty).
ServeOptions parse_serve_flags(int argc, char** argv, int first);

using BackendLoader = std::function<std::unique_ptr<GenerationBackend>(const EngineOptions&)>;

// Runs until a signal (or request_stop) and the drain finish. Throws InputError
// when it cannot listen or the loader refuses the model.
int serve(const ServeOptions& options, const BackendLoader& load);

}  // namespace deepinfer::server
