// The CPU engine: scheduler + runner + sampler around the V4.1 model.
//
// One step: the scheduler plans (plain data), the runner turns the plan into one
// ragged forward_batch over state slots and the shared history pool, the sampler draws
// one token for every chunk that reached its last known token, and the outputs are
// assembled (detokenized deltas, stop handling).
#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>

#include "common/check.h"
#include "deepinfer/engine.h"
#include "model/v41/model.h"
#include "runtime/constraints.h"
#include "runtime/request_sampling.h"
#include "runtime/runner.h"
#include "sample/sampler.h"
#include "sample/stop.h"
#include "sched/scheduler.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

// Per-request output bookkeeping beyond what the scheduler tracks.
struct Stream {
  std::unique_ptr<sched::Request> req;
  std::unique_ptr<sampling::StopMatcher> stops;
  std::unique_ptr<IncrementalDetokenizer> detok;
  std::unique_ptr<constraints::RequestState> constraint;  // structured outputs; null if none
  std::string text;       // detokenized output so far (complete UTF-8 only)
  size_t sent = 0;        // bytes of `text` already returned
};

class CpuEngine final : public Engine {
 public:
  explicit CpuEngine(const EngineOptions& o) : opts_(o) {
    namespace fs = std::filesystem;
    DI_CHECK_INPUT(fs::is_directory(o.model_dir), "model directory '", o.model_dir, "' does not exist");
    DI_CHECK_INPUT(o.max_num_seqs >= 1 && o.max_num_seqs <= 4096, "max_num_seqs must be in [1, 4096]");
    DI_CHECK_INPUT(o.max_num_batched_tokens >= 1, "max_num_batched_tokens must be >= 1");
    DI_CHECK_INPUT(o.block_size >= 2 && o.block_size % 2 == 0, "block_size must be even and >= 2");
    // The model with its slots and history pool on the chosen device (runtime/runner.h).
    runtime::RunnerOptions ro;
    ro.device = o.device;
    ro.max_num_seqs = o.max_num_seqs;
    ro.max_num_batched_tokens = o.max_num_batched_tokens;
    ro.block_size = o.block_size;
    ro.num_blocks = o.cache_blocks;
    ro.batch_invariant = o.batch_invariant;
    {
      const ModelConfig probe = load_model_config((fs::path(o.model_dir) / "config.json").string());
      const int64_t len = o.max_model_len > 0 ? std::min(o.max_model_len, probe.max_position_embeddings)
                                              : probe.max_position_embeddings;
      ro.default_blocks = std::min<int64_t>(o.max_num_seqs * ((len + o.block_size - 1) / o.block_size), 1 << 16);
    }
    model_ = runtime::create_runner(o.model_dir, ro);
    const ModelConfig& c = model_->config();
    const std::string tok_path = (fs::path(o.model_dir) / "tokenizer.json").string();
    DI_CHECK_INPUT(fs::exists(tok_path), "model directory '", o.model_dir, "' has no tokenizer.json");
    tokenizer_ = Tokenizer::load(tok_path);
    max_len_ = o.max_model_len > 0 ? std::min(o.max_model_len, c.max_position_embeddings) : c.max_position_embeddings;
    // Memory is planned up front: every slot and the whole history pool exist from now on.
    num_blocks_ = model_->num_blocks();
    blocks_ = std::make_unique<sched::BlockManager>(num_blocks_, o.block_size, std::hash<std::string>{}(o.model_dir));
    sched::SchedulerConfig sc;
    sc.max_num_seqs = o.max_num_seqs;
    sc.max_num_batched_tokens = o.max_num_batched_tokens;
    sc.enable_prefix_caching = o.enable_prefix_caching;
    // Exact rebuild: the causal cone of the window through every layer (FEATURES §3).
    const int64_t cone = c.sliding_window + (c.num_hidden_layers - 1) * (c.sliding_window - 1);
    sc.replay_tokens = o.swa_replay > 0 ? std::max(o.swa_replay, c.sliding_window) : cone;
    scheduler_ = std::make_unique<sched::Scheduler>(sc, *blocks_);
    name_ = fs::path(o.model_dir).filename().string();
    if (name_.empty()) name_ = o.model_dir;
    constraint_cache_ = std::make_unique<constraints::Cache>(
        [this] { return constraints::token_vocab(*tokenizer_, model_->config().vocab_size, model_->config().eos_token_id); });
  }

