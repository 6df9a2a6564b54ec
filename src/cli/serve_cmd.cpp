#include "cli/serve_cmd.h"

#include <cstdio>
#include <cstring>

#include "cli/commands.h"
#include "server/serve.h"

namespace deepinfer::cli {

int cmd_serve(int argc, char** argv) {
  for (int i = 2; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(server::kServeUsage, stdout);
      return 0;
    }
  }
  server::ServeOptions options = server::parse_serve_flags(argc, argv, 2);
  if (options.engine.model_dir.empty()) {
    options.engine.model_dir = default_model_dir();
    std::fprintf(stderr,
                 "deepinfer serve: no --model given; using the embedded default %s (a tiny RANDOM V4.1 "
                 "checkpoint for smoke tests: its output is noise)\n",
                 options.engine.model_dir.c_str());
  }
  return server::serve(options, [](const EngineOptions& engine) {
    return server::make_async_backend(Engine::create(engine));
  });
}

}  // namespace deepinfer::cli
