// The DeepSeek-V4.1 text model on the CUDA backend: the CUDA twin of model.cpp. It
// mirrors the CPU forward op by op with the ops of src/ops/cuda, on device-resident
// weights and state. Activations are fp32 between ops, as the CPU oracle's; with
// CudaModelOptions::activations = kBF16 what enters each matrix product is rounded to
// bf16 first, as in the CPU model with the same option (ops/linear.h). Linears
// accumulate in fp32 on the GPU where the CPU uses double, so logits agree to a
// tolerance, not bitwise (tests/model_cuda).
//
// Memory is planned at load (memory_plan()): the weights (uploaded once), the state
// slots (window rings and compressor pending rows of `max_slots` sequences), an
// activation arena sized from the token budget, and the paged history pool sized from
// what is left (or `num_blocks`). A slot's counters (positions, entry counts, n-gram
// history) stay on the host in a StateSlot whose vectors are unused.
//
// Engram tables (CudaModelOptions::engram_tables) go to the device with the other
// weights, or to mapped pinned host memory that the gather kernel reads over the bus
// (zero copy: a token reads its 24 rows per Engram layer, 6.3 KB): V4.1-Flash's two
// tables are 189 GiB and cannot live on one GPU. kAuto puts them on the device only
// when the history pool still gets every block the options ask for; load() prints one
// line on stderr saying where they went and why (also in memory_plan().engram_note).
//
//   v41::CudaModelOptions o;  o.max_slots = 64;  o.max_tokens = 2048;
//   auto m = v41::CudaModel::load(dir, o);
//   std::vector<v41::CudaBatchItem> items = {{slot, &block_table, {1, 2, 3}}};
//   std::vector<float> logits = m->forward_batch(items);  // last row per item
//
// The only host sync inside a forward is the logits download at the end (into a pinned
// buffer the model keeps: forward_batch_view reads it in place): the MoE is
// routed and permuted on the device, and the indexer is batched over the items with
// its selections turned into attention entry lists there. Not thread-safe: one caller
// at a time.
//
// Decode steps can run as CUDA graphs (CudaModelOptions::cuda_graphs): the host still
// plans every step (positions, block-table rows, pointer and entry lists, counters) the
// way an eager step does, but writes everything that changes per step into one fixed
// parameter block (one upload) and replays the bucket's graph instead of launching.
// Lists that depend only on which slot each row holds (the window-ring copy pointers)
// are built and uploaded only when the batch's slots change (graph_params.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/v41/state.h"
#include "model/v41/weights.h"

