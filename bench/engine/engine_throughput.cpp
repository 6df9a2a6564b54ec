// Engine throughput on a model directory: B concurrent requests (prompt P tokens,
// G generated tokens each, greedy, ignore EOS) run to completion through the
// scheduler, with asynchronous scheduling off and/or on; reports prefill and decode
// tokens/s. Each configuration runs `reps` times; the best run is reported (the
// machine is shared, so the fastest run is the least disturbed). A benchmark, not a test.
//
//   engine_throughput MODEL_DIR [batches=1,8,64] [prompt=64] [gen=32] [async=off,on] [reps=1]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "deepinfer/engine.h"

using namespace deepinfer;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: engine_throughput MODEL_DIR [batches=1,8,64] [prompt=64] [gen=32] [async=off,on] [reps=1]\n");
    return 2;
  }
  std::vector<int64_t> batches = {1, 8, 64};
  if (argc > 2) {
    batches.clear();
    std::stringstream ss(argv[2]);
    for (std::string x; std::getline(ss, x, ',');) batches.push_back(std::stoll(x));
  }
  const int64_t prompt = argc > 3 ? std::atoll(argv[3]) : 64, gen = argc > 4 ? std::atoll(argv[4]) : 32;
  std::vector<bool> modes = {false, true};
  if (argc > 5) {
    modes.clear();
    std::stringstream ss(argv[5]);
    for (std::string x; std::getline(ss, x, ',');) modes.push_back(x == "on");
  }
  const int reps = argc > 6 ? std::max(1, std::atoi(argv[6])) : 1;
  std::printf("| batch | async | prompt | gen | wall s | prefill+decode tok/s | decode tok/s |\n|---|---|---|---|---|---|---|\n");
  for (int64_t b : batches) {
    for (bool async : modes) {
      double best_wall = 1e30, best_decode = 0;
      for (int rep = 0; rep < reps; ++rep) {
        EngineOptions o;
        o.model_dir = argv[1];
        o.max_num_seqs = std::max<int64_t>(b, 1);
        o.max_num_batched_tokens = 4096;
        o.enable_prefix_caching = false;  // distinct prompts anyway; measure compute
        o.async_scheduling = async;
        auto e = Engine::create(o);
        for (int64_t i = 0; i < b; ++i) {
          GenerateRequest r;
          for (int64_t k = 0; k < prompt; ++k) r.prompt_ids.push_back(3 + (i * 131 + k * 17) % (e->vocab_size() - 3));
          r.params.temperature = 0;
          r.params.max_tokens = gen;
          r.params.ignore_eos = true;
          e->add_request(r);
        }
        auto t0 = std::chrono::steady_clock::now();
        // The token budget admits every prompt in the first step, so later steps are
        // decode. The first output (first token) marks the end of the prefill.
        double first_decode = -1;
        while (e->has_unfinished()) {
          const bool any = !e->step().empty();
          if (first_decode < 0 && any)
            first_decode = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const double decode_tokens = double(b * (gen - 1));
        best_wall = std::min(best_wall, wall);
        best_decode = std::max(best_decode, decode_tokens / std::max(1e-9, wall - first_decode));
      }
      const double total = double(b * (prompt + gen));
      std::printf("| %lld | %s | %lld | %lld | %.2f | %.1f | %.1f |\n", (long long)b, async ? "on" : "off",
                  (long long)prompt, (long long)gen, best_wall, total / best_wall, best_decode);
      std::fflush(stdout);
    }
  }
  return 0;
}