  std::string add_request(const GenerateRequest& g) override {
    const ModelConfig& c = model_->config();
    DI_CHECK_INPUT(!g.prompt_ids.empty(), "the prompt is empty");
    for (int64_t t : g.prompt_ids)
      DI_CHECK_INPUT(t >= 0 && t < c.vocab_size, "prompt token id ", t, " is out of range [0, ", c.vocab_size, ")");
    sampling::SamplingParams p = to_sampling_params(g.params);
    p.validate(c.vocab_size);
    DI_CHECK_INPUT(int64_t(g.prompt_ids.size()) + p.max_tokens <= max_len_, "the prompt (",
                   g.prompt_ids.size(), " tokens) plus max_tokens (", p.max_tokens,
                   ") exceeds the model's context length ", max_len_);
    auto s = std::make_unique<Stream>();
    if (g.params.structured) {
      const auto kind = g.params.structured->kind;
      const bool json = kind == StructuredConstraint::Kind::kJsonSchema || kind == StructuredConstraint::Kind::kJsonObject;
      s->constraint = std::make_unique<constraints::RequestState>(
          constraint_cache_->get(*g.params.structured),
          json ? constraint_cache_->newline_tokens() : std::vector<int64_t>{});
    }
    s->req = std::make_unique<sched::Request>();
    sched::Request& r = *s->req;
    r.id = g.request_id.empty() ? "req-" + std::to_string(next_id_++) : g.request_id;
    DI_CHECK_INPUT(!streams_.count(r.id), "request id '", r.id, "' is already in use");
    r.arrival = arrival_++;
    r.prompt = g.prompt_ids;
    r.params = p;
    r.seed = p.effective_seed(opts_.default_seed);
    if (!p.stop.empty()) s->stops = std::make_unique<sampling::StopMatcher>(r.params.stop);
    s->detok = std::make_unique<IncrementalDetokenizer>(*tokenizer_, /*skip_special=*/true);
    scheduler_->add(&r);
    const std::string id = r.id;
    streams_[id] = std::move(s);
    return id;
  }

  void abort_request(const std::string& id) override {
    auto it = streams_.find(id);
    if (it != streams_.end()) it->second->req->abort_requested = true;
  }

  std::vector<RequestOutput> step() override;

  bool has_unfinished() const override { return !streams_.empty(); }
  EngineStats stats() const override {
    EngineStats s;
    s.running = scheduler_->num_running();
    s.waiting = scheduler_->num_waiting();
    s.cache_blocks_total = num_blocks_;
    s.cache_blocks_used = blocks_->num_used();
    s.prefix_queries = scheduler_->prefix_query_tokens();
    s.prefix_hits = scheduler_->prefix_hit_tokens();
    return s;
  }
  void check_constraint(const StructuredConstraint& c) const override { (void)constraint_cache_->get(c); }
  std::vector<int64_t> tokenize(const std::string& text) const override;
  std::string detokenize(const std::vector<int64_t>& ids) const override { return tokenizer_->decode(ids, true); }
  int64_t vocab_size() const override { return model_->config().vocab_size; }
  int64_t max_model_len() const override { return max_len_; }
  int64_t eos_token_id() const override { return model_->config().eos_token_id; }
  std::string model_name() const override { return name_; }

 private:
  RequestOutput finish(Stream& s, const std::string& reason, std::vector<int64_t> new_ids,
                       std::vector<TokenLogprob> lps);

