// The engine: scheduler + step runner + sampler around the V4.1 model on a device
// (runtime/runner.h picks the CPU oracle or the CUDA model by EngineOptions::device).
//
// One step: the scheduler plans (plain data), the plan is materialized into a RunPlan
// (token ids, block tables, draws: copies), the step runner runs one ragged forward over
// state slots and the shared history pool and draws one token for every chunk that
// reached its last position, and the outputs are assembled (detokenized deltas, stops).
//
// Asynchronous scheduling (EngineOptions::async_scheduling) pipelines this: while the
// runner thread executes step t, the engine thread plans step t+1 from the predicted
// state (every sampling chunk of step t adds one token whose id is not known yet). When
// step t's tokens arrive they are appended, the plan for t+1 is corrected (chunks of
// requests that a known token ends -- EOS, a stop id, a failed draw -- and of finished
// requests are dropped) and launched at once; only then are step t's tokens
// detokenized and checked for stop strings, overlapping the forward of t+1. A request a
// stop string ends has one speculative token computed in t+1; its result is discarded.
// Every token is still a pure function of the request (batch invariance, keyed draws),
// so outputs are the same bits with async scheduling on or off.
#include <algorithm>
#include <filesystem>
#include <map>
#include <unordered_map>

#include "common/check.h"
#include "deepinfer/engine.h"
#include "model/config.h"
#include "runtime/constraints.h"
#include "runtime/request_sampling.h"
#include "runtime/runner.h"
#include "runtime/step_runner.h"
#include "sample/philox.h"
#include "sample/sampler.h"
#include "sample/stop.h"
#include "sched/scheduler.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

// One sample's output bookkeeping beyond what the scheduler tracks.
struct Stream {
  sched::Request req;
  std::unique_ptr<sampling::StopMatcher> stops;
  std::unique_ptr<IncrementalDetokenizer> detok;
  std::unique_ptr<constraints::RequestState> constraint;  // structured outputs; null if none
  std::string text;       // detokenized output so far (complete UTF-8 only)
  size_t sent = 0;        // bytes of `text` already returned
  bool ending = false;    // its last known token ends it; finished when its output is emitted
  bool finished = false;
};
using StreamPtr = std::shared_ptr<Stream>;

// A request: its n samples.
struct Group {
  std::vector<StreamPtr> samples;
  int64_t unfinished = 0;
};

// A scheduler plan plus what the engine needs to handle its results. `keep` holds the
// streams the plan refers to, so a request finished while its step runs stays valid
// until the step's (discarded) results are in.
struct Planned {
  sched::StepPlan plan;
  std::vector<StreamPtr> keep;
  std::unordered_map<const sched::Request*, Stream*> stream;  // of every request in the plan
  std::vector<Stream*> draw_stream;  // one per RunDraw, set by materialize()
};

// A token (or a failed draw) that has been appended but not yet emitted.
struct Arrived {
  Stream* stream;
  sampling::SampleResult result;
  constraints::RequestState::Next grammar = constraints::RequestState::Next::kContinue;
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
    ro.cuda_graphs = o.cuda_graphs;
    runtime::check_engram_tables(o.engram_tables, "engram_tables");
    ro.engram_tables = o.engram_tables;
    runtime::parse_activations(o.activations, "activations");
    ro.activations = o.activations;
    runtime::check_bf16_weights_for(o.bf16_weights, o.activations, "bf16_weights");
    ro.bf16_weights = o.bf16_weights;
    {
      const ModelConfig probe = load_model_config((fs::path(o.model_dir) / "config.json").string());
      const int64_t len = o.max_model_len > 0 ? std::min(o.max_model_len, probe.max_position_embeddings)
                                              : probe.max_position_embeddings;
      ro.default_blocks = std::min<int64_t>(o.max_num_seqs * ((len + o.block_size - 1) / o.block_size), 1 << 16);
      ro.max_model_len = len;
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
    sc.max_model_len = max_len_;
    // Exact rebuild: the causal cone of the window through every layer (FEATURES §3).
    const int64_t cone = c.sliding_window + (c.num_hidden_layers - 1) * (c.sliding_window - 1);
    sc.replay_tokens = o.swa_replay > 0 ? std::max(o.swa_replay, c.sliding_window) : cone;
    scheduler_ = std::make_unique<sched::Scheduler>(sc, *blocks_);
    runner_ = std::make_unique<runtime::StepRunner>(*model_);
    if (o.async_scheduling) thread_ = std::make_unique<runtime::RunnerThread>(*runner_);
    name_ = fs::path(o.model_dir).filename().string();
    if (name_.empty()) name_ = o.model_dir;
    constraint_cache_ = std::make_unique<constraints::Cache>(
        [this] { return constraints::token_vocab(*tokenizer_, model_->config().vocab_size, model_->config().eos_token_id); });
  }