namespace deepinfer::v41 {

// Where the Engram tables live (see the top of this file; the engine's spelling,
// "auto" / "device" / "host", is checked by runtime::check_engram_tables).
enum class EngramTables { kAuto, kDevice, kHost };

// Persistent bf16 copies of the dense FP8 / FP4 weights for the bf16 mode's cuBLASLt
// path (CudaModelOptions::bf16_weights; the engine's "off" / "on" / "auto", checked by
// runtime::check_bf16_weights). Off: each large-batch linear dequantizes its weight into
// the GEMM workspace per call. On: every weight that path dequantizes (attention wq_a /
// wq_b / wkv / wo_a / wo_b, compressor, indexer, shared experts, Engram wkv, a quantized
// head; never the routed experts) is dequantized once at load into one allocation
// (plan.bf16_weights: twice the FP8 bytes, ~12 GB for V4.1-Flash's ~6 GB of dense FP8
// per GPU) and the GEMM reads it in place: the same bits, 2-3x faster linears at
// n = 64-256. Auto: on when the copies still leave the history pool every block the
// options ask for (as EngramTables::kAuto decides). Only with activations kBF16 outside
// the batch-invariant mode (the only runs that take the GEMM path): kOn otherwise is an
// InputError, kAuto stays off. load() prints one line saying what it did and why.
enum class Bf16Weights { kOff, kOn, kAuto };

// The KV / index source layers' compressor -> indexer chain (NOTES 54). 0: as before run 47.
// 1: the new compressed entry and index key rows written by their norm_rope_quant launch
// (NormRopeQuantArgs::copy_to) instead of two copy_rows launches, no pending-row copy at
// ratio 1 (no row is ever left pending there), and in graph steps with the attention branch
// the indexer's weights projection (reads x; from the layer's start) and its query (reads
// the normalized qr) on a second branch stream beside the compressor, which waits for them
// before the score: at batch 1 the chain was the layer's critical path (NOTES 49). The same
// kernels on the same data: the same bits. 2 (NOTES 59): 1, and in those split index layers
// the main stream's wq_b waits for the indexer's score (the query's gemv_xs and the score cannot
// share an SM with wq_b's blocks, so the query no longer waits behind wq_b, and wq_b runs beside
// the selection's top-k), and the step's bad-selection flag is zeroed by the step start's memset
// instead of a memset node at the first sparse layer. The same bits as 0 and 1.
// source_chain_set_mode (-1: back to the environment) or DEEPINFER_SRC_CHAIN=0..2 (read once;
// other values: the model refuses them at load), else kSourceChainDefault. Read at load (a
// model per setting). Default 2: run 48 measured it at batch 1 (the 7 layers 1.493 / 1.496 ->
// 1.405 / 1.402 ms with the hc site's mode 3; this mode's own share 1.4925 -> 1.429 in NOTES 59)
// and batch 8 (4.375 -> 4.368, neutral), run 50 at batch 256 (26.51 -> 26.44 ms). It was opt-in
// for session 14's end because run 50's first-step logits at batch 256 differed between mode 0 and
// mode 2 and between two runs of mode 2; NOTES 61 traced that to the Engram hash reading heap
// memory before its ids vector after flash_layers' replay reset (the heap's contents follow each
// process's allocations), not to the chain. Mode 2's wq_b-after-the-score order is measured at one
// and eight rows only, so steps of more than kSourceChainReorderMaxRows rows keep wq_b where it was.
constexpr int kSourceChainDefault = 2;
constexpr int64_t kSourceChainReorderMaxRows = 8;
void source_chain_set_mode(int mode);
int source_chain_mode();

struct CudaModelOptions {
  int64_t max_slots = 1;        // state slots (sequences that can run)
  int64_t max_tokens = 2048;    // token budget of one forward call (sizes the arena; more still runs)
  int64_t block_size = 64;      // tokens per history block
  int64_t num_blocks = 0;       // > 0: exactly this many history blocks (InputError if they do not fit)
  int64_t max_blocks = 1 << 16; // with num_blocks == 0: at most this many, as many as fit
  double memory_fraction = 0.9; // share of the free device memory the history pool may take
  bool batch_invariant = false; // fixed linear paths: a row's logits do not depend on the batch
  // Decode steps (one new token per item, last logits only, at most the largest
  // bucket of items, positions below max_context) replay a CUDA graph captured once
  // per batch-size bucket (1, 2, 4, ... 256: the batch is padded to the bucket);
  // every other step, and every step when off, runs eagerly. See forward_graph().
  bool cuda_graphs = true;
  int64_t max_context = 0;      // positions a graph step covers (sizes its lists); 0: max_position_embeddings
  EngramTables engram_tables = EngramTables::kAuto;
  // What enters the matrix products (ops/linear.h; --activations): kBF16 is the fast
  // mode (one bf16 MMA per tile; cuBLASLt GEMMs for large batches, workspace plan.gemm);
  // kFP8 is kBF16 except for the dense FP8 linears, whose x is quantized per 32-K block
  // and which run the FP8 tensor-core GEMM from linear_fp8_min_n tokens
  // (ops::activations_for; the CPU model does the same).
  ops::Activations activations = ops::Activations::kF32;
  int64_t gemm_min_tokens = 0;  // > 0: cuBLASLt from this many rows on (tests; 0: the op's threshold)
  Bf16Weights bf16_weights = Bf16Weights::kOff;  // persistent bf16 copies for the GEMM path (above)
  // Concurrent branches at up to 256 rows (decode): the shared expert on a second stream
  // beside the router and the routed experts, every Engram layer's gather + projection
  // on a third from the start of the step, and in graph steps the compressor / indexer
  // path beside the q path (CudaModel::Impl, model_cuda_impl.h). Same bits either way.
  // DEEPINFER_OVERLAP (0, 1, or letters naming branches: README), when set, overrides it
  // (a measurement switch: one binary A/Bs both). Measured in bench/flash/NOTES.md 33.
  bool overlap = true;
  // How the branches share the GPU with the critical path (NOTES 34). branch_priority: the
  // main stream at the device's highest priority and the branch streams at its lowest, and
  // graphs instantiated with per-node priorities (a capture copies each stream's priority
  // into its kernel nodes), so pending blocks of the critical path (router, plan, routed
  // tiles; layer 0 beside the Engram projections) are placed before a branch's.
  // branch_bulk_per_sm > 0: a branch's bulk gemvs (the shared expert's w1 + w3) keep at most
  // that many blocks per SM (a ring per block instead of two blocks), leaving registers and
  // shared memory for the critical path's blocks; 0: as many as fit. Measured at batch 1
  // (8K, bf16 + copies, graph): device 1.878 -> 1.798 ms with both, each alone about half;
  // batch 8 unchanged. DEEPINFER_BRANCH_PRIO (0 / 1) and DEEPINFER_BRANCH_BULK (0..8)
  // override them (one binary A/Bs). Same bits either way.
  bool branch_priority = true;
  int branch_bulk_per_sm = 1;
  int device = 0;
};

struct CudaBatchItem {
  int64_t slot = 0;                                   // in [0, max_slots)
  const std::vector<int64_t>* block_table = nullptr;  // must cover every position written
  std::vector<int64_t> tokens;
  bool all_logits = false;  // true: logits of every position; false: the last only
};

// Logits rows in host memory the model owns ([rows, vocab], row-major): see
// CudaModel::forward_batch_view.
struct LogitsView {
  const float* data = nullptr;
  int64_t rows = 0, vocab = 0;
};

struct CudaMemoryPlan {
  size_t weights = 0, slots = 0, history = 0, arena = 0;  // device bytes
  size_t gemm = 0;  // the bf16 mode's GEMM workspace (largest dense weight in bf16 + bf16 x); 0 in f32 mode
  // The persistent bf16 copies of the dense FP8 / FP4 weights (Bf16Weights), apart from
  // `weights`; 0 when off. bf16_note: the line load() printed about them (empty when the
  // run never takes the GEMM path and nothing was asked).
  size_t bf16_weights = 0;
  std::string bf16_note;
  int64_t num_blocks = 0;
  size_t free_before = 0, free_after = 0;  // device memory free before weights, after everything
  // The Engram tables (data + scales): inside `weights` when on the device; else in
  // mapped pinned host memory (host_pinned), not counted in any device figure.
  size_t engram_tables = 0, host_pinned = 0;
  bool engram_on_host = false;
  std::string engram_note;  // the line load() printed (empty without Engram layers)
};

class CudaModel {
 public:
  // Throws InputError on a bad model directory or options, std::runtime_error on a
  // CUDA failure (no device, out of memory).
  static std::unique_ptr<CudaModel> load(const std::string& dir, const CudaModelOptions& options);
  // The same from a config and host weights already bound (benchmarks: random weights
  // at real shapes, bench/flash). Tensors may share host memory; each gets its own
  // device copy. tokenizer_path is needed only when the config has Engram layers.
  static std::unique_ptr<CudaModel> load(const ModelConfig& config, const ModelWeights& weights,
                                         const std::string& tokenizer_path, const CudaModelOptions& options);
  ~CudaModel();