  EngineOptions opts_;
  std::unique_ptr<runtime::ModelRunner> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<sched::BlockManager> blocks_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::map<std::string, std::unique_ptr<Stream>> streams_;
  std::unique_ptr<constraints::Cache> constraint_cache_;  // thread-safe (check_constraint is const)
  int64_t max_len_ = 0, num_blocks_ = 0, next_id_ = 0, arrival_ = 0;
  std::string name_;
};

RequestOutput CpuEngine::finish(Stream& s, const std::string& reason, std::vector<int64_t> new_ids,
                                std::vector<TokenLogprob> lps) {
  scheduler_->finish(s.req.get(), reason);
  RequestOutput out;
  out.request_id = s.req->id;
  out.new_token_ids = std::move(new_ids);
  out.logprobs = std::move(lps);
  out.finished = true;
  out.finish_reason = reason;
  return out;
}

std::vector<RequestOutput> CpuEngine::step() {
  std::vector<RequestOutput> outs;
  // Aborts take effect between steps.
  for (auto it = streams_.begin(); it != streams_.end();) {
    Stream& s = *it->second;
    if (s.req->abort_requested) {
      RequestOutput o = finish(s, "abort", {}, {});
      o.prompt_tokens = int64_t(s.req->prompt.size());
      o.completion_tokens = int64_t(s.req->output.size());
      o.cached_tokens = s.req->cached_tokens;
      outs.push_back(std::move(o));
      it = streams_.erase(it);
    } else {
      ++it;
    }
  }
  sched::StepPlan plan = scheduler_->schedule();
  if (plan.empty()) return outs;

  // Runner: one ragged batch over the planned chunks.
  const ModelConfig& c = model_->config();
  std::vector<runtime::RunItem> items(plan.chunks.size());
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const sched::ScheduledChunk& ch = plan.chunks[i];
    sched::Request& r = *ch.request;
    if (ch.fresh) model_->reset_slot(r.slot, r.replay_start, r.history_floor);
    const int64_t at = model_->slot_position(r.slot);
    DI_CHECK(at == ch.start, "slot of ", r.id, " is at ", at, ", plan says ", ch.start);
    items[i].slot = r.slot;
    items[i].blocks = &r.blocks;
    for (int64_t p = ch.start; p < ch.start + ch.count; ++p) items[i].tokens.push_back(r.known(p));
  }
  std::vector<float> logits = model_->forward(items);
  scheduler_->complete(plan);

  // Sampler: one row per chunk that reached its last known token.
  std::vector<sampling::SampleInput> rows;
  std::vector<size_t> row_chunk;
  for (size_t i = 0; i < plan.chunks.size(); ++i) {
    const sched::ScheduledChunk& ch = plan.chunks[i];
    if (!ch.sample) continue;
    sched::Request& r = *ch.request;
    sampling::SampleInput in;
    in.logits = logits.data() + i * c.vocab_size;
    in.vocab = c.vocab_size;
    in.params = &r.params;
    in.seed = r.seed;
    in.position = r.num_known();  // position of the token being sampled
    in.prompt_ids = r.prompt;
    in.output_ids = r.output;
    rows.push_back(in);
    row_chunk.push_back(i);
  }
  // Structured outputs: each constrained row samples under its grammar's mask.
  std::vector<constraints::RequestState*> row_constraint(rows.size(), nullptr);
  {
    std::vector<constraints::RequestState*> todo;
    for (size_t k = 0; k < rows.size(); ++k) {
      row_constraint[k] = streams_.at(plan.chunks[row_chunk[k]].request->id)->constraint.get();
      if (row_constraint[k]) todo.push_back(row_constraint[k]);
    }
    constraints::fill_masks(todo);
    for (size_t k = 0; k < rows.size(); ++k)
      if (row_constraint[k]) rows[k].token_bitmask = row_constraint[k]->mask();
  }
  std::vector<sampling::SampleResult> results(rows.size());
  sampling::sample_batch(rows, results);
  // Advance the matchers by the sampled tokens (and compute their next masks) in parallel.
  using Next = constraints::RequestState::Next;
  std::vector<Next> row_next(rows.size(), Next::kContinue);
  {
    std::vector<constraints::RequestState*> states;
    std::vector<int64_t> tokens;
    std::vector<size_t> at;
    for (size_t k = 0; k < rows.size(); ++k) {
      if (!row_constraint[k] || results[k].token < 0) continue;
      states.push_back(row_constraint[k]);
      tokens.push_back(results[k].token);
      at.push_back(k);
    }
    std::vector<Next> next(states.size());
    constraints::advance_all(states, tokens, next);
    for (size_t j = 0; j < at.size(); ++j) row_next[at[j]] = next[j];
  }

  for (size_t k = 0; k < rows.size(); ++k) {
    sched::Request& r = *plan.chunks[row_chunk[k]].request;
    Stream& s = *streams_.at(r.id);
    const sampling::SampleResult& res = results[k];
    RequestOutput o;
    o.request_id = r.id;
    if (res.token < 0) {  // the row could not be sampled (e.g. non-finite logits)
      o = finish(s, "abort", {}, {});
    } else {
      r.output.push_back(res.token);
      o.new_token_ids = {res.token};
      if (r.params.logprobs >= 0) o.logprobs.push_back({res.token, res.logprob, res.top_logprobs});
      // Detokenize incrementally (never a partial UTF-8 sequence). A model vocabulary
      // can be larger than its tokenizer: such ids decode to nothing.
      std::string fresh;
      try {
        fresh = s.detok->push(res.token);
      } catch (const InputError&) {
      }
      // The grammar finished (only EOS could follow) or can go no further.
      const bool grammar_end = row_next[k] != Next::kContinue;
      const bool ends = grammar_end || r.params.is_stop_token(res.token, c.eos_token_id) ||
                        int64_t(r.output.size()) >= r.params.max_tokens || r.num_known() >= max_len_;
      if (ends) fresh += s.detok->finish();
      s.text += fresh;
      std::string reason;
      size_t end = s.text.size();  // text that may be sent now
      bool by_stop_string = false;
      if (s.stops) {
        sampling::StopResult sr = s.stops->feed(fresh);
        by_stop_string = sr.stopped;
        end = sr.output_end;  // excludes the stop string, or the held-back tail
      }
      if (by_stop_string || r.params.is_stop_token(res.token, c.eos_token_id) || row_next[k] == Next::kComplete)
        reason = "stop";
      else if (row_next[k] == Next::kDead) reason = "abort";
      else if (int64_t(r.output.size()) >= r.params.max_tokens || r.num_known() >= max_len_) reason = "length";
      // Finishing for any other reason than a stop string releases the held-back text.
      if (!reason.empty() && !by_stop_string) end = s.text.size();
      if (end > s.sent) o.text_delta = s.text.substr(s.sent, end - s.sent);
      s.sent = std::max(s.sent, end);
      if (!reason.empty()) {
        RequestOutput f = finish(s, reason, o.new_token_ids, o.logprobs);
        f.text_delta = o.text_delta;
        o = std::move(f);
      }
    }
    o.prompt_tokens = int64_t(r.prompt.size());
    o.completion_tokens = int64_t(r.output.size());
    o.cached_tokens = r.cached_tokens;
    const bool done = o.finished;
    const std::string id = r.id;  // r lives inside the stream erased below
    outs.push_back(std::move(o));
    if (done) streams_.erase(id);
  }
  return outs;
}

std::vector<int64_t> CpuEngine::tokenize(const std::string& text) const { return tokenizer_->encode(text); }

}  // namespace

std::unique_ptr<Engine> Engine::create(const EngineOptions& options) {
  // create_runner refuses a device this build lacks.
  return std::make_unique<CpuEngine>(options);
}

}  // namespace deepinfer
