// `deepinfer serve`: the OpenAI-compatible HTTP server of src/server/.
#pragma once

namespace deepinfer::cli {

// argv[1] is "serve". Blocks until SIGTERM/SIGINT and the drain are done; returns
// the exit status (0 after a clean shutdown, 0 for --help). Throws InputError for
// bad flags, an address it cannot listen on, or a model that does not load.
int cmd_serve(int argc, char** argv);

}  // namespace deepinfer::cli
