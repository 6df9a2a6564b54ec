// `deepinfer serve` for tests: the same flags and server code, with a choice of
// engine, so the HTTP layer can be tested end to end on its own (scripted engine)
// and the real engine can be served before the CLI wires the command in.
// Extra flags, taken out before the serve flags are parsed:
//   --engine fake|real   (default fake: testing::FakeEngine, see fake_engine.h)
//   --fake-step-ms N     slows every fake engine step
//   --fake-load-ms N     delays "loading" so that /health's 503 can be observed
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "../fake_engine.h"
#include "common/check.h"
#include "server/serve.h"

int main(int argc, char** argv) {
  using namespace deepinfer;
  int64_t step_ms = 0, load_ms = 0;
  std::string engine_kind = "fake";
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    if (i + 1 < argc && !std::strcmp(argv[i], "--fake-step-ms")) step_ms = std::atoll(argv[++i]);
    else if (i + 1 < argc && !std::strcmp(argv[i], "--fake-load-ms")) load_ms = std::atoll(argv[++i]);
    else if (i + 1 < argc && !std::strcmp(argv[i], "--engine")) engine_kind = argv[++i];
    else rest.push_back(argv[i]);
  }
  try {
    DI_CHECK_INPUT(engine_kind == "fake" || engine_kind == "real", "--engine must be fake or real");
    server::ServeOptions options = server::parse_serve_flags(int(rest.size()), rest.data(), 1);
    DI_CHECK_INPUT(engine_kind == "fake" || !options.engine.model_dir.empty(), "--engine real needs --model");
    return server::serve(options, [&](const EngineOptions& e) -> std::unique_ptr<server::GenerationBackend> {
      if (engine_kind == "real") return server::make_async_backend(Engine::create(e));
      std::this_thread::sleep_for(std::chrono::milliseconds(load_ms));
      auto engine = std::make_unique<testing::FakeEngine>(e.max_model_len > 0 ? e.max_model_len : 4096);
      return std::make_unique<testing::FakeBackend>(std::move(engine), std::chrono::milliseconds(step_ms));
    });
  } catch (const InputError& e) {
    std::fprintf(stderr, "deepinfer: error: %s\n", e.what());
    return 2;
  }
}