  ~CpuEngine() override { thread_.reset(); }  // the step in flight ends before the model goes

  std::string add_request(const GenerateRequest& g) override;
  void validate_request(const GenerateRequest& g) const override;
  void abort_request(const std::string& id) override {
    if (groups_.count(id)) aborts_.push_back(id);
  }
  std::vector<RequestOutput> step() override;

  bool has_unfinished() const override { return !groups_.empty(); }
  EngineStats stats() const override {
    EngineStats s;
    s.running = scheduler_->num_running();
    s.waiting = scheduler_->num_waiting();
    s.cache_blocks_total = num_blocks_;
    s.cache_blocks_used = blocks_->num_used();
    s.prefix_queries = scheduler_->prefix_query_tokens();
    s.prefix_hits = scheduler_->prefix_hit_tokens();
    s.requests = int64_t(groups_.size());
    s.slots_used = scheduler_->num_slots_used();
    s.cache_blocks_cached = blocks_->num_cached();
    s.block_refs = blocks_->total_refs();
    s.table_blocks = scheduler_->table_blocks();
    s.forward_tokens = forward_tokens_;
    return s;
  }
  void check_constraint(const StructuredConstraint& c) const override { (void)constraint_cache_->get(c); }
  std::vector<int64_t> tokenize(const std::string& text) const override { return tokenizer_->encode(text); }
  std::string detokenize(const std::vector<int64_t>& ids) const override { return tokenizer_->decode(ids, true); }
  int64_t vocab_size() const override { return model_->config().vocab_size; }
  int64_t max_model_len() const override { return max_len_; }
  int64_t eos_token_id() const override { return model_->config().eos_token_id; }
  std::string model_name() const override { return name_; }

 private:
  Planned plan();
  runtime::RunPlan materialize(Planned& p);
  std::vector<Arrived> apply(const Planned& p, const runtime::RunResult& res);
  void drop_ending(Planned& p);
  void emit(const std::vector<Arrived>& arrived, std::vector<RequestOutput>& outs);
  void process_aborts(std::vector<RequestOutput>& outs);
  RequestOutput finish(Stream& s, const std::string& reason);

  EngineOptions opts_;
  std::unique_ptr<runtime::ModelRunner> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<sched::BlockManager> blocks_;
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::unique_ptr<runtime::StepRunner> runner_;
  std::unique_ptr<runtime::RunnerThread> thread_;  // async scheduling only
  std::optional<Planned> inflight_, ahead_;        // the step running, the one planned next
  std::map<std::string, Group> groups_;
  std::unordered_map<const sched::Request*, StreamPtr> live_;
  std::vector<std::string> aborts_;
  std::unique_ptr<constraints::Cache> constraint_cache_;  // thread-safe (check_constraint is const)
  int64_t max_len_ = 0, num_blocks_ = 0, next_id_ = 0, arrival_ = 0, forward_tokens_ = 0;
  std::string name_;
};

