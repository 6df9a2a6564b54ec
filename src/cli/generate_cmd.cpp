// `deepinfer generate`: offline batch inference through the engine. Every request
// (one --prompt / --prompt-ids, or every line of --input) runs together through the
// scheduler; results print as text, one JSON object (--json), or JSON lines (--output).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "cli/args.h"
#include "cli/commands.h"
#include "common/check.h"
#include "deepinfer/engine.h"
#include "runtime/constraint_fields.h"
#include "runtime/request_sampling.h"
#include "runtime/runner.h"
#include "sample/sampling_params.h"

namespace deepinfer::cli {
namespace {

using Json = nlohmann::json;

const std::set<std::string> kEngineFlags = {"model", "max-num-seqs", "max-num-batched-tokens", "cache-blocks",
                                            "block-size", "swa-replay", "prefix-cache", "seed", "max-model-len",
                                            "device", "batch-invariant", "async-scheduling", "cuda-graphs",
                                            "complete-within-max-tokens", "engram-tables", "activations",
                                            "bf16-weights"};

struct Result {
  int64_t n = 1;  // samples of the request; > 1: `samples` holds samples 1..n-1
  std::string text;
  std::vector<int64_t> ids;
  std::string finish_reason, error;
  int64_t prompt_tokens = 0, completion_tokens = 0, cached_tokens = 0;
  std::vector<Result> samples;
};

// One output line per sample: a request with n > 1 gives n lines with "index".
Json to_json(const std::string& id, const Result& r, int64_t index = -1) {
  Json j = {{"id", id}};
  if (index >= 0) j["index"] = index;
  if (!r.error.empty()) {
    j["error"] = r.error;
    return j;
  }
  j["text"] = r.text;
  j["token_ids"] = r.ids;
  j["finish_reason"] = r.finish_reason;
  j["usage"] = {{"prompt_tokens", r.prompt_tokens},
                {"completion_tokens", r.completion_tokens},
                {"cached_tokens", r.cached_tokens}};
  return j;
}

std::vector<Json> to_json_lines(const std::string& id, const Result& r) {
  if (r.n <= 1 || !r.error.empty()) return {to_json(id, r)};
  std::vector<Json> lines = {to_json(id, r, 0)};
  for (size_t i = 0; i < r.samples.size(); ++i) lines.push_back(to_json(id, r.samples[i], int64_t(i) + 1));
  return lines;
}

// "[#####.....] 37/100 requests, 512.3 tok/s" on stderr, redrawn in place at most ten
// times a second; only when stderr is a terminal (logs and pipes stay clean).
class ProgressBar {
 public:
  explicit ProgressBar(int64_t total) : total_(total), on_(total > 0 && isatty(STDERR_FILENO)) {}
  void update(int64_t done, int64_t tokens, bool last = false) {
    if (!on_) return;
    const auto now = std::chrono::steady_clock::now();
    if (!last && now - drawn_ < std::chrono::milliseconds(100)) return;
    drawn_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const int width = 30, filled = int(width * done / total_);
    std::string bar = std::string(size_t(filled), '#') + std::string(size_t(width - filled), '.');
    std::fprintf(stderr, "\r[%s] %lld/%lld requests, %.1f tok/s", bar.c_str(), (long long)done, (long long)total_,
                 secs > 0 ? double(tokens) / secs : 0.0);
    if (last) std::fputc('\n', stderr);
    std::fflush(stderr);
  }