  const ModelConfig& config() const;
  const CudaMemoryPlan& memory_plan() const;
  int64_t num_slots() const;
  int64_t block_size() const;
  int64_t num_blocks() const;
  // Host counters of a slot (num_tokens is the next position).
  const StateSlot& slot(int64_t i) const;
  // As StateSlot::reset_for_replay: history stored for [0, history_end), tokens
  // replayed from replay_start; preceding: the tokens just before replay_start (the
  // last few; the Engram n-grams of the first replayed tokens reach back into them).
  void reset_slot(int64_t i, int64_t replay_start = 0, int64_t history_end = 0,
                  std::span<const int64_t> preceding = {});
  // Forks (n parallel samples): slot `to` becomes a copy of slot `from` (window rings,
  // pending compressor rows, host counters); history block `to` a copy of block `from`
  // in every source. Enqueued on the model's stream, so ordered with the forwards.
  void copy_slot(int64_t from, int64_t to);
  void copy_block(int64_t from, int64_t to);

  // One ragged batch (distinct slots); returns the requested logits rows in item order,
  // [rows, vocab]. Per-sequence results do not depend on the other items up to
  // rounding, and bitwise with batch_invariant. The rows are copied out of the view
  // below into a new vector: cheap for a few rows, but at 256 rows (132 MB) the fresh
  // pages cost ~70 ms on the H200 host (bench/results/2026-11-30-host-step.md), so
  // large batches read the view.
  std::vector<float> forward_batch(std::vector<CudaBatchItem>& items);
  // The same rows left in the model's host buffer (pinned, where the D2H copy runs at
  // the bus's speed; pageable above 256 MiB of logits): valid until the next forward
  // or the model's end. Saves forward_batch's copy into a new vector, which at 256 rows
  // of V4.1's 129,280-token vocabulary is 132 MB allocated, zeroed and copied per step.
  LogitsView forward_batch_view(std::vector<CudaBatchItem>& items);

