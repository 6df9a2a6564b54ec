#include "server/metrics.h"

#include <algorithm>
#include <cstdio>

#include "common/check.h"

namespace deepinfer::server {

namespace {

const char* kPaths[] = {"/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/metrics",
                        "/tokenize",       "/detokenize"};

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

void header(std::string& out, const std::string& name, const char* type, const std::string& help) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void sample(std::string& out, const std::string& name, double value) {
  out += name + " " + format_double(value) + "\n";
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1) {
  DI_CHECK(std::is_sorted(bounds_.begin(), bounds_.end()));
}

void Histogram::observe(double value) {
  size_t i = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  std::lock_guard<std::mutex> lock(mu_);
  counts_[i]++;
  sum_ += value;
}

void Histogram::render(std::string& out, const std::string& name, const std::string& help) const {
  std::vector<uint64_t> counts;
  double sum;
  {
    std::lock_guard<std::mutex> lock(mu_);
    counts = counts_;
    sum = sum_;
  }
  header(out, name, "histogram", help);
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts[i];
    std::string le = i < bounds_.size() ? format_double(bounds_[i]) : "+Inf";
    out += name + "_bucket{le=\"" + le + "\"} " + std::to_string(cumulative) + "\n";
  }
  sample(out, name + "_sum", sum);
  out += name + "_count " + std::to_string(cumulative) + "\n";
}

Metrics::Metrics()
    : ttft_({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80}),
      itl_({0.001, 0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5}),
      e2e_({0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960}) {}

void Metrics::count_response(std::string_view path, int status) {
  std::string label = "other";
  for (const char* p : kPaths)
    if (path == p) label = p;
  if (path.rfind("/v1/models/", 0) == 0) label = "/v1/models";
  std::lock_guard<std::mutex> lock(mu_);
  responses_[{label, status}]++;
}

void Metrics::count_finished(std::string_view finish_reason) {
  std::string reason(finish_reason);
  if (reason != "stop" && reason != "length" && reason != "abort" && reason != "tool_calls") reason = "other";
  std::lock_guard<std::mutex> lock(mu_);
  finished_[reason]++;
}

void Metrics::add_tokens(int64_t prompt_tokens, int64_t generation_tokens) {
  prompt_tokens_ += prompt_tokens;
  generation_tokens_ += generation_tokens;
}

std::string Metrics::render(const EngineStats* stats) const {
  std::string out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    header(out, "deepinfer_http_requests_total", "counter", "HTTP responses by path and status code.");
    for (const auto& [key, n] : responses_)
      out += "deepinfer_http_requests_total{path=\"" + key.first + "\",status=\"" + std::to_string(key.second) +
             "\"} " + std::to_string(n) + "\n";
    header(out, "deepinfer_request_success_total", "counter", "Finished generation sequences by finish reason.");
    for (const auto& [reason, n] : finished_)
      out += "deepinfer_request_success_total{finished_reason=\"" + reason + "\"} " + std::to_string(n) + "\n";
  }
  header(out, "deepinfer_prompt_tokens_total", "counter", "Prompt tokens of finished requests.");
  sample(out, "deepinfer_prompt_tokens_total", double(prompt_tokens_.load()));
  header(out, "deepinfer_generation_tokens_total", "counter", "Generated tokens of finished requests.");
  sample(out, "deepinfer_generation_tokens_total", double(generation_tokens_.load()));
  ttft_.render(out, "deepinfer_time_to_first_token_seconds", "Time from request arrival to its first token.");
  itl_.render(out, "deepinfer_inter_token_latency_seconds", "Time between consecutive tokens of a request.");
  e2e_.render(out, "deepinfer_e2e_request_latency_seconds", "Time from request arrival to its last token.");
  if (stats) {
    header(out, "deepinfer_num_requests_running", "gauge", "Sequences in the running batch.");
    sample(out, "deepinfer_num_requests_running", double(stats->running));
    header(out, "deepinfer_num_requests_waiting", "gauge", "Sequences waiting to be scheduled.");
    sample(out, "deepinfer_num_requests_waiting", double(stats->waiting));
    header(out, "deepinfer_cache_usage_ratio", "gauge", "Fraction of history cache blocks in use.");
    sample(out, "deepinfer_cache_usage_ratio",
           stats->cache_blocks_total > 0 ? double(stats->cache_blocks_used) / double(stats->cache_blocks_total) : 0.0);
    header(out, "deepinfer_prefix_cache_queries_total", "counter", "Prompt tokens looked up in the prefix cache.");
    sample(out, "deepinfer_prefix_cache_queries_total", double(stats->prefix_queries));
    header(out, "deepinfer_prefix_cache_hits_total", "counter", "Prompt tokens found in the prefix cache.");
    sample(out, "deepinfer_prefix_cache_hits_total", double(stats->prefix_hits));
    header(out, "deepinfer_prefix_cache_hit_rate", "gauge", "Prefix-cache hits over queries, in tokens.");
    sample(out, "deepinfer_prefix_cache_hit_rate",
           stats->prefix_queries > 0 ? double(stats->prefix_hits) / double(stats->prefix_queries) : 0.0);
  }
  return out;
}

}  // namespace deepinfer::server