void CpuEngine::validate_request(const GenerateRequest& g) const {
  const ModelConfig& c = model_->config();
  DI_CHECK_INPUT(!g.prompt_ids.empty(), "the prompt is empty");
  for (int64_t t : g.prompt_ids)
    DI_CHECK_INPUT(t >= 0 && t < c.vocab_size, "prompt token id ", t, " is out of range [0, ", c.vocab_size, ")");
  sampling::SamplingParams p = to_sampling_params(g.params);
  p.validate(c.vocab_size);
  const int64_t total = int64_t(g.prompt_ids.size()) + p.max_tokens;
  DI_CHECK_INPUT(total <= max_len_, "the prompt (", g.prompt_ids.size(), " tokens) plus max_tokens (", p.max_tokens,
                 ") exceeds the model's context length ", max_len_);
  // A request that could never be admitted would wait forever.
  DI_CHECK_INPUT((total + opts_.block_size - 1) / opts_.block_size <= num_blocks_, "the prompt plus max_tokens (",
                 total, " tokens) needs more history blocks than the cache pool has (", num_blocks_, " of ",
                 opts_.block_size, " tokens)");
  if (g.params.structured) {
    check_constraint(*g.params.structured);
    if (constraints::within_budget(*g.params.structured, opts_.complete_within_max_tokens))
      constraints::check_budget(*constraint_cache_->get(*g.params.structured), *g.params.structured, p.max_tokens);
  }
}

std::string CpuEngine::add_request(const GenerateRequest& g) {
  validate_request(g);
  sampling::SamplingParams p = to_sampling_params(g.params);
  const std::string id = g.request_id.empty() ? "req-" + std::to_string(next_id_++) : g.request_id;
  DI_CHECK_INPUT(!groups_.count(id), "request id '", id, "' is already in use");
  // Compiled once (cached); each sample gets its own matcher over it.
  std::shared_ptr<structured::TokenMasker> masker;
  std::vector<int64_t> terminators;
  int64_t budget = -1;  // generate within max_tokens (constraints.h, Budget)
  if (g.params.structured) {
    if (constraints::within_budget(*g.params.structured, opts_.complete_within_max_tokens)) budget = p.max_tokens;
    const auto kind = g.params.structured->kind;
    const bool json = kind == StructuredConstraint::Kind::kJsonSchema || kind == StructuredConstraint::Kind::kJsonObject;
    masker = constraint_cache_->get(*g.params.structured);
    if (json) terminators = constraint_cache_->newline_tokens();
  }
  Group group;
  const uint64_t seed = p.effective_seed(opts_.default_seed);
  const int64_t arrival = arrival_++;
  for (int64_t i = 0; i < p.n; ++i) {
    auto s = std::make_shared<Stream>();
    sched::Request& r = s->req;
    r.id = id;
    r.index = i;
    r.arrival = arrival;
    r.prompt = g.prompt_ids;
    r.params = p;
    // Sample i's own stream of draws; sample 0 keeps the seed (n = 1 is unchanged).
    r.seed = sampling::derive_seed(seed, uint64_t(i));
    if (!p.stop.empty()) s->stops = std::make_unique<sampling::StopMatcher>(r.params.stop);
    s->detok = std::make_unique<IncrementalDetokenizer>(*tokenizer_, /*skip_special=*/true);
    if (masker) s->constraint = std::make_unique<constraints::RequestState>(masker, terminators, budget);
    live_[&r] = s;
    group.samples.push_back(std::move(s));
  }
  sched::Request& lead = group.samples[0]->req;
  for (int64_t i = 1; i < p.n; ++i) lead.forks.push_back(&group.samples[i]->req);
  group.unfinished = p.n;
  scheduler_->add(&lead);
  groups_.emplace(id, std::move(group));
  return id;
}

RequestOutput CpuEngine::finish(Stream& s, const std::string& reason) {
  scheduler_->finish(&s.req, reason);
  s.finished = true;
  RequestOutput out;
  out.request_id = s.req.id;
  out.index = s.req.index;
  out.finished = true;
  out.finish_reason = reason;
  auto it = groups_.find(s.req.id);
  if (--it->second.unfinished == 0) {
    // A plan still in flight keeps its streams alive (Planned::keep).
    for (const StreamPtr& p : it->second.samples) live_.erase(&p->req);
    groups_.erase(it);
  }
  return out;
}

