// What the server needs from the engine: AsyncEngine's surface behind an interface,
// so that the API layer runs against a scripted engine in tests (with controlled
// timing for disconnects, queue limits and shutdown) and against AsyncEngine in
// `deepinfer serve`.
#pragma once

#include <memory>
#include <string>

#include "deepinfer/engine.h"

namespace deepinfer::server {

class GenerationBackend {
 public:
  using Callback = AsyncEngine::Callback;
  virtual ~GenerationBackend() = default;
  // Same contract as AsyncEngine: thread-safe; callbacks run on the backend's own
  // thread, must not block, and the one with finished == true is the last.
  virtual std::string submit(const GenerateRequest& request, Callback callback) = 0;
  virtual void abort(const std::string& request_id) = 0;
  virtual EngineStats stats() const = 0;
  virtual const Engine& engine() const = 0;
};

// Wraps the real engine: AsyncEngine runs its step loop.
std::unique_ptr<GenerationBackend> make_async_backend(std::unique_ptr<Engine> engine);

}  // namespace deepinfer::server
