#include "server/serve.h"

#include <sys/resource.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <map>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>

#include "common/check.h"
#include "runtime/runner.h"
#include "server/router.h"

namespace deepinfer::server {

namespace net = boost::asio;

const char* const kServeUsage =
    "usage: deepinfer serve [--model DIR] [flags]\n"
    "  --host ADDR                 listen address (default 127.0.0.1; 0.0.0.0 for all)\n"
    "  --port N                    listen port (default 8000; 0 picks a free one)\n"
    "  --api-key KEY               require 'Authorization: Bearer KEY' (default $DEEPINFER_API_KEY)\n"
    "  --served-model-name NAME    the model id clients send (default: the model's name)\n"
    "  --device cpu|cuda           (default cpu)\n"
    "  --batch-invariant on|off    cuda: a request's logits bitwise the same in any batch (default off)\n"
    "  --cuda-graphs on|off        cuda: decode steps replay a CUDA graph per batch-size bucket (default on)\n"
    "  --engram-tables auto|device|host  cuda: Engram tables on the GPU or in pinned host memory\n"
    "                              (default auto: on the GPU when the KV pool still gets its blocks)\n"
    "  --activations f32|bf16|fp8  what enters the matrix products: fp32 (default, exact) or bf16\n"
    "                              (x rounded to bf16 as the reference's bf16 run; the fast GPU mode)\n"
    "                              or fp8 (bf16, but the dense FP8 linears quantize x per 32-K block\n"
    "                              to e4m3 and run FP8 GEMMs, as the reference runtime)\n"
    "  --bf16-weights off|on|auto  cuda, bf16 activations: bf16 copies of the dense FP8 / FP4 weights,\n"
    "                              made once at load, for the large-batch GEMMs (same results, 2-3x\n"
    "                              faster linears at 64-256 tokens; ~2x the dense FP8 bytes: ~12 GB per\n"
    "                              GPU for V4.1-Flash). auto: on when the KV pool still gets its blocks\n"
    "                              (default off)\n"
    "  --max-num-seqs N            running sequences per step (default 64)\n"
    "  --max-num-batched-tokens N  token budget of one step (default 2048)\n"
    "  --max-model-len N           context length (default: from the model config)\n"
    "  --cache-blocks N            history blocks (default: sized automatically)\n"
    "  --block-size N              tokens per history block (default 64)\n"
    "  --prefix-cache on|off       reuse cached prompt prefixes (default on)\n"
    "  --swa-replay N              bounded window replay on prefix hits (default 0: exact)\n"
    "  --async-scheduling on|off   plan the next step while the current one runs (default on)\n"
    "  --seed N                    sampling seed of requests without one (default 0)\n"
    "  --complete-within-max-tokens on|off\n"
    "                              constrained requests that leave it unset end with a complete\n"
    "                              match within max_tokens (default off: masks are the constraint's)\n"
    "  --max-waiting-seqs N        queued sequences beyond the running ones before 429 (default 1024)\n"
    "  --max-body-bytes N          request body limit (default 8388608)\n"
    "  --http-threads N            io threads (default min(4, cores))\n"
    "  --shutdown-grace-s S        on SIGTERM, time given to running requests (default 30)\n";

namespace {

int64_t to_int(const std::string& flag, const std::string& value, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(value.c_str(), &end, 10);
  DI_CHECK_INPUT(!value.empty() && errno == 0 && end == value.c_str() + value.size(), "--", flag, ": '", value,
                 "' is not an integer");
  DI_CHECK_INPUT(v >= lo && v <= hi, "--", flag, " must be in [", lo, ", ", hi, "], got ", v);
  return v;
}

}  // namespace

ServeOptions parse_serve_flags(int argc, char** argv, int first) {
  std::map<std::string, std::string> flags;
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    DI_CHECK_INPUT(a.rfind("--", 0) == 0 && a.size() > 2, "unexpected argument '", a, "'\n", kServeUsage);
    std::string name = a.substr(2), value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else {
      DI_CHECK_INPUT(i + 1 < argc, "flag --", name, " needs a value");
      value = argv[++i];
    }
    DI_CHECK_INPUT(flags.emplace(name, value).second, "flag --", name, " given twice");
  }
  ServeOptions o;
  const int64_t kBig = int64_t(1) << 40;
  for (const auto& [name, value] : flags) {
    if (name == "model") o.engine.model_dir = value;
    else if (name == "host") o.host = value;
    else if (name == "port") o.port = uint16_t(to_int(name, value, 0, 65535));
    else if (name == "api-key") o.api_key = value;
    else if (name == "served-model-name") o.served_model_name = value;
    else if (name == "device") o.engine.device = value;
    else if (name == "max-num-seqs") o.engine.max_num_seqs = to_int(name, value, 1, 1 << 20);
    else if (name == "max-num-batched-tokens") o.engine.max_num_batched_tokens = to_int(name, value, 1, kBig);
    else if (name == "max-model-len") o.engine.max_model_len = to_int(name, value, 1, kBig);
    else if (name == "cache-blocks") o.engine.cache_blocks = to_int(name, value, 0, kBig);
    else if (name == "swa-replay") o.engine.swa_replay = to_int(name, value, 0, kBig);
    else if (name == "block-size") o.engine.block_size = to_int(name, value, 2, 1 << 16);
    else if (name == "prefix-cache") {
      DI_CHECK_INPUT(value == "on" || value == "off", "--prefix-cache must be on or off");
      o.engine.enable_prefix_caching = value == "on";
    }
    else if (name == "seed") o.engine.default_seed = uint64_t(to_int(name, value, 0, INT64_MAX));
    else if (name == "batch-invariant") {
      DI_CHECK_INPUT(value == "on" || value == "off", "--batch-invariant must be on or off");
      o.engine.batch_invariant = value == "on";
    }
    else if (name == "cuda-graphs") {
      DI_CHECK_INPUT(value == "on" || value == "off", "--cuda-graphs must be on or off");
      o.engine.cuda_graphs = value == "on";
    }
    else if (name == "complete-within-max-tokens") {
      DI_CHECK_INPUT(value == "on" || value == "off", "--complete-within-max-tokens must be on or off");
      o.engine.complete_within_max_tokens = value == "on";
    }
    else if (name == "engram-tables") {
      runtime::check_engram_tables(value, "--engram-tables");
      o.engine.engram_tables = value;
    }
    else if (name == "activations") {
      runtime::parse_activations(value, "--activations");
      o.engine.activations = value;
    }
    else if (name == "bf16-weights") {
      runtime::check_bf16_weights(value, "--bf16-weights");
      o.engine.bf16_weights = value;
    }
    else if (name == "async-scheduling") {
      DI_CHECK_INPUT(value == "on" || value == "off", "--async-scheduling must be on or off");
      o.engine.async_scheduling = value == "on";
    }
    else if (name == "max-waiting-seqs") o.max_waiting_seqs = to_int(name, value, 0, 1 << 24);
    else if (name == "max-body-bytes") o.limits.max_body_bytes = size_t(to_int(name, value, 1024, int64_t(1) << 32));
    else if (name == "http-threads") o.io_threads = int(to_int(name, value, 1, 256));
    else if (name == "shutdown-grace-s") o.shutdown_grace_s = double(to_int(name, value, 0, 86400));
    else DI_CHECK_INPUT(false, "unknown flag --", name, "\n", kServeUsage);
  }
  runtime::check_bf16_weights_for(o.engine.bf16_weights, o.engine.activations, "--bf16-weights");
  if (o.api_key.empty())
    if (const char* env = std::getenv("DEEPINFER_API_KEY")) o.api_key = env;
  return o;
}