void CpuEngine::process_aborts(std::vector<RequestOutput>& outs) {
  std::vector<std::string> ids;
  ids.swap(aborts_);
  for (const std::string& id : ids) {
    auto it = groups_.find(id);
    if (it == groups_.end()) continue;
    const std::vector<StreamPtr> samples = it->second.samples;  // finish() may erase the group
    for (const StreamPtr& s : samples) {
      if (s->finished) continue;
      const sched::Request& r = s->req;
      RequestOutput o = finish(*s, "abort");
      o.prompt_tokens = int64_t(r.prompt.size());
      o.completion_tokens = int64_t(r.output.size());
      o.cached_tokens = r.cached_tokens;
      outs.push_back(std::move(o));
    }
  }
}

Planned CpuEngine::plan() {
  Planned p;
  p.plan = scheduler_->schedule();
  auto keep = [&](const sched::Request* r) {
    const StreamPtr& s = live_.at(r);
    p.keep.push_back(s);
    p.stream[r] = s.get();
  };
  for (const sched::ScheduledChunk& c : p.plan.chunks) {
    keep(c.request);
    for (const sched::ScheduledFork& f : c.forks) keep(f.request);
  }
  return p;
}

runtime::RunPlan CpuEngine::materialize(Planned& p) {
  const ModelConfig& c = model_->config();
  runtime::RunPlan run;
  p.draw_stream.clear();
  std::vector<std::pair<size_t, constraints::RequestState*>> masked;  // draw -> its constraint
  auto draw = [&](int64_t chunk, const sched::Request& r, int64_t position) {
    runtime::RunDraw d;
    d.chunk = chunk;
    d.params = r.params;
    d.seed = r.seed;
    d.position = position;
    const sampling::SamplingParams& sp = r.params;
    if (sp.repetition_penalty != 1.0f) d.prompt_ids = r.prompt;
    if (sp.repetition_penalty != 1.0f || sp.presence_penalty != 0.0f || sp.frequency_penalty != 0.0f)
      d.output_ids = r.output;
    run.draws.push_back(std::move(d));
  };
  for (size_t i = 0; i < p.plan.chunks.size(); ++i) {
    const sched::ScheduledChunk& ch = p.plan.chunks[i];
    const sched::Request& r = *ch.request;
    // Every token this chunk feeds is known by now (the previous step's results are in).
    DI_CHECK(ch.start + ch.count <= r.num_known(), "chunk of ", r.id, " reaches ", ch.start + ch.count,
             " but only ", r.num_known(), " tokens are known");
    runtime::RunChunk rc;
    rc.slot = r.slot;
    rc.reset = ch.fresh;
    rc.replay_start = r.replay_start;
    rc.history_floor = r.history_floor;
    if (ch.fresh && !c.engram_layer_ids.empty())  // the Engram n-grams reach back before the replay
      for (int64_t pos = std::max<int64_t>(0, r.replay_start - (c.engram_max_ngram_size - 1)); pos < r.replay_start;
           ++pos)
        rc.preceding.push_back(r.known(pos));
    rc.start = ch.start;
    for (int64_t pos = ch.start; pos < ch.start + ch.count; ++pos) rc.tokens.push_back(r.known(pos));
    rc.block_table = r.blocks;
    run.chunks.push_back(std::move(rc));
    if (!ch.sample) continue;
    const int64_t position = ch.start + ch.count;
    draw(int64_t(i), r, position);
    p.draw_stream.push_back(p.stream.at(&r));
    if (auto* cs = p.draw_stream.back()->constraint.get()) masked.emplace_back(run.draws.size() - 1, cs);
    for (const sched::ScheduledFork& f : ch.forks) {
      Stream* fs = p.stream.at(f.request);
      if (fs->finished) continue;
      draw(int64_t(i), *f.request, position);
      p.draw_stream.push_back(fs);
      if (fs->constraint) masked.emplace_back(run.draws.size() - 1, fs->constraint.get());
      if (f.slot >= 0) run.forks.push_back({r.slot, f.slot, f.block_copies});
    }
  }
  // Structured outputs: each constrained draw samples under its grammar's mask. The
  // matchers have seen every token before the draw's position (apply() advanced them
  // with the previous step's tokens), so the masks are computed here, after those
  // results, and copied into the plan.
  if (!masked.empty()) {
    std::vector<constraints::RequestState*> states;
    for (const auto& [k, cs] : masked) states.push_back(cs);
    constraints::fill_masks(states);
    const size_t words = size_t((model_->config().vocab_size + 31) / 32);
    for (const auto& [k, cs] : masked) run.draws[k].token_bitmask.assign(cs->mask(), cs->mask() + words);
  }
  forward_tokens_ += run.num_tokens();
  return run;
}

