// DeepInfer's public engine API: the one header the server and the CLI include.
//
// An Engine owns a model, its tokenizer, the cache pools and the scheduler. Requests
// go in as token ids (the caller renders chat messages and tokenizes text with the
// engine's tokenizer); outputs come back as incremental deltas, token ids and text.
//
//   deepinfer::EngineOptions opts;
//   opts.model_dir = "/models/tiny";
//   auto engine = deepinfer::Engine::create(opts);         // throws InputError
//   deepinfer::GenerateRequest req;
//   req.prompt_ids = engine->tokenize("def fibonacci(n):");
//   req.params.max_tokens = 32;
//   std::string id = engine->add_request(req);             // throws InputError
//   while (engine->has_unfinished()) {
//     for (const deepinfer::RequestOutput& out : engine->step()) std::cout << out.text_delta;
//   }
//
// Thread safety: Engine is single-threaded (call it from one thread). AsyncEngine
// runs the step loop on its own thread and is safe to call from any thread; it is
// what the HTTP server uses.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace deepinfer {

struct EngineOptions {
  std::string model_dir;
  std::string device = "cpu";            // "cpu" (the oracle); "cuda" when built with it
  int64_t max_num_seqs = 64;             // running requests per step
  int64_t max_num_batched_tokens = 2048; // token budget of one step (chunked prefill)
  int64_t max_model_len = 0;             // 0: from the model config
  // History blocks in the pool; 0: enough for max_num_seqs sequences of max_model_len (at most
  // 65,536), fewer where the free device memory (GPU) or half the available host memory (CPU)
  // holds fewer. An explicit count that does not fit is an InputError.
  int64_t cache_blocks = 0;
  int64_t block_size = 64;               // tokens per history block (prefix-cache grain)
  bool enable_prefix_caching = true;
  int64_t swa_replay = 0;                // 0: exact window rebuild on a prefix hit; N: bounded replay of N tokens
  uint64_t default_seed = 0;             // used when a request gives no seed (deterministic by default)
  bool batch_invariant = false;          // cuda: a request's logits are bitwise the same in any batch
  bool cuda_graphs = true;               // cuda: decode steps replay a CUDA graph per batch-size bucket
  // cuda: where the Engram tables live: "device", "host" (mapped pinned host memory, read
  // over the bus by the gather kernel) or "auto" (device when the history pool still gets
  // every block it asks for, else host). One line on stderr at load says which and why.
  std::string engram_tables = "auto";
  // What enters every matrix product (the dense linears, the MoE experts): "f32" (the
  // exact mode, the default) or "bf16" (x rounded to bf16 first, as the reference's bf16
  // run; on cuda the fast mode: one bf16 MMA per tile, cuBLASLt GEMMs for large batches)
  // or "fp8" (bf16, but the dense FP8 linears' x quantized per 32-K block to e4m3 with a
  // ue8m0 scale, as the reference runtime; on cuda FP8 tensor-core GEMMs from 64 tokens).
  std::string activations = "f32";
  // cuda, with activations "bf16" or "fp8": persistent bf16 copies of the dense FP8 / FP4 weights
  // for the large-batch cuBLASLt linears, made once at load instead of a dequantization
  // per call (same results bitwise; the linears at 64-256 tokens 2-3x faster). "off"
  // (default), "on" (InputError when they do not fit, or without bf16 / fp8 activations) or
  // "auto" (on when the history pool still gets every block it asks for). The copies take
  // twice the dense FP8 bytes: ~12 GB per GPU for V4.1-Flash.
  std::string bf16_weights = "off";
  // Plan step t+1 while step t runs (the forward on a worker thread; the engine thread
  // plans, detokenizes and returns outputs meanwhile). Outputs are identical either way.
  bool async_scheduling = true;
  // The default of StructuredConstraint::complete_within_max_tokens for requests that
  // leave it unset (CLI: --complete-within-max-tokens on|off). Off by default: masks
  // then remove only what the constraint forbids, as in vLLM and SGLang.
  bool complete_within_max_tokens = false;
};

// A structured-output constraint: the generated text must match it exactly. add_request
// compiles it (compiled grammars are cached per engine by their text) and throws
// InputError with the compiler's message when it is invalid. Generation ends with
// finish_reason "stop" as soon as the constraint is complete and nothing but EOS could
// follow; tokens that cannot extend a valid prefix are never sampled (policies in
// src/runtime/constraints.h).
struct StructuredConstraint {
  enum class Kind {
    kJsonSchema,  // spec: a JSON Schema (draft 2020-12) as JSON text
    kJsonObject,  // any JSON object; spec unused
    kRegex,       // spec: a regular expression the whole output must match
    kGrammar,     // spec: a GBNF grammar (llama.cpp syntax, start rule `root`)
    kChoice,      // the output is exactly one of `choices`; spec unused
  };
  Kind kind = Kind::kJsonSchema;
  std::string spec;
  std::vector<std::string> choices;
  // JSON kinds: 0 writes compact JSON (no whitespace outside strings), N > 0 allows a
  // run of at most N whitespace characters wherever JSON allows whitespace. Bounded
  // either way so that a weak model cannot loop in whitespace forever.
  int64_t max_whitespace = 0;
  // Generation within the budget (a DeepInfer extension): every token is chosen so that
  // a complete match still fits in the tokens left before max_tokens, so the output
  // always ends with a complete match ("stop"), never cut off by "length". Tokens whose
  // shortest completion would not fit are masked like forbidden ones, which changes the
  // distribution near the end of the budget (never when the budget is far). add_request
  // refuses it when max_tokens is below the constraint's shortest output in bytes.
  // Unset: EngineOptions::complete_within_max_tokens.
  std::optional<bool> complete_within_max_tokens;
};