 private:
  const int64_t total_;
  const bool on_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point drawn_{};
};

}  // namespace

EngineOptions engine_options_from(const Args& a) {
  EngineOptions o;
  o.model_dir = a.get("model", default_model_dir());
  o.max_num_seqs = a.get_int("max-num-seqs", o.max_num_seqs, 1, 4096);
  o.max_num_batched_tokens = a.get_int("max-num-batched-tokens", o.max_num_batched_tokens, 1, 1 << 24);
  o.cache_blocks = a.get_int("cache-blocks", o.cache_blocks, 0, 1 << 24);
  o.block_size = a.get_int("block-size", o.block_size, 2, 1 << 16);
  o.swa_replay = a.get_int("swa-replay", o.swa_replay, 0, 1 << 24);
  o.default_seed = uint64_t(a.get_int("seed", 0, 0, INT64_MAX));
  o.max_model_len = a.get_int("max-model-len", 0, 0, INT64_MAX);
  const std::string pc = a.get("prefix-cache", "on");
  DI_CHECK_INPUT(pc == "on" || pc == "off", "--prefix-cache must be on or off");
  o.enable_prefix_caching = pc == "on";
  o.device = a.get("device", o.device);
  const std::string bi = a.get("batch-invariant", "off");
  DI_CHECK_INPUT(bi == "on" || bi == "off", "--batch-invariant must be on or off");
  o.batch_invariant = bi == "on";
  const std::string cg = a.get("cuda-graphs", "on");
  DI_CHECK_INPUT(cg == "on" || cg == "off", "--cuda-graphs must be on or off");
  o.cuda_graphs = cg == "on";
  o.engram_tables = a.get("engram-tables", o.engram_tables);
  runtime::check_engram_tables(o.engram_tables, "--engram-tables");
  o.activations = a.get("activations", o.activations);
  runtime::parse_activations(o.activations, "--activations");
  o.bf16_weights = a.get("bf16-weights", o.bf16_weights);
  runtime::check_bf16_weights_for(o.bf16_weights, o.activations, "--bf16-weights");
  const std::string as = a.get("async-scheduling", o.async_scheduling ? "on" : "off");
  DI_CHECK_INPUT(as == "on" || as == "off", "--async-scheduling must be on or off");
  o.async_scheduling = as == "on";
  const std::string cw = a.get("complete-within-max-tokens", "off");
  DI_CHECK_INPUT(cw == "on" || cw == "off", "--complete-within-max-tokens must be on or off");
  o.complete_within_max_tokens = cw == "on";
  return o;
}

int cmd_generate(int argc, char** argv) {
  std::set<std::string> flags = kEngineFlags;
  for (const char* f : {"prompt", "prompt-ids", "input", "output", "json", "max-tokens", "temperature", "top-p",
                        "top-k", "min-p", "stop", "ignore-eos", "request-seed", "n"})
    flags.insert(f);
  Args a(argc, argv, 2, flags);
  const int sources = int(a.has("prompt")) + int(a.has("prompt-ids")) + int(a.has("input"));
  DI_CHECK_INPUT(sources == 1, "give exactly one of --prompt, --prompt-ids or --input");
  EngineOptions opts = engine_options_from(a);
  if (!a.has("model"))
    std::cerr << "deepinfer: no --model given; using the embedded default " << opts.model_dir
              << " (a 29M-parameter V4.1-architecture model trained for 7 minutes on Python code; see docs/TRAINED_MODEL.md)\n";
  auto engine = Engine::create(opts);

  // Command-line sampling flags, in the JSON field names the input lines use.
  Json base = Json::object();
  if (a.has("max-tokens")) base["max_tokens"] = a.get_int("max-tokens", 16, 1, INT64_MAX);
  if (a.has("temperature")) base["temperature"] = std::stod(a.get("temperature"));
  if (a.has("top-p")) base["top_p"] = std::stod(a.get("top-p"));
  if (a.has("top-k")) base["top_k"] = a.get_int("top-k", -1, -1, INT64_MAX);
  if (a.has("min-p")) base["min_p"] = std::stod(a.get("min-p"));
  if (a.has("stop")) base["stop"] = a.get("stop");
  if (a.has("ignore-eos")) base["ignore_eos"] = a.get("ignore-eos") == "true";
  if (a.has("request-seed")) base["seed"] = a.get_int("request-seed", 0, 0, INT64_MAX);
  if (a.has("n")) base["n"] = a.get_int("n", 1, 1, sampling::kMaxChoices);

  std::vector<std::string> order;
  std::map<std::string, Result> results;
  int64_t submitted = 0;
  auto submit = [&](const std::string& id, const Json& line) {
    order.push_back(id);
    Result& res = results[id];
    try {
      Json fields = base;
      for (auto& [k, v] : line.items())
        if (k != "id" && k != "prompt" && k != "prompt_ids") fields[k] = v;
      GenerateRequest req;
      req.request_id = id;
      DI_CHECK_INPUT(line.contains("prompt") != line.contains("prompt_ids"),
                     "a request needs exactly one of 'prompt' or 'prompt_ids'");
      if (line.contains("prompt")) {
        DI_CHECK_INPUT(line["prompt"].is_string(), "'prompt' must be a string");
        req.prompt_ids = engine->tokenize(line["prompt"].get<std::string>());
      } else {
        DI_CHECK_INPUT(line["prompt_ids"].is_array(), "'prompt_ids' must be an array of token ids");
        for (const auto& t : line["prompt_ids"]) {
          DI_CHECK_INPUT(t.is_number_integer(), "'prompt_ids' must be an array of token ids");
          req.prompt_ids.push_back(t.get<int64_t>());
        }
      }
      req.params = to_request_sampling(sampling::SamplingParams::from_json(fields));
      if (auto rc = constraints::constraint_from_request(fields)) {
        req.params.structured = rc->constraint;
        try {  // compile here (cached for add_request) to name the field in the error
          engine->check_constraint(rc->constraint);
        } catch (const InputError& e) {
          throw InputError(str_cat("'", rc->param, "': ", e.what()));
        }
      }
      engine->add_request(req);
      res.n = req.params.n;
      res.samples.resize(size_t(req.params.n - 1));
      ++submitted;
    } catch (const InputError& e) {
      res.error = e.what();
    }
  };

  if (a.has("input")) {
    std::ifstream in(a.get("input"));
    DI_CHECK_INPUT(in.good(), "cannot read --input file '", a.get("input"), "'");
    std::string line;
    for (int64_t n = 1; std::getline(in, line); ++n) {
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      std::string id = "line-" + std::to_string(n);
      if (j.is_object() && j.contains("id")) id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
      if (!j.is_object()) {
        order.push_back(id);
        results[id].error = "line " + std::to_string(n) + " is not a JSON object";
        continue;
      }
      if (results.count(id)) id += "#" + std::to_string(n);
      submit(id, j);
    }
  } else if (a.has("prompt")) {
    submit("0", Json{{"prompt", a.get("prompt")}});
  } else {
    submit("0", Json{{"prompt_ids", parse_id_list(a.get("prompt-ids"), "--prompt-ids")}});
  }

  ProgressBar progress(a.has("input") ? submitted : 0);
  int64_t done = 0, tokens = 0;
  std::map<std::string, int64_t> unfinished;  // samples per request
  for (const auto& [id, r] : results)
    if (r.error.empty()) unfinished[id] = r.n;
  while (engine->has_unfinished()) {
    for (const RequestOutput& o : engine->step()) {
      Result& parent = results[o.request_id];
      Result& r = o.index == 0 ? parent : parent.samples.at(size_t(o.index - 1));
      tokens += int64_t(o.new_token_ids.size());
      if (o.finished && --unfinished[o.request_id] == 0) ++done;
      r.text += o.text_delta;
      r.ids.insert(r.ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      if (o.finished) {
        r.finish_reason = o.finish_reason;
        r.prompt_tokens = o.prompt_tokens;
        r.completion_tokens = o.completion_tokens;
        r.cached_tokens = o.cached_tokens;
      }
    }
    progress.update(done, tokens);
  }
  progress.update(done, tokens, /*last=*/true);

  if (a.has("output")) {
    std::ofstream out(a.get("output"));
    DI_CHECK_INPUT(out.good(), "cannot write --output file '", a.get("output"), "'");
    for (const auto& id : order)
      for (const Json& j : to_json_lines(id, results[id])) out << j.dump() << "\n";
  } else if (a.has("json") && a.get("json") != "false") {
    for (const auto& id : order)
      for (const Json& j : to_json_lines(id, results[id])) std::cout << j.dump() << "\n";
  } else {
    for (const auto& id : order) {
      const Result& r = results[id];
      if (!r.error.empty()) throw InputError(r.error);
      std::cout << r.text << "\n";
      for (const Result& s : r.samples) std::cout << s.text << "\n";
    }
  }
  return 0;
}

}  // namespace deepinfer::cli
