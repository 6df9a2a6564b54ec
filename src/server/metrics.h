// Prometheus metrics for GET /metrics (text exposition format 0.0.4). All methods
// are thread-safe; label sets are bounded (known paths, HTTP statuses, finish
// reasons) so that hostile traffic cannot grow them.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "deepinfer/engine.h"

namespace deepinfer::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  void render(std::string& out, const std::string& name, const std::string& help) const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // one per bound, plus +Inf
  double sum_ = 0;
};

class Metrics {
 public:
  Metrics();
  // path: the request path; anything but the served endpoints is reported as "other".
  void count_response(std::string_view path, int status);
  void count_finished(std::string_view finish_reason);
  void add_tokens(int64_t prompt_tokens, int64_t generation_tokens);
  void observe_time_to_first_token(double seconds) { ttft_.observe(seconds); }
  void observe_inter_token_latency(double seconds) { itl_.observe(seconds); }
  void observe_request_latency(double seconds) { e2e_.observe(seconds); }

  // stats: the engine's gauges, or nullptr while the model is loading.
  std::string render(const EngineStats* stats) const;

 private:
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, uint64_t> responses_;
  std::map<std::string, uint64_t> finished_;
  std::atomic<int64_t> prompt_tokens_{0}, generation_tokens_{0};
  Histogram ttft_, itl_, e2e_;
};

}  // namespace deepinfer::server
