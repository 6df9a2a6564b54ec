// The model runner: the engine's view of a model on a device. It owns the weights,
// the state slots and the paged history pool, and runs one ragged batch per step.
// The engine picks the runner by EngineOptions::device:
//   "cpu"   v41::Model (the oracle) with host slots and a host HistoryPool;
//   "cuda"  v41::CudaModel (device-resident weights, slots, pool and arena), only in
//           builds with DEEPINFER_CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/config.h"
#include "ops/linear.h"

namespace deepinfer::runtime {

struct RunItem {
  int64_t slot = 0;                               // in [0, max_num_seqs)
  const std::vector<int64_t>* blocks = nullptr;   // block table covering every position written
  std::vector<int64_t> tokens;
  bool all_logits = false;                        // every position's logits, or only the last
};

struct RunnerOptions {
  std::string device = "cpu";
  int64_t max_num_seqs = 1;
  int64_t max_num_batched_tokens = 2048;
  int64_t block_size = 64;
  // History blocks: > 0 exactly this many (an InputError when they do not fit in the free
  // memory); 0: as many as fit, at most `default_blocks` -- on the GPU in the free device
  // memory after the weights and arena, on the CPU in half the available host memory
  // (host_memory_available; the rest is for the slots, activations and everything else).
  int64_t num_blocks = 0;
  int64_t default_blocks = 1;
  // CPU: the available host memory the pool is sized from; 0 reads it (tests set it).
  int64_t host_memory_bytes = 0;
  bool batch_invariant = false;  // CUDA: fixed reduction order whatever the batch
  bool cuda_graphs = true;       // CUDA: decode steps as graphs per batch-size bucket
  int64_t max_model_len = 0;     // the longest sequence (sizes the graphs' lists); 0: the model's
  std::string engram_tables = "auto";  // CUDA: "auto", "device" or "host" (v41::EngramTables)
  std::string activations = "f32";     // "f32", "bf16" or "fp8" (ops::Activations), both devices
  std::string bf16_weights = "off";    // CUDA: "off", "on" or "auto" (v41::Bf16Weights)
};

class ModelRunner {
 public:
  virtual ~ModelRunner() = default;
  virtual const ModelConfig& config() const = 0;
  virtual int64_t num_blocks() const = 0;
  // The slot's next position.
  virtual int64_t slot_position(int64_t slot) const = 0;
  // Resumes a slot with history stored for [0, history_end), replaying from replay_start;
  // preceding: the tokens just before replay_start (the last few; the model keeps what its
  // Engram hash needs of them, so the first replayed tokens' n-grams are a full recompute's).
  virtual void reset_slot(int64_t slot, int64_t replay_start, int64_t history_end,
                          std::span<const int64_t> preceding) = 0;
  // Runs the items (distinct slots) as one batch; returns the requested logits rows in
  // item order, [rows, vocab].
  virtual std::vector<float> forward(std::vector<RunItem>& items) = 0;
  // The same rows in memory the runner owns, valid until its next call: what the step
  // runner samples from. A device runner returns its host download buffer in place
  // (the CUDA runner: pinned; a copy into a new vector is 132 MB per step at 256 rows
  // of V4.1's vocabulary). The default keeps forward()'s vector.
  virtual std::span<const float> forward_view(std::vector<RunItem>& items) {
    held_logits_ = forward(items);
    return held_logits_;
  }
  // Forks (n parallel samples): slot `to` becomes a copy of slot `from` (rings, pending
  // compressor rows, counters), and history block `to` a copy of block `from`.
  virtual void copy_slot(int64_t from, int64_t to) = 0;
  virtual void copy_block(int64_t from, int64_t to) = 0;

 private:
  std::vector<float> held_logits_;  // forward_view's default
};

// Loads the model at `model_dir` onto `o.device`; InputError for an unknown device or
// one this build lacks.
std::unique_ptr<ModelRunner> create_runner(const std::string& model_dir, const RunnerOptions& o);

// An Engram table placement as the engine and the CLI spell it: "auto", "device" or
// "host"; otherwise InputError "<what> must be auto, device or host, got '<value>'".
// Checked on every device (the CPU backend reads its tables from the mapped file and
// ignores the choice), so a typo fails the same way everywhere.
void check_engram_tables(const std::string& value, const std::string& what);

// Persistent bf16 weight copies as the engine and the CLI spell them: "off", "on" or
// "auto"; otherwise InputError "<what> must be off, on or auto, got '<value>'". "on"
// needs bf16 or fp8 activations (checked with them by check_bf16_weights_for); the CPU backend
// ignores the choice.
void check_bf16_weights(const std::string& value, const std::string& what);
// "on" with activations other than "bf16" / "fp8": InputError naming `what`.
void check_bf16_weights_for(const std::string& value, const std::string& activations, const std::string& what);

// Activations as the engine and the CLI spell them: "f32", "bf16" or "fp8" (ops/linear.h;
// fp8: the dense FP8 linears' x quantized per 32-K block, bf16 elsewhere, as the
// reference runtime); otherwise InputError "<what> must be f32, bf16 or fp8, got '<value>'".
ops::Activations parse_activations(const std::string& value, const std::string& what);

// The devices this build can run on ("cpu", and "cuda" with DEEPINFER_CUDA).
std::vector<std::string> available_devices();

}  // namespace deepinfer::runtime
