// Kept in its own file: it is the only server file that needs AsyncEngine's code,
// so the API layer links (and is unit-tested) without the runtime.
#include "server/backend.h"

namespace deepinfer::server {

namespace {

class AsyncBackend : public GenerationBackend {
 public:
  explicit AsyncBackend(std::unique_ptr<Engine> engine) : async_(std::move(engine)) {}
  std::string submit(const GenerateRequest& request, Callback callback) override {
    return async_.submit(request, std::move(callback));
  }
  void abort(const std::string& request_id) override { async_.abort(request_id); }
  EngineStats stats() const override { return async_.stats(); }
  const Engine& engine() const override { return async_.engine(); }

 private:
  AsyncEngine async_;
};

}  // namespace

std::unique_ptr<GenerationBackend> make_async_backend(std::unique_ptr<Engine> engine) {
  return std::make_unique<AsyncBackend>(std::move(engine));
}

}  // namespace deepinfer::server