namespace {

// Stop requests from the signal handler to the thread running serve().
struct StopSignal {
  std::mutex mu;
  std::condition_variable cv;
  int count = 0;

  void raise() {
    std::lock_guard<std::mutex> lock(mu);
    ++count;
    cv.notify_all();
  }
  // Waits until count >= n or the deadline; returns whether it got there.
  template <class Deadline>
  bool wait_for_count(int n, Deadline deadline) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_until(lock, deadline, [&] { return count >= n; });
  }
};

using Clock = std::chrono::steady_clock;

// Polls until pred() or the deadline, returning early on a further signal.
template <class Pred>
void wait_until(Pred pred, Clock::time_point deadline, StopSignal& stop, int signals_seen) {
  while (!pred() && Clock::now() < deadline)
    if (stop.wait_for_count(signals_seen + 1, std::min(deadline, Clock::now() + std::chrono::milliseconds(20)))) return;
}

}  // namespace

int serve(const ServeOptions& options, const BackendLoader& load) {
  // Each connection is a descriptor; the usual soft limit of 1024 would cap streams
  // long before memory does.
  if (rlimit r; getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
  Router router(RouterOptions{options.api_key, options.served_model_name,
                              options.engine.max_num_seqs + options.max_waiting_seqs});
  net::io_context io;
  HttpServer http(io, router, options.limits);
  http.listen(options.host, options.port);
  std::fprintf(stderr, "deepinfer serve: listening on http://%s:%u (loading %s)\n", options.host.c_str(),
               unsigned(http.port()), options.engine.model_dir.c_str());

  StopSignal stop;
  std::atomic<bool> loaded{false};
  net::signal_set signals(io, SIGINT, SIGTERM);
  std::function<void(const boost::system::error_code&, int)> on_signal = [&](const boost::system::error_code& ec,
                                                                              int) {
    if (ec) return;
    // Nothing can be running yet, and loading cannot be interrupted: just leave.
    if (!loaded) std::_Exit(0);
    stop.raise();
    signals.async_wait(on_signal);
  };
  signals.async_wait(on_signal);

  auto work = net::make_work_guard(io);
  const int num_threads =
      options.io_threads > 0 ? options.io_threads : int(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  std::vector<std::thread> threads;
  for (int i = 0; i < num_threads; ++i) threads.emplace_back([&io] { io.run(); });
  auto stop_io = [&] {
    signals.cancel();
    work.reset();
    io.stop();
    for (std::thread& t : threads) t.join();
  };

  std::unique_ptr<GenerationBackend> backend;
  try {
    backend = load(options.engine);
  } catch (...) {
    stop_io();
    throw;
  }
  router.set_backend(backend.get());
  loaded = true;
  std::fprintf(stderr, "deepinfer serve: ready; model '%s', max_model_len %lld\n", router.model().name.c_str(),
               static_cast<long long>(router.model().max_model_len));

  stop.wait_for_count(1, Clock::time_point::max());
  std::fprintf(stderr, "deepinfer serve: shutting down; %lld sequences in flight\n",
               static_cast<long long>(router.tracker().in_flight()));
  router.set_draining();
  http.stop_accepting();
  auto idle = [&] { return router.tracker().in_flight() == 0; };
  wait_until(idle, Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(options.shutdown_grace_s)),
             stop, 1);
  for (const std::string& id : router.tracker().running_ids()) backend->abort(id);
  wait_until(idle, Clock::now() + std::chrono::seconds(5), stop, 2);
  // Let the io threads flush the last responses before they stop.
  wait_until([&] { return http.open_connections() == 0; }, Clock::now() + std::chrono::milliseconds(500), stop, 2);
  stop_io();
  backend.reset();
  std::fprintf(stderr, "deepinfer serve: stopped\n");
  return 0;
}

}  // namespace deepinfer::server
