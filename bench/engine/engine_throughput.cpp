// Engine throughput on a model directory: B concurrent requests (prompt P tokens,
// G generated tokens each, greedy, ignore EOS) run to completion through the
// scheduler; reports prefill and decode tokens/s. A benchmark, not a test.
//
//   engine_throughput MODEL_DIR [batches=1,8,64] [prompt=64] [gen=32]
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
    std::fprintf(stderr, "usage: engine_throughput MODEL_DIR [batches=1,8,64] [prompt=64] [gen=32]\n");
    return 2;
  }
  std::vector<int64_t> batches = {1, 8, 64};
  if (argc > 2) {
    batches.clear();
    std::stringstream ss(argv[2]);
    for (std::string x; std::getline(ss, x, ',');) batches.push_back(std::stoll(x));
  }
  const int64_t prompt = argc > 3 ? std::atoll(argv[3]) : 64, gen = argc > 4 ? std::atoll(argv[4]) : 32;
  std::printf("| batch | prompt | gen | wall s | prefill+decode tok/s | decode tok/s |\n|---|---|---|---|---|---|\n");
  for (int64_t b : batches) {
    EngineOptions o;
    o.model_dir = argv[1];
    o.max_num_seqs = std::max<int64_t>(b, 1);
    o.max_num_batched_tokens = 4096;
    o.enable_prefix_caching = false;  // distinct prompts anyway; measure compute
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
    // The token budget admits every prompt in the first step, so later steps are decode.
    double first_decode = -1;
    while (e->has_unfinished()) {
      e->step();
      if (first_decode < 0) first_decode = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double total = double(b * (prompt + gen)), decode_tokens = double(b * (gen - 1));
    std::printf("| %lld | %lld | %lld | %.2f | %.1f | %.1f |\n", (long long)b, (long long)prompt, (long long)gen, wall,
                total / wall, decode_tokens / std::max(1e-9, wall - first_decode));
    std::fflush(stdout);
  }
  return 0;
}
