// The deepinfer subcommands. Each takes main's argc/argv (argv[1] is the command).
#pragma once

#include <string>

#include "cli/args.h"
#include "deepinfer/engine.h"

namespace deepinfer::cli {

int cmd_generate(int argc, char** argv);
int cmd_chat(int argc, char** argv);
// Engine options from the shared flags (--model, --max-num-seqs, ...).
EngineOptions engine_options_from(const Args& a);
// The model used when --model is not given (see README: what it is and is not).
std::string default_model_dir();

}  // namespace deepinfer::cli