// Records a finished step: blocks it completed go to the prefix cache, its tokens are
// appended and the constrained samples' matchers advanced. A token that certainly ends
// its sample (EOS, a stop id, the length limit, a completed or dead grammar, a failed
// draw) marks the stream `ending`, so the plan made ahead can drop it before it runs;
// stop strings are found later, in emit().
std::vector<Arrived> CpuEngine::apply(const Planned& p, const runtime::RunResult& res) {
  const ModelConfig& c = model_->config();
  scheduler_->complete(p.plan);
  std::vector<Arrived> arrived;
  for (size_t k = 0; k < res.draws.size(); ++k) {
    Stream& s = *p.draw_stream[k];
    if (s.finished) continue;  // aborted, or ended by a stop string, while the step ran
    sched::Request& r = s.req;
    scheduler_->token_arrived(&r);
    const sampling::SampleResult& sr = res.draws[k];
    if (sr.token < 0) {
      s.ending = true;
    } else {
      r.output.push_back(sr.token);
      s.ending = r.params.is_stop_token(sr.token, c.eos_token_id) ||
                 int64_t(r.output.size()) >= r.params.max_tokens || r.num_known() >= max_len_;
    }
    arrived.push_back({&s, sr});
  }
  // Advance the matchers by the sampled tokens (and compute their next masks) in parallel.
  std::vector<constraints::RequestState*> states;
  std::vector<int64_t> tokens;
  std::vector<size_t> at;
  for (size_t k = 0; k < arrived.size(); ++k) {
    if (!arrived[k].stream->constraint || arrived[k].result.token < 0) continue;
    states.push_back(arrived[k].stream->constraint.get());
    tokens.push_back(arrived[k].result.token);
    at.push_back(k);
  }
  if (!states.empty()) {
    std::vector<constraints::RequestState::Next> next(states.size());
    constraints::advance_all(states, tokens, next);
    for (size_t j = 0; j < at.size(); ++j) {
      arrived[at[j]].grammar = next[j];
      // The grammar finished (only EOS could follow) or can go no further.
      if (next[j] != constraints::RequestState::Next::kContinue) arrived[at[j]].stream->ending = true;
    }
  }
  return arrived;
}

// The correction of a plan made ahead of its predecessor's results: a chunk of a request
// that has ended computes nothing anyone will read.
void CpuEngine::drop_ending(Planned& p) {
  auto& chunks = p.plan.chunks;
  auto ended = [&](const sched::ScheduledChunk& c) {
    const Stream& s = *p.stream.at(c.request);
    if (!s.finished && !s.ending) return false;
    // Forks hang on a leader's first token, which cannot have ended it yet: only an
    // abort, which finishes every sample, drops them.
    for (const sched::ScheduledFork& f : c.forks)
      DI_CHECK(f.request->state == sched::RequestState::kFinished, "dropped the fork chunk of a live sample");
    return true;
  };
  chunks.erase(std::remove_if(chunks.begin(), chunks.end(), ended), chunks.end());
}

