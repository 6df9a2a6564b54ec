// The engine-side half of bench/server/server_bench.py: the same closed-loop streaming
// workload the HTTP benchmark sends to `deepinfer serve`, run on the engine called directly,
// so the difference between the two is the server's own cost. A benchmark, not a test.
//
//   server_engine_bench MODEL_DIR --levels C:R[,C:R...] [--prompt-len 32] [--max-tokens 32]
//       [--max-num-seqs 64] [--max-num-batched-tokens 2048] [--mode sync|async] [--warmup 4]
//
// Level C:R keeps C requests in flight until R have finished: each of C "clients" sends its
// next request as soon as its previous one finished, exactly as the HTTP clients do.
// Request r's prompt is token ids 3 + (r*131 + k*17) % 256, k < prompt-len (the Python
// driver builds the same ids); greedy, ignore_eos, so every request yields max-tokens tokens.
// Prefix caching is off (the server is started with --prefix-cache off): every level
// reuses the request indices, and a cache hit on one side only would not be the same work.
//
// --mode sync drives Engine::step() in this thread: the model's cost and nothing else.
// --mode async drives AsyncEngine from this thread, as the server does (outputs hop from the
// loop thread to the submitting thread through a queue): the cost of the thread hand-off.
//
// One JSON object per level on stdout: wall and process CPU seconds, tokens, TTFT and
// inter-token latency percentiles (ms), measured where the outputs are consumed.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "deepinfer/engine.h"

using namespace deepinfer;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string model_dir, mode = "sync";
  std::vector<std::pair<int64_t, int64_t>> levels;  // (concurrency, requests)
  int64_t prompt_len = 32, max_tokens = 32, max_num_seqs = 64, max_num_batched_tokens = 2048, warmup = 4;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "server_engine_bench: %s\nusage: server_engine_bench MODEL_DIR --levels C:R[,C:R...] "
               "[--prompt-len N] [--max-tokens N] [--max-num-seqs N] [--max-num-batched-tokens N] "
               "[--mode sync|async] [--warmup N]\n",
               why);
  std::exit(2);
}

int64_t positive(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || x < 1) usage((flag + " needs a positive integer, got '" + v + "'").c_str());
  return x;
}

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) usage("missing MODEL_DIR");
  a.model_dir = argv[1];
  for (int i = 2; i < argc; i += 2) {
    const std::string f = argv[i];
    if (i + 1 >= argc) usage((f + " needs a value").c_str());
    const std::string v = argv[i + 1];
    if (f == "--levels") {
      std::stringstream ss(v);
      for (std::string item; std::getline(ss, item, ',');) {
        const size_t colon = item.find(':');
        if (colon == std::string::npos) usage(("level '" + item + "' is not C:R").c_str());
        a.levels.emplace_back(positive("--levels", item.substr(0, colon)), positive("--levels", item.substr(colon + 1)));
      }
    } else if (f == "--prompt-len") a.prompt_len = positive(f, v);
    else if (f == "--max-tokens") a.max_tokens = positive(f, v);
    else if (f == "--max-num-seqs") a.max_num_seqs = positive(f, v);
    else if (f == "--max-num-batched-tokens") a.max_num_batched_tokens = positive(f, v);
    else if (f == "--warmup") a.warmup = positive(f, v);
    else if (f == "--mode") {
      if (v != "sync" && v != "async") usage("--mode must be sync or async");
      a.mode = v;
    } else usage(("unknown flag " + f).c_str());
  }
  if (a.levels.empty()) usage("--levels is required");
  return a;
}

GenerateRequest make_request(const Args& a, int64_t r) {
  GenerateRequest g;
  for (int64_t k = 0; k < a.prompt_len; ++k) g.prompt_ids.push_back(3 + (r * 131 + k * 17) % 256);
  g.params.temperature = 0;
  g.params.max_tokens = a.max_tokens;
  g.params.ignore_eos = true;
  return g;
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + 1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

// Per-request timing, filled as outputs are consumed.
struct Tracker {
  struct Req {
    Clock::time_point start, last;
    bool got = false;
  };
  std::map<std::string, Req> live;
  std::vector<double> ttft, itl;
  int64_t tokens = 0;

  void started(const std::string& id, Clock::time_point t) { live[id] = Req{t, t, false}; }
  // Returns true when the request finished.
  bool output(const RequestOutput& o, Clock::time_point now) {
    auto it = live.find(o.request_id);
    if (it == live.end()) return false;
    Req& q = it->second;
    if (!o.new_token_ids.empty()) {
      const double gap = std::chrono::duration<double>(now - (q.got ? q.last : q.start)).count();
      (q.got ? itl : ttft).push_back(gap);
      q.got = true;
      q.last = now;
      tokens += int64_t(o.new_token_ids.size());
    }
    if (o.finished) live.erase(it);
    return o.finished;
  }
};

double pct(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p / 100.0 * double(v.size())))];
}

