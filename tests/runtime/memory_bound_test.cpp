// 10,000 random requests through one engine: random prompt lengths drawn from shared
// stems (prefix hits and evictions), random sampling settings, n > 1, stop ids, stop
// strings and aborts, fed continuously. Nothing may leak: the accounting balances at
// every step, everything returns to the baseline at the end, and the resident set
// stays flat after a warm-up (the pools are allocated once, up front).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "deepinfer/engine.h"
#include "model/config.h"
#include "../model/random_checkpoint.h"

namespace deepinfer {
namespace {

// A deliberately tiny V4.1 (4 layers, hidden 32, vocab 96) so that 10,000 requests
// take seconds: the test is about bookkeeping, not numerics.
nlohmann::json micro_config() {
  return {{"model_type", "deepseek_v41_text"},
          {"vocab_size", 96},
          {"hidden_size", 32},
          {"num_hidden_layers", 4},
          {"num_attention_heads", 2},
          {"head_dim", 32},
          {"qk_rope_head_dim", 16},
          {"q_lora_rank", 16},
          {"o_groups", 2},
          {"o_lora_rank", 8},
          {"sliding_window", 4},
          {"compress_ratios", {0, 2, 1, 1}},
          {"kv_source_layer_ids", {1, 2}},
          {"index_source_layer_ids", {1, 2, 3}},
          {"candidate_source_layer_id", 2},
          {"candidate_topk_blocks", 2},
          {"candidate_block_size", 4},
          {"index_n_heads", 2},
          {"index_head_dim", 16},
          {"index_topk", 4},
          {"n_routed_experts", 4},
          {"num_experts_per_tok", 2},
          {"moe_intermediate_size", 16},
          {"num_nextn_predict_layers", 0},
          {"engram_layer_ids", nlohmann::json::array()},
          {"max_position_embeddings", 256},
          {"eos_token_id", 1},
          {"rope_theta", 10000.0},
          {"compress_rope_theta", 160000.0}};
}

// Under AddressSanitizer the resident set is not the program's: freed blocks sit in ASan's
// quarantine (256 MiB by default) and fill it over the run, so the flat-RSS check would
// measure the sanitizer. The accounting checks still run there, and LeakSanitizer checks
// at exit what the RSS check approximates.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAddressSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAddressSanitizer = true;
#else
constexpr bool kAddressSanitizer = false;
#endif
#else
constexpr bool kAddressSanitizer = false;
#endif

int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * int64_t(sysconf(_SC_PAGESIZE));
}

std::string make_model() {
  const std::string dir = ::testing::TempDir() + "/v41_micro_engine";
  const nlohmann::json cfg = micro_config();
  testing::RandomCheckpointWriter w(2024);
  w.add_model(parse_model_config(cfg.dump(), "test"));
  w.write(dir, cfg);
  std::filesystem::copy_file(std::string(DEEPINFER_FIXTURES) + "/v41_tiny_f32/tokenizer.json", dir + "/tokenizer.json",
                             std::filesystem::copy_options::overwrite_existing);
  return dir;
}

TEST(MemoryBound, TenThousandRandomRequests) {
  EngineOptions o;
  o.model_dir = make_model();
  o.block_size = 4;
  o.cache_blocks = 160;
  o.max_num_seqs = 24;
  o.max_num_batched_tokens = 96;
  auto e = Engine::create(o);

  std::mt19937_64 rng(99);
  auto uni = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  std::vector<std::vector<int64_t>> stems;
  for (int s = 0; s < 12; ++s) {
    std::vector<int64_t> t(32);
    for (auto& v : t) v = uni(3, 95);
    stems.push_back(t);
  }
  auto make = [&](int64_t i) {
    GenerateRequest r;
    r.request_id = "m" + std::to_string(i);
    const auto& stem = stems[size_t(uni(0, 11))];
    r.prompt_ids.assign(stem.begin(), stem.begin() + uni(1, 32));
    for (int64_t k = uni(0, 4); k > 0; --k) r.prompt_ids.push_back(uni(3, 95));
    r.params.max_tokens = uni(1, 6);
    if (uni(0, 2) > 0) {
      r.params.temperature = 0.5f + 0.25f * float(uni(0, 4));
      r.params.top_p = uni(0, 1) ? 0.9f : 1.0f;
      r.params.top_k = uni(0, 1) ? 16 : -1;
    } else {
      r.params.temperature = 0;
    }
    if (uni(0, 9) == 0) r.params.seed = uint64_t(uni(0, 1000));
    if (uni(0, 7) == 0) r.params.n = uni(2, 3);
    if (uni(0, 5) == 0) r.params.stop_token_ids = {uni(3, 95)};
    if (uni(0, 9) == 0) r.params.stop = {"e"};
    if (uni(0, 9) == 0) r.params.frequency_penalty = 0.5f;
    if (uni(0, 4) == 0) r.params.logprobs = uni(0, 3);
    r.params.ignore_eos = uni(0, 1) == 0;
    return r;
  };

  const int64_t kTotal = 10000, kWarmup = 1000, kOutstanding = 48;
  int64_t added = 0, finished_requests = 0, steps = 0;
  int64_t rss_warm = 0;
  std::map<std::string, int64_t> pending;  // id -> samples not finished
  std::vector<std::string> abort_later;
  while (finished_requests < kTotal) {
    while (added < kTotal && int64_t(pending.size()) < kOutstanding) {
      GenerateRequest r = make(added++);
      pending[r.request_id] = r.params.n;
      e->add_request(r);
      if (uni(0, 9) == 0) abort_later.push_back(r.request_id);  // aborted a little later
    }
    if (!abort_later.empty() && uni(0, 2) == 0) {
      e->abort_request(abort_later.front());
      abort_later.erase(abort_later.begin());
    }
    for (const RequestOutput& out : e->step()) {
      if (!out.finished) continue;
      auto it = pending.find(out.request_id);
      ASSERT_NE(it, pending.end()) << "output after the end of " << out.request_id;
      if (--it->second == 0) {
        pending.erase(it);
        ++finished_requests;
        if (finished_requests == kWarmup) rss_warm = rss_bytes();
      }
    }
    ++steps;
    const EngineStats st = e->stats();
    ASSERT_EQ(st.block_refs, st.table_blocks) << "step " << steps;
    ASSERT_LE(st.slots_used, o.max_num_seqs);
    ASSERT_LE(st.cache_blocks_used, st.cache_blocks_total);
    ASSERT_LE(st.cache_blocks_cached, st.cache_blocks_used);
    ASSERT_EQ(st.requests, int64_t(pending.size()));
  }
  EXPECT_FALSE(e->has_unfinished());
  const EngineStats st = e->stats();
  EXPECT_EQ(st.running + st.waiting + st.requests + st.slots_used + st.block_refs + st.table_blocks, 0);
  // What stays in use is exactly the prefix cache, within the pool.
  EXPECT_EQ(st.cache_blocks_used, st.cache_blocks_cached);
  EXPECT_EQ(st.cache_blocks_total, 160);
  EXPECT_GT(st.prefix_hits, 0);
  const int64_t rss_end = rss_bytes();
  if (!kAddressSanitizer)
    EXPECT_LE(rss_end, rss_warm + (4 << 20)) << "resident set grew from " << rss_warm << " to " << rss_end;
  std::cout << "steps " << steps << ", forward tokens " << st.forward_tokens << ", prefix hit tokens "
            << st.prefix_hits << "/" << st.prefix_queries << ", rss " << rss_warm / 1024 << " KiB -> "
            << rss_end / 1024 << " KiB\n";
}

}  // namespace
}  // namespace deepinfer