// Detokenizes the arrived tokens, applies stop strings and finishes what has ended.
void CpuEngine::emit(const std::vector<Arrived>& arrived, std::vector<RequestOutput>& outs) {
  const ModelConfig& c = model_->config();
  for (const Arrived& a : arrived) {
    Stream& s = *a.stream;
    if (s.finished) continue;
    sched::Request& r = s.req;
    const sampling::SampleResult& res = a.result;
    RequestOutput o;
    o.request_id = r.id;
    o.index = r.index;
    if (res.token < 0) {  // the row could not be sampled (e.g. non-finite logits)
      o = finish(s, "abort");
    } else {
      const int64_t token = res.token;
      o.new_token_ids = {token};
      if (r.params.logprobs >= 0) o.logprobs.push_back({token, res.logprob, res.top_logprobs});
      // Detokenize incrementally (never a partial UTF-8 sequence). A model vocabulary
      // can be larger than its tokenizer: such ids decode to nothing.
      std::string fresh;
      try {
        fresh = s.detok->push(token);
      } catch (const InputError&) {
      }
      if (s.ending) fresh += s.detok->finish();
      s.text += fresh;
      std::string reason;
      size_t end = s.text.size();  // text that may be sent now
      bool by_stop_string = false;
      if (s.stops) {
        sampling::StopResult sr = s.stops->feed(fresh);
        by_stop_string = sr.stopped;
        end = sr.output_end;  // excludes the stop string, or the held-back tail
      }
      using Next = constraints::RequestState::Next;
      if (by_stop_string || r.params.is_stop_token(token, c.eos_token_id) || a.grammar == Next::kComplete)
        reason = "stop";
      else if (a.grammar == Next::kDead) reason = "abort";
      else if (s.ending) reason = "length";
      // Finishing for any other reason than a stop string releases the held-back text.
      if (!reason.empty() && !by_stop_string) end = s.text.size();
      if (end > s.sent) o.text_delta = s.text.substr(s.sent, end - s.sent);
      s.sent = std::max(s.sent, end);
      if (!reason.empty()) {
        RequestOutput f = finish(s, reason);
        f.new_token_ids = std::move(o.new_token_ids);
        f.logprobs = std::move(o.logprobs);
        f.text_delta = std::move(o.text_delta);
        o = std::move(f);
      }
    }
    o.prompt_tokens = int64_t(r.prompt.size());
    o.completion_tokens = int64_t(r.output.size());
    o.cached_tokens = r.cached_tokens;
    outs.push_back(std::move(o));
  }
}

std::vector<RequestOutput> CpuEngine::step() {
  std::vector<RequestOutput> outs;
  process_aborts(outs);  // aborts take effect between steps
  if (!thread_) {
    Planned p = plan();
    if (p.plan.empty()) return outs;
    runtime::RunPlan run = materialize(p);
    const runtime::RunResult res = runner_->execute(run);
    emit(apply(p, res), outs);
    return outs;
  }
  // Asynchronous: keep one step running on the runner thread.
  if (!inflight_) {  // nothing running (start, or the last plan came out empty)
    Planned p = plan();
    if (p.plan.empty()) return outs;
    thread_->launch(materialize(p));
    inflight_ = std::move(p);
  }
  ahead_ = plan();  // step t+1 from the predicted state, while step t runs
  const runtime::RunResult res = thread_->wait();
  const Planned done = std::move(*inflight_);  // keeps its streams alive through emit()
  inflight_.reset();
  const std::vector<Arrived> arrived = apply(done, res);
  drop_ending(*ahead_);
  if (!ahead_->plan.empty()) {
    thread_->launch(materialize(*ahead_));
    inflight_ = std::move(ahead_);
  }
  ahead_.reset();
  emit(arrived, outs);  // detokenize and match stop strings while step t+1 runs
  return outs;
}

}  // namespace

std::unique_ptr<Engine> Engine::create(const EngineOptions& options) {
  // create_runner refuses a device this build lacks.
  return std::make_unique<CpuEngine>(options);
}

}  // namespace deepinfer