  // Host time of the last forward (always measured: a few clock reads per step), in
  // milliseconds by phase:
  //   plan    the checks and the batch plan; in a graph step the plan pass that fills
  //           the parameter block (an eager step plans while it launches: see launch);
  //   upload  enqueueing the parameter block's copy (graph steps);
  //   launch  the graph launch, or an eager step's planning and launches;
  //   wait    blocked until the device has run the step and copied the logits;
  //   copy    forward_batch's copy of the logits into its vector (0 for the view);
  //   total   the whole call.
  // param_bytes: the parameter block bytes this graph step uploaded (the step region,
  // or the whole block when its keyed lists were rewritten; 0 eager). With layer timing
  // on, head_ms (final norm and head, device events) and download_ms (the logits copy
  // to the host) are device times; -1 otherwise.
  struct StepTiming {
    double plan = 0, upload = 0, launch = 0, wait = 0, copy = 0, total = 0;
    float head_ms = -1, download_ms = -1;
    int64_t param_bytes = 0;
    bool graph = false;
  };
  StepTiming last_step_timing() const;

  // Benchmark hooks. With layer timing on, each forward records a device event at
  // the start of every layer and after the last one; last_layer_ms() gives the
  // time between them (the GPU timeline, host gaps inside a layer included). A
  // decode step replayed from a graph records them too: the graph is captured with
  // the event records as nodes (a bucket's graph is recaptured when timing is
  // toggled), so the same numbers come from a replay, as the engine runs decode.
  void set_layer_timing(bool on);
  // Diagnostic hook (as DEEPINFER_TRACE_FNV=1, from here on): a stderr line with the FNV-1a of
  // each named tensor at eager steps, each after a device sync (NOTES 61). Not for timing.
  void set_trace_fnv(bool on);
  std::vector<float> last_layer_ms() const;
  // Turns decode graphs on or off after load (CudaModelOptions::cuda_graphs at load),
  // so a benchmark can time one model, with its caches, eagerly and replayed.
  void set_cuda_graphs(bool on);
  // Nodes of the last captured graph per layer (kernels, copies, memsets, memory
  // nodes: what an eager step launches), then one entry for the embedding before
  // layer 0 and one for the norm / head after the last layer; event records of the
  // layer timing are not counted. `kernels` counts kernel nodes only. Empty before
  // any capture.
  struct GraphNodes {
    std::vector<int64_t> nodes, kernels;
  };
  GraphNodes last_graph_nodes() const;
  // The device memory of the state slots (window rings, pending rows) and of the
  // paged history pool, so a benchmark can fill caches with synthetic history.
  std::pair<void*, size_t> slot_memory() const;
  std::pair<void*, size_t> history_memory() const;

  // Decode-graph statistics: steps replayed from a graph, graphs captured, and steps
  // that fitted a bucket but ran eagerly (capture unsupported or a plan mismatch).
  struct GraphStats {
    int64_t replays = 0, captures = 0, fallbacks = 0;
  };
  GraphStats graph_stats() const;
  // Whether the concurrent branches are on (CudaModelOptions::overlap after DEEPINFER_OVERLAP).
  bool overlap() const;

  // Arena statistics of the steps so far (for the memory plan's check).
  size_t arena_high_water() const;
  int64_t arena_growths() const;

 private:
  CudaModel();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace deepinfer::v41
