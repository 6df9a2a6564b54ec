// Encode throughput of deepinfer::Tokenizer on one thread: a whole file at once and the
// same file line by line; best of N runs, by wall-clock time and by the process's CPU
// time (steadier on a shared machine, where a waiting process's wall time grows but its
// CPU time does not). Prints one JSON object.
//   bench_tokenizer TOKENIZER_JSON TEXT_FILE [RUNS]
#include <chrono>
#include <ctime>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

static double cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_tokenizer TOKENIZER_JSON TEXT_FILE [RUNS]\n");
    return 2;
  }
  const int runs = argc > 3 ? std::atoi(argv[3]) : 5;
  const auto tok = deepinfer::Tokenizer::load(argv[1]);
  std::ifstream in(argv[2], std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  std::vector<std::string> lines;
  std::istringstream ls(text);
  for (std::string line; std::getline(ls, line);) lines.push_back(line);

  using clock = std::chrono::steady_clock;
  double best_whole = 1e30, best_lines = 1e30, cpu_whole = 1e30, cpu_lines = 1e30;
  size_t ids_whole = 0, ids_lines = 0;
  for (int r = 0; r < runs; ++r) {
    const double c0 = cpu_seconds();
    auto t0 = clock::now();
    ids_whole = tok->encode(text).size();
    auto t1 = clock::now();
    const double c1 = cpu_seconds();
    ids_lines = 0;
    for (const std::string& line : lines) ids_lines += tok->encode(line).size();
    auto t2 = clock::now();
    const double c2 = cpu_seconds();
    cpu_whole = std::min(cpu_whole, c1 - c0);
    cpu_lines = std::min(cpu_lines, c2 - c1);
    best_whole = std::min(best_whole, std::chrono::duration<double>(t1 - t0).count());
    best_lines = std::min(best_lines, std::chrono::duration<double>(t2 - t1).count());
  }
  std::printf(
      "{\"bytes\": %zu, \"whole_mb_s\": %.3f, \"lines_mb_s\": %.3f, \"whole_cpu_mb_s\": %.3f, "
      "\"lines_cpu_mb_s\": %.3f, \"ids_whole\": %zu, \"ids_lines\": %zu}\n",
      text.size(), text.size() / best_whole / 1e6, text.size() / best_lines / 1e6, text.size() / cpu_whole / 1e6,
      text.size() / cpu_lines / 1e6, ids_whole, ids_lines);
  return 0;
}
