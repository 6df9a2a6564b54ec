// Running the deepinfer binary (DEEPINFER_BINARY, set by tests/CMakeLists.txt) from the
// CLI tests: one popen loop instead of one per test file.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace deepinfer::testing_cli {

struct CliResult {
  int status = -1;     // exit status; -1 if the shell could not run it or it did not exit
  std::string output;  // what the command line wrote to stdout
};

// Runs a shell command line; add " 2>&1" to collect stderr too.
inline CliResult run_command(const std::string& cmd) {
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// `deepinfer ARGS`, stdout and stderr together.
inline CliResult run_deepinfer(const std::string& args) {
  return run_command(std::string(DEEPINFER_BINARY) + " " + args + " 2>&1");
}

}  // namespace deepinfer::testing_cli