// Runs one level to completion on the synchronous Engine.
Tracker run_sync(Engine& e, const Args& a, int64_t concurrency, int64_t requests) {
  Tracker t;
  int64_t next = 0, done = 0;
  while (done < requests) {
    while (int64_t(t.live.size()) < concurrency && next < requests) {
      GenerateRequest g = make_request(a, next++);
      const auto now = Clock::now();
      t.started(e.add_request(g), now);
    }
    const auto outs = e.step();
    const auto now = Clock::now();
    for (const RequestOutput& o : outs) done += t.output(o, now) ? 1 : 0;
  }
  return t;
}

// Runs one level through AsyncEngine: outputs cross from the loop thread to this one.
Tracker run_async(AsyncEngine& e, const Args& a, int64_t concurrency, int64_t requests) {
  std::mutex mu;
  std::condition_variable cv;
  std::deque<RequestOutput> inbox;
  Tracker t;
  int64_t next = 0, done = 0;
  // The tracker lives on this thread only: outputs reach it through the inbox, after
  // submit() has returned and the request is tracked.
  auto submit = [&] {
    GenerateRequest g = make_request(a, next++);
    const auto now = Clock::now();
    t.started(e.submit(g,
                       [&](const RequestOutput& o) {
                         {
                           std::lock_guard<std::mutex> lk(mu);
                           inbox.push_back(o);
                         }
                         cv.notify_one();
                       }),
              now);
  };
  for (; next < std::min(concurrency, requests);) submit();
  while (done < requests) {
    std::deque<RequestOutput> batch;
    {
      std::unique_lock<std::mutex> lk(mu);
      cv.wait(lk, [&] { return !inbox.empty(); });
      batch.swap(inbox);
    }
    const auto now = Clock::now();
    int64_t finished = 0;
    for (const RequestOutput& o : batch) finished += t.output(o, now) ? 1 : 0;
    done += finished;
    for (int64_t k = 0; k < finished && next < requests; ++k) submit();
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse(argc, argv);
  EngineOptions o;
  o.model_dir = a.model_dir;
  o.max_num_seqs = a.max_num_seqs;
  o.max_num_batched_tokens = a.max_num_batched_tokens;
  o.enable_prefix_caching = false;
  std::unique_ptr<Engine> sync_engine;
  std::unique_ptr<AsyncEngine> async_engine;
  try {
    if (a.mode == "sync") sync_engine = Engine::create(o);
    else async_engine = std::make_unique<AsyncEngine>(Engine::create(o));
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "server_engine_bench: %s\n", ex.what());
    return 1;
  }
  auto run = [&](int64_t c, int64_t r) {
    return sync_engine ? run_sync(*sync_engine, a, c, r) : run_async(*async_engine, a, c, r);
  };
  run(std::min<int64_t>(a.warmup, 4), a.warmup);  // first-touch allocations, page faults
  for (const auto& [concurrency, requests] : a.levels) {
    const double cpu0 = cpu_seconds();
    const auto t0 = Clock::now();
    const Tracker t = run(concurrency, requests);
    const double wall = std::chrono::duration<double>(Clock::now() - t0).count(), cpu = cpu_seconds() - cpu0;
    std::printf(
        "{\"mode\": \"%s\", \"concurrency\": %lld, \"requests\": %lld, \"tokens\": %lld, \"wall_s\": %.6f, "
        "\"cpu_s\": %.6f, \"ttft_p50_ms\": %.3f, \"ttft_p99_ms\": %.3f, \"itl_p50_ms\": %.3f, \"itl_p99_ms\": %.3f}\n",
        a.mode.c_str(), (long long)concurrency, (long long)requests, (long long)t.tokens, wall, cpu,
        1e3 * pct(t.ttft, 50), 1e3 * pct(t.ttft, 99), 1e3 * pct(t.itl, 50), 1e3 * pct(t.itl, 99));
    std::fflush(stdout);
  }
  return 0;
}