// Per-request sampling, OpenAI semantics. Validated by add_request.
struct RequestSampling {
  float temperature = 1.0f;  // 0 = greedy
  int64_t top_k = -1;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int64_t, float>> logit_bias;
  std::vector<std::string> stop;
  std::vector<int64_t> stop_token_ids;
  int64_t max_tokens = 16;
  bool ignore_eos = false;
  int64_t logprobs = -1;  // -1: none; k >= 0: the sampled token's logprob and the top k
  std::optional<uint64_t> seed;
  std::optional<StructuredConstraint> structured;  // none: unconstrained
  // Parallel samples of one prompt, in [1, 128]. The prompt is computed once; sample i
  // draws with seed derive_seed(seed, i) (sample/philox.h; sample 0 uses the seed itself),
  // so sample i equals a request with n = 1 and that seed, whatever the other samples do.
  int64_t n = 1;
};

struct GenerateRequest {
  std::string request_id;  // empty: the engine assigns one
  std::vector<int64_t> prompt_ids;
  RequestSampling params;
};

struct TokenLogprob {
  int64_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int64_t, float>> top;  // (token, logprob), best first
};

// One step's progress of one request.
struct RequestOutput {
  std::string request_id;
  int64_t index = 0;                   // the sample (0 .. n-1) this output belongs to
  std::vector<int64_t> new_token_ids;  // tokens generated in this step
  std::string text_delta;              // newly decodable text (never a partial UTF-8 sequence)
  std::vector<TokenLogprob> logprobs;  // one per new token when requested
  bool finished = false;               // this sample's last output (the request's when all n are)
  std::string finish_reason;           // "stop", "length" or "abort" once finished
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;           // prompt tokens served from the prefix cache
};

struct EngineStats {
  int64_t running = 0, waiting = 0;            // samples (a request with n > 1 counts n once forked)
  int64_t cache_blocks_total = 0, cache_blocks_used = 0;
  int64_t prefix_queries = 0, prefix_hits = 0;  // in tokens
  // Accounting, for tests and metrics: requests not yet finished, state slots held,
  // prefix-cache entries, the sum of block reference counts and of the running block
  // tables' lengths (equal whenever no step is being planned), and every token fed
  // through the model so far (prefill, recompute and decode).
  int64_t requests = 0, slots_used = 0, cache_blocks_cached = 0;
  int64_t block_refs = 0, table_blocks = 0;
  int64_t forward_tokens = 0;
};

class Engine {
 public:
  virtual ~Engine() = default;
  static std::unique_ptr<Engine> create(const EngineOptions& options);

  // Validates and queues a request; returns its id. Throws InputError (bad ids,
  // prompt longer than the context, invalid sampling parameters).
  virtual std::string add_request(const GenerateRequest& request) = 0;
  // Checks a request as add_request does, except whether its id is in use, and throws
  // the same InputErrors. Thread-safe (it reads only facts fixed at creation), so
  // AsyncEngine can refuse a bad request without waiting for a running step. The
  // default checks nothing; add_request still checks everything.
  virtual void validate_request(const GenerateRequest& request) const { (void)request; }
  // Finishes the request (every sample) with reason "abort" at the next step; unknown ids
  // are ignored.
  virtual void abort_request(const std::string& request_id) = 0;
  // Runs one scheduler step and returns the outputs it produced.
  virtual std::vector<RequestOutput> step() = 0;
  virtual bool has_unfinished() const = 0;
  virtual EngineStats stats() const = 0;

  // Compiles a constraint as add_request would (into the same cache) and throws
  // InputError with the compiler's message when it is invalid. Thread-safe, so a
  // server can check a request before queueing it. The default compiles the grammar
  // alone (no cache, no vocabulary).
  virtual void check_constraint(const StructuredConstraint& constraint) const;

  virtual std::vector<int64_t> tokenize(const std::string& text) const = 0;
  virtual std::string detokenize(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual int64_t max_model_len() const = 0;
  virtual int64_t eos_token_id() const = 0;
  virtual std::string model_name() const = 0;
};

// Runs an Engine's step loop on a background thread. Callbacks run on that thread
// and must not block; each sample's last output has finished == true, and the request's
// last callback is the one that finishes its last unfinished sample.
class AsyncEngine {
 public:
  using Callback = std::function<void(const RequestOutput&)>;
  explicit AsyncEngine(std::unique_ptr<Engine> engine);
  ~AsyncEngine();  // stops the loop; pending requests finish with "abort"

  // Throws InputError exactly as Engine::add_request does.
  std::string submit(const GenerateRequest& request, Callback callback);
  void abort(const std::string& request_id);
  EngineStats stats() const;
  const Engine& engine() const { return *engine_; }  // tokenizer and model facts (thread-safe getters)

 private:
  struct Impl;
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer
