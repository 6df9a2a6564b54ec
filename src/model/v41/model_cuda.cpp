// The V4.1 forward on the GPU: model.cpp's steps in the same order, each CPU op
// replaced by its ops::cuda twin on device memory (see model_cuda.h). Host code here
// only plans: it computes positions, group boundaries, entry lists and pointer lists
// exactly as the CPU model does, and uploads them through the pinned stage.
#include "model/v41/model_cuda_impl.h"

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <string>

#include "common/env.h"
#include "kernels/cuda/smxx_device.h"
#include "kernels/cuda/smxx_linear_tmap.h"

namespace deepinfer::v41 {

namespace {

size_t weight_bytes(const WeightRef& w) {
  switch (w.dtype) {
    case DType::F32: return size_t(w.rows * w.cols) * 4;
    case DType::BF16:
    case DType::F16: return size_t(w.rows * w.cols) * 2;
    case DType::F8_E4M3: return size_t(w.rows * w.cols);
    case DType::I8: return size_t(w.rows * (w.cols / 2));
    default: DI_CHECK(false, "weight dtype ", dtype_name(w.dtype), " has no CUDA layout");
  }
  return 0;
}

// "1.50 GiB" / "12.3 MiB", for the lines a person reads (exact bytes go with errors).
std::string human_bytes(size_t b) {
  char buf[32];
  if (b >= (size_t(1) << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(size_t(1) << 30));
  else std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / double(size_t(1) << 20));
  return buf;
}

size_t scale_bytes(const WeightRef& w) {
  if (w.scale == nullptr) return 0;
  const int64_t srows = (w.rows + w.block_rows - 1) / w.block_rows;
  return size_t(srows * w.scale_cols) * (w.scale_dtype == DType::F32 ? 4 : 1);
}

// Collects host regions and where their device addresses go, then uploads them into
// one allocation (so the weights' footprint is known before anything is allocated).
class Uploader {
 public:
  void add(const void* src, size_t bytes, const void** field) {
    if (src == nullptr || bytes == 0) return;
    total_ = (total_ + 255) / 256 * 256;
    items_.push_back({src, bytes, total_, field});
    total_ += bytes;
  }
  void weight(const WeightRef& host, WeightRef& dev) {
    dev = host;
    if (host.empty()) return;
    add(host.data, weight_bytes(host), reinterpret_cast<const void**>(&dev.data));
    add(host.scale, scale_bytes(host), reinterpret_cast<const void**>(&dev.scale));
  }
  void vec(const std::vector<float>& host, const float*& dev) {
    dev = nullptr;
    add(host.data(), host.size() * sizeof(float), reinterpret_cast<const void**>(&dev));
  }
  size_t total() const { return total_; }
  // Into mapped pinned host memory of total() bytes: the fields get the device view.
  // Read straight from the source (for a checkpoint, the mapped file: no other host
  // copy), in 16 MiB pieces over the thread pool so page faults on the file overlap.
  void run_host(const MappedHostBuffer& buf) {
    DI_CHECK(buf.size() >= total_, "pinned buffer of ", buf.size(), " bytes for ", total_);
    constexpr size_t kPiece = size_t(16) << 20;
    for (const Item& it : items_) {
      const auto* src = static_cast<const uint8_t*>(it.src);
      uint8_t* dst = buf.host_data() + it.offset;
      parallel_for(int64_t((it.bytes + kPiece - 1) / kPiece), [&](int64_t a, int64_t b) {
        const size_t lo = size_t(a) * kPiece, hi = std::min(it.bytes, size_t(b) * kPiece);
        std::memcpy(dst + lo, src + lo, hi - lo);
      });
      *it.field = buf.device_data() + it.offset;
    }
  }
  DeviceBuffer run() {
    DeviceBuffer buf(total_);
    for (const Item& it : items_) {
      CUDA_CHECK(cudaMemcpy(buf.data() + it.offset, it.src, it.bytes, cudaMemcpyHostToDevice));
      *it.field = buf.data() + it.offset;
    }
    return buf;
  }

 private:
  struct Item {
    const void* src;
    size_t bytes, offset;
    const void** field;
  };
  std::vector<Item> items_;
  size_t total_ = 0;
};

// The cuBLASLt workspace of --activations bf16 (ops/cuda/cuda_ops.h): room to dequantize
// the largest FP8 / FP4 weight that goes through linear (experts excluded) and bf16 x for
// the token budget at the widest input; 0 when no weight can take that path (F32 / F16
// weights, fp32 scales).
size_t gemm_workspace_bytes(const ModelWeights& w, int64_t max_tokens) {
  int64_t wmax = 0, cmax = 0;
  auto see = [&](const WeightRef& r) {
    const bool quant = (r.dtype == DType::F8_E4M3 || r.dtype == DType::I8) &&
                       (r.scale == nullptr || r.scale_dtype == DType::F8_E8M0);
    if (r.empty() || !(quant || (r.dtype == DType::BF16 && r.scale == nullptr))) return;
    if (quant) wmax = std::max(wmax, r.rows * r.cols);
    cmax = std::max(cmax, r.cols);
  };
  see(w.head);
  for (const LayerWeights& h : w.layers) {
    const AttentionWeights& a = h.attn;
    for (const WeightRef* r : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b, &a.compressor_wkv, &a.compressor_wgate,
                               &a.indexer_wk, &a.indexer_wq_b, &a.indexer_weights_proj})
      see(*r);
    for (const WeightRef* r : {&h.ffn.shared.w1, &h.ffn.shared.w3, &h.ffn.shared.w2}) see(*r);
    if (h.has_engram) see(h.engram.wkv);
  }
  return cmax == 0 ? 0 : gpu::linear_gemm_workspace_bytes(wmax, max_tokens * cmax);
}

}  // namespace


CudaModel::CudaModel() : impl_(std::make_unique<Impl>()) {}
CudaModel::~CudaModel() = default;
const ModelConfig& CudaModel::config() const { return impl_->cfg; }
const CudaMemoryPlan& CudaModel::memory_plan() const { return impl_->plan; }
int64_t CudaModel::num_slots() const { return int64_t(impl_->slots.size()); }
int64_t CudaModel::block_size() const { return impl_->opts.block_size; }
int64_t CudaModel::num_blocks() const { return impl_->num_blocks; }
CudaModel::GraphStats CudaModel::graph_stats() const { return impl_->graph_stats; }
bool CudaModel::overlap() const { return impl_->overlap; }
size_t CudaModel::arena_high_water() const { return impl_->step_arena->high_water() + impl_->layer_arena->high_water(); }
int64_t CudaModel::arena_growths() const { return impl_->step_arena->growths() + impl_->layer_arena->growths(); }

const StateSlot& CudaModel::slot(int64_t i) const {
  DI_CHECK_INPUT(i >= 0 && i < num_slots(), "slot ", i, " is out of range [0, ", num_slots(), ")");
  return impl_->slots[i];
}

void CudaModel::reset_slot(int64_t i, int64_t replay_start, int64_t history_end,
                           std::span<const int64_t> preceding) {
  DI_CHECK_INPUT(i >= 0 && i < num_slots(), "slot ", i, " is out of range [0, ", num_slots(), ")");
  DI_CHECK_INPUT(int64_t(preceding.size()) <= replay_start, "slot ", i, ": ", preceding.size(),
                 " tokens before a replay from position ", replay_start);
  impl_->slots[i].reset_for_replay(impl_->cfg, replay_start, history_end,
                                   impl_->engram ? impl_->engram->recent_ids(preceding) : std::vector<int64_t>{});
}

void CudaModel::copy_slot(int64_t from, int64_t to) {
  DI_CHECK(from >= 0 && from < num_slots() && to >= 0 && to < num_slots(), "copy_slot ", from, " -> ", to);
  Impl& d = *impl_;
  const int64_t L = d.cfg.num_hidden_layers;
  // window(slot, 0) starts the slot's L contiguous rings; pending_rows(slot, 0, false) its
  // sources x {kv, gate} contiguous pending rows.
  d.d2d(d.window(to, 0), d.window(from, 0), L * d.cfg.sliding_window * d.cfg.head_dim);
  d.d2d(d.pending_rows(to, 0, false), d.pending_rows(from, 0, false),
        int64_t(d.sources.size()) * 2 * d.max_ratio * d.cfg.head_dim);
  d.slots[to] = d.slots[from];
}

void CudaModel::copy_block(int64_t from, int64_t to) {
  Impl& d = *impl_;
  DI_CHECK(from >= 0 && from < d.num_blocks && to >= 0 && to < d.num_blocks, "copy_block ", from, " -> ", to);
  for (const Impl::Source& s : d.sources) {
    d.d2d(s.entries + to * s.epb * d.cfg.head_dim, s.entries + from * s.epb * d.cfg.head_dim, s.epb * d.cfg.head_dim);
    d.d2d(s.keys + to * s.epb * d.cfg.index_head_dim, s.keys + from * s.epb * d.cfg.index_head_dim,
          s.epb * d.cfg.index_head_dim);
  }
}

namespace {
std::atomic<int> g_src_chain{-1};
}  // namespace

void source_chain_set_mode(int mode) { g_src_chain = mode < 0 ? -1 : std::min(mode, 2); }
int source_chain_mode() {
  return resolve_env_switch(g_src_chain, "DEEPINFER_SRC_CHAIN", 0, 2,
                            [](const EnvDigit& e) { return e.valid ? e.value : kSourceChainDefault; });
}

std::vector<float> CudaModel::forward_batch(std::vector<CudaBatchItem>& items) {
  const LogitsView v = impl_->forward(items);
  const auto t = Impl::Clock::now();
  std::vector<float> out(v.data, v.data + v.rows * v.vocab);
  impl_->timing.copy = Impl::ms_since(t);
  impl_->timing.total += impl_->timing.copy;
  return out;
}
LogitsView CudaModel::forward_batch_view(std::vector<CudaBatchItem>& items) { return impl_->forward(items); }
CudaModel::StepTiming CudaModel::last_step_timing() const { return impl_->timing; }

void CudaModel::set_layer_timing(bool on) { impl_->layer_timing = on; }
void CudaModel::set_trace_fnv(bool on) { impl_->trace_fnv = on; }
void CudaModel::set_cuda_graphs(bool on) { impl_->opts.cuda_graphs = on; }
CudaModel::GraphNodes CudaModel::last_graph_nodes() const { return impl_->last_nodes; }
std::vector<float> CudaModel::last_layer_ms() const { return impl_->layer_ms; }
std::pair<void*, size_t> CudaModel::slot_memory() const { return {impl_->slot_buf.data(), impl_->plan.slots}; }
std::pair<void*, size_t> CudaModel::history_memory() const {
  return {impl_->history_buf.data(), impl_->plan.history};
}

namespace {
// Options and device, checked before anything is read or allocated.
void check_options(const CudaModelOptions& o) {
  DI_CHECK_INPUT(o.max_slots >= 1, "max_slots must be >= 1");
  DI_CHECK_INPUT(o.max_tokens >= 1, "max_tokens must be >= 1");
  DI_CHECK_INPUT(o.block_size >= 2, "block_size must be >= 2");
  DI_CHECK_INPUT(o.num_blocks >= 0 && o.max_blocks >= 1, "num_blocks must be >= 0 and max_blocks >= 1");
  DI_CHECK_INPUT(o.memory_fraction > 0 && o.memory_fraction <= 1, "memory_fraction must be in (0, 1]");
  DI_CHECK_INPUT(o.max_context >= 0, "max_context must be >= 0");
  DI_CHECK_INPUT(o.gemm_min_tokens >= 0, "gemm_min_tokens must be >= 0");
  DI_CHECK_INPUT(o.branch_bulk_per_sm >= 0 && o.branch_bulk_per_sm <= 8, "branch_bulk_per_sm must be in [0, 8], not ",
                 o.branch_bulk_per_sm);
  DI_CHECK_INPUT(o.bf16_weights != Bf16Weights::kOn || ops::rounding_of(o.activations) == ops::Activations::kBF16,
                 "bf16_weights on (--bf16-weights on) needs bf16 or fp8 activations (--activations bf16|fp8): only "
                 "their cuBLASLt GEMMs read the copies");
  DI_CHECK_INPUT(o.bf16_weights != Bf16Weights::kOn || !o.batch_invariant,
                 "bf16_weights on (--bf16-weights on) does nothing in the batch-invariant mode, which never runs "
                 "the cuBLASLt GEMMs that read the copies");
  int devices = 0;
  const cudaError_t count_err = cudaGetDeviceCount(&devices);
  DI_CHECK_INPUT(count_err == cudaSuccess && devices > 0, "no CUDA device is available (",
                 count_err == cudaSuccess ? "none found" : cudaGetErrorString(count_err), ")");
  DI_CHECK_INPUT(o.device >= 0 && o.device < devices, "CUDA device ", o.device, " does not exist (", devices,
                 " found)");
  CUDA_CHECK(cudaSetDevice(o.device));
}
}  // namespace

std::unique_ptr<CudaModel> CudaModel::load(const std::string& dir, const CudaModelOptions& o) {
  namespace fs = std::filesystem;
  DI_CHECK_INPUT(fs::is_directory(dir), "model directory '", dir, "' does not exist");
  check_options(o);
  const ModelConfig cfg = load_model_config((fs::path(dir) / "config.json").string());
  DI_CHECK_INPUT(cfg.scoring_func == "sqrtsoftplus", dir, "/config.json: scoring_func '", cfg.scoring_func,
                 "' is not supported by the V4.1 model (only sqrtsoftplus)");
  auto ckpt = Checkpoint::open(dir);
  const ModelWeights w = bind_weights(cfg, *ckpt);
  const std::string tok = (fs::path(dir) / "tokenizer.json").string();
  DI_CHECK_INPUT(cfg.engram_layer_ids.empty() || fs::exists(tok), "model directory '", dir,
                 "' has Engram layers but no tokenizer.json (the n-gram hash is built from it)");
  return load(cfg, w, tok, o);
}

std::unique_ptr<CudaModel> CudaModel::load(const ModelConfig& cfg, const ModelWeights& w,
                                           const std::string& tokenizer_path, const CudaModelOptions& o) {
  DI_CHECK_INPUT(cfg.scoring_func == "sqrtsoftplus", "scoring_func '", cfg.scoring_func,
                 "' is not supported by the V4.1 model (only sqrtsoftplus)");
  DI_CHECK_INPUT(int64_t(w.layers.size()) == cfg.num_hidden_layers, "weights hold ", w.layers.size(),
                 " layers, the config ", cfg.num_hidden_layers);
  check_options(o);
  auto m = std::unique_ptr<CudaModel>(new CudaModel());
  Impl& d = *m->impl_;
  d.opts = o;
  d.mode = o.batch_invariant ? gpu::LinearMode::kInvariant : gpu::LinearMode::kAuto;
  d.act = o.activations;
  d.cfg = cfg;
  const ModelConfig& c = d.cfg;
  if (!c.engram_layer_ids.empty()) d.engram = EngramHasher::create(c, tokenizer_path);
  d.branch_priority = o.branch_priority;
  d.branch_bulk_per_sm = o.branch_bulk_per_sm;
  // The one-digit switches (common/env.h), each read once and refused at load when set to
  // anything else: a typo must not silently measure the default. All but the two branch switches
  // are read again where the kernel or path is picked (the kernel library, which cannot throw;
  // DEEPINFER_SRC_CHAIN by source_chain_mode), with the same parser.
  const auto digit_switch = [](const char* name, int lo, int hi, const char* meaning) {
    const EnvDigit e = env_digit(name, lo, hi);
    DI_CHECK_INPUT(!e.set || e.valid, name, "='", e.text, "' must be ", meaning);
    return e;
  };
  if (const EnvDigit e = digit_switch("DEEPINFER_BRANCH_PRIO", 0, 1,
                                      "0 (one priority) or 1 (the main stream above the concurrent branches)");
      e.valid)
    d.branch_priority = e.value == 1;
  if (const EnvDigit e = digit_switch("DEEPINFER_BRANCH_BULK", 0, 8,
                                      "a digit 0..8 (a branch's bulk gemv blocks per SM; 0: as many as fit)");
      e.valid)
    d.branch_bulk_per_sm = e.value;
  if (const EnvDigit e = digit_switch("DEEPINFER_TRACE_FNV", 0, 1,
                                      "0 or 1 (1: a stderr line with the FNV-1a of each named tensor at eager steps)");
      e.valid)
    d.trace_fnv = e.value == 1;
  digit_switch("DEEPINFER_FP8_GEMV", 0, 1, "0 or 1 (fp8 mode's decode gemv never / from one token)");
  digit_switch("DEEPINFER_FP8_GEMV_LEAN", 0, 1, "0 or 1 (the fp8 decode gemv's lean variant)");
  digit_switch("DEEPINFER_B1_FUSE", 0, 8, "a digit 0..8 (the largest batch of the small-kernel fusions)");
  digit_switch("DEEPINFER_HC_SITE", 0, 3,
               "a digit 0..3 (the one-launch hc site's finish in its last block, or deferred to its own stream, "
               "NOTES 51; 2: deferred, the wide site; 3: 2 as a programmatic dependent launch, NOTES 55)");
  digit_switch("DEEPINFER_ENGRAM_WKV", 0, 3,
               "a digit 0..3 (the Engram wkv at one-row steps: at the step's start, capped to a half / a quarter "
               "of the SMs, or after layer 0's first hc site; NOTES 55)");
  digit_switch("DEEPINFER_GEMV_PAIR", 0, 3,
               "a digit 0..3 (kAuto's one-token gemv pairs on the tensor-map kernel: off, every pair, outside "
               "branches, pairs of <= 16 MiB)");
  digit_switch("DEEPINFER_ROUTER_SPLIT", 0, 1,
               "0 or 1 (the router logits in 16 K pieces, kDmmaSplit, the default; 0: kDmmaDeep's order, NOTES 48)");
  digit_switch("DEEPINFER_INDEXER_WGMMA", 0, 1, "0 or 1 (0: the prefill indexer score off wgmma, on the grouped mma.sync kernel)");
  digit_switch("DEEPINFER_SEL_FUSE", 0, 1,
               "0 or 1 (0: a graph step's attention selection lists in five launches, not one, NOTES 50)");
  digit_switch("DEEPINFER_SRC_CHAIN", 0, 2,
               "a digit 0..2 (1: the source layers' indexer query beside the compressor, row copies folded, NOTES 54; "
               "2: also wq_b after the indexer score and no bad-selection memset node, NOTES 59)");
  d.src_chain = source_chain_mode() >= 1;
  d.src_chain2 = source_chain_mode() == 2;
  // Priorities (NOTES 34): the main stream carries the critical path, so with
  // branch_priority it takes the device's highest priority and the branches its lowest;
  // pending blocks of a higher-priority stream are placed first (running ones are not
  // preempted). A capture copies the stream's priority into each kernel node, and the
  // graph step is instantiated with cudaGraphInstantiateFlagUseNodePriority to keep them.
  int prio_least = 0, prio_greatest = 0;
  CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&prio_least, &prio_greatest));
  CUDA_CHECK(cudaStreamCreateWithPriority(&d.stream, cudaStreamNonBlocking,
                                          d.branch_priority ? prio_greatest : prio_least));
  d.overlap_moe_on = d.overlap_engram_on = d.overlap_attention_on = o.overlap;
  if (const char* v = std::getenv("DEEPINFER_OVERLAP"); v != nullptr && *v != '\0') {
    // 0: one stream; 1: every branch; else letters naming the branches on (measurements):
    // m the shared expert, e the Engram projections, a the compressor / indexer.
    const std::string s(v);
    const bool all = s == "1", letters = s.find_first_not_of("mea") == std::string::npos;
    DI_CHECK_INPUT(s == "0" || all || letters, "DEEPINFER_OVERLAP='", s,
                   "' must be 0 (one stream), 1 (every concurrent branch) or letters of the branches on: m (shared "
                   "expert), e (Engram), a (compressor / indexer), e.g. 'ma'");
    d.overlap_moe_on = all || (letters && s.find('m') != std::string::npos);
    d.overlap_engram_on = all || (letters && s.find('e') != std::string::npos);
    d.overlap_attention_on = all || (letters && s.find('a') != std::string::npos);
  }
  d.overlap = d.overlap_moe_on || d.overlap_engram_on || d.overlap_attention_on;
  if (d.overlap) {
    CUDA_CHECK(cudaStreamCreateWithPriority(&d.aux, cudaStreamNonBlocking, prio_least));
    CUDA_CHECK(cudaEventCreateWithFlags(&d.ev_fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&d.ev_join, cudaEventDisableTiming));
    if (d.src_chain) {
      CUDA_CHECK(cudaStreamCreateWithPriority(&d.aux2, cudaStreamNonBlocking, prio_least));
      CUDA_CHECK(cudaStreamCreateWithPriority(&d.aux3, cudaStreamNonBlocking, prio_least));
      for (cudaEvent_t* e : {&d.ev_q, &d.ev_lat, &d.ev_side, &d.ev_score})
        CUDA_CHECK(cudaEventCreateWithFlags(e, cudaEventDisableTiming));
    }
    if (d.engram) {
      CUDA_CHECK(cudaStreamCreateWithPriority(&d.eng, cudaStreamNonBlocking, prio_least));
      d.ev_engram.resize(c.engram_layer_ids.size());
      for (cudaEvent_t& e : d.ev_engram) CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    }
  }
  // The hc site's deferred finish (DEEPINFER_HC_SITE / kernels::hc_set_site_mode, read here:
  // a model per setting) on its own stream. Independent of the branches' switch: it is one
  // small kernel beside the main path, and with one stream it would be on it again.
  d.hc_site_defer = kernels::hc_site_mode() >= 1;
  if (d.hc_site_defer) {
    CUDA_CHECK(cudaStreamCreateWithPriority(&d.hcs, cudaStreamNonBlocking, prio_least));
    CUDA_CHECK(cudaEventCreateWithFlags(&d.ev_hc_fork, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&d.ev_hc_join, cudaEventDisableTiming));
  }
  size_t free_mem = 0, total_mem = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_mem, &total_mem));
  d.plan.free_before = free_mem;

  // 0. Sizes of everything but the weights, known before anything is allocated (the
  // Engram placement below weighs the history pool against the tables).
  for (int64_t layer : c.kv_source_layer_ids) {
    Impl::Source s;
    s.layer = layer;
    s.ratio = c.compress_ratios[layer];
    DI_CHECK_INPUT(s.ratio > 0 && o.block_size % s.ratio == 0, "block size ", o.block_size,
                   " must be a multiple of every compress ratio (layer ", layer, " has ratio ", s.ratio, ")");
    s.epb = o.block_size / s.ratio;
    d.max_ratio = std::max(d.max_ratio, s.ratio);
    d.sources.push_back(s);
  }
  const int64_t L = c.num_hidden_layers, hd = c.head_dim;
  const size_t window_floats = size_t(o.max_slots * L * c.sliding_window * hd);
  const size_t pending_floats = size_t(o.max_slots * int64_t(d.sources.size()) * 2 * d.max_ratio * hd);
  d.plan.slots = (window_floats + pending_floats) * sizeof(float);
  // Activation arenas, from the token budget: the step arena holds what lives through
  // all layers (residual streams, mixes, candidate masks), the layer arena one layer's
  // temporaries (it is rewound per layer). Estimates; a longer step adds chunks
  // (arena_growths()).
  const int64_t n = o.max_tokens, d_model = c.hidden_size, hc = c.hc_mult;
  size_t step_bytes = size_t(n) * size_t(hc * d_model * 2 + hc * (3 + hc) + 4 * d_model) * 4 + (1 << 20);
  // Concurrent branches: every Engram layer's gathered rows and projection live through
  // the step (computed at its start), for up to kOverlapMaxRows rows.
  if (d.overlap_engram_on && d.engram) {
    const int64_t rows = std::min(n, Impl::kOverlapMaxRows);
    step_bytes += c.engram_layer_ids.size() *
                  (size_t(rows) * size_t(d.engram->num_columns() * c.engram_head_dim + (hc + 1) * d_model) * 4 + 1024);
  }
  const int64_t per_token = c.q_lora_rank + 2 * c.num_attention_heads * hd + 2 * hd +
                            c.o_groups * c.o_lora_rank + 2 * c.num_attention_heads * hd / std::max<int64_t>(1, c.o_groups) +
                            c.index_n_heads * (c.index_head_dim + 1) + 6 * c.moe_intermediate_size + 4 * d_model +
                            c.num_experts_per_tok * 2 + (c.sliding_window + c.index_topk) * 4;
  size_t layer_bytes = size_t(n) * size_t(per_token) * 4 + (4 << 20);
  // Indexer scores [tokens, keys] of one sequence: bounded by the token budget times
  // the keys of the longest context at the smallest ratio.
  int64_t min_ratio = 0;
  for (const auto& s : d.sources) min_ratio = min_ratio == 0 ? s.ratio : std::min(min_ratio, s.ratio);
  if (min_ratio > 0) layer_bytes += size_t(n) * size_t(c.max_position_embeddings / min_ratio) * 5;
  d.plan.arena = step_bytes + layer_bytes;
  // bf16 mode: the large-batch GEMM's workspace (batch-invariant runs never take that path).
  // fp8 mode: the same (the non-FP8 products are bf16; the dense FP8 linears' codes and
  // scales, 1.125 bytes per x element, fit in the bf16 x room).
  if (ops::rounding_of(o.activations) == ops::Activations::kBF16 && !o.batch_invariant)
    d.plan.gemm = gemm_workspace_bytes(w, n);
  const size_t per_block = size_t(HistoryPool::bytes_per_block(c, o.block_size));

  // 1. Weights: one allocation, every tensor copied once; the Engram tables apart (2).
  Uploader up, tables;
  up.weight(w.embed, d.embed);
  up.weight(w.head, d.head);
  up.vec(w.norm, d.norm);
  d.layers.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& h = w.layers[l];
    DLayer& g = d.layers[l];
    up.vec(h.attn_norm, g.attn_norm);
    up.vec(h.ffn_norm, g.ffn_norm);
    for (auto [hs, gs] : {std::pair{&h.hc_attn, &g.hc_attn}, std::pair{&h.hc_ffn, &g.hc_ffn}}) {
      up.vec(hs->fn, gs->fn);
      up.vec(hs->base, gs->base);
      up.vec(hs->scale, gs->scale);
    }
    const AttentionWeights& a = h.attn;
    DAttn& ga = g.attn;
    up.weight(a.wq_a, ga.wq_a);
    up.weight(a.wq_b, ga.wq_b);
    up.weight(a.wkv, ga.wkv);
    up.weight(a.wo_a, ga.wo_a);
    up.weight(a.wo_b, ga.wo_b);
    up.weight(a.compressor_wkv, ga.compressor_wkv);
    up.weight(a.compressor_wgate, ga.compressor_wgate);
    up.weight(a.indexer_wk, ga.indexer_wk);
    up.weight(a.indexer_wq_b, ga.indexer_wq_b);
    up.weight(a.indexer_weights_proj, ga.indexer_weights_proj);
    up.vec(a.q_norm, ga.q_norm);
    up.vec(a.kv_norm, ga.kv_norm);
    up.vec(a.attn_sink, ga.attn_sink);
    up.vec(a.compressor_norm, ga.compressor_norm);
    up.vec(a.indexer_k_norm, ga.indexer_k_norm);
    up.weight(h.ffn.gate, g.ffn.gate);
    up.vec(h.ffn.gate_bias, g.ffn.gate_bias);
    g.ffn.experts.resize(h.ffn.experts.size());
    for (size_t e = 0; e < h.ffn.experts.size(); ++e) {
      up.weight(h.ffn.experts[e].w1, g.ffn.experts[e].w1);
      up.weight(h.ffn.experts[e].w3, g.ffn.experts[e].w3);
      up.weight(h.ffn.experts[e].w2, g.ffn.experts[e].w2);
    }
    up.weight(h.ffn.shared.w1, g.ffn.shared.w1);
    up.weight(h.ffn.shared.w3, g.ffn.shared.w3);
    up.weight(h.ffn.shared.w2, g.ffn.shared.w2);
    g.has_engram = h.has_engram;
    if (h.has_engram) {
      tables.weight(h.engram.table, g.engram.table);
      up.weight(h.engram.wkv, g.engram.wkv);
      up.vec(h.engram.gate_weight, g.engram.gate_weight);
    }
  }

  // The persistent bf16 copies' size (Bf16Weights): only runs that take the GEMM path
  // (plan.gemm > 0) can use them. The mirrors' shapes and formats are final here; their
  // data pointers become device pointers in up.run() below.
  size_t copy_bytes = 0;
  int64_t copy_count = 0;
  // fp8 mode reads them too: its dense FP8 linears take the same cuBLASLt GEMM on the
  // exact dequantized activation codes (ops/cuda/cuda_ops.h).
  auto copy_size = [&](const WeightRef& r) { return gpu::linear_bf16_copy_bytes(r); };
  if (d.plan.gemm > 0 && o.bf16_weights != Bf16Weights::kOff)
    d.for_each_dense([&](WeightRef& r) {
      const size_t b = copy_size(r);
      if (b == 0) return;
      copy_bytes = (copy_bytes + 255) / 256 * 256 + b;
      ++copy_count;
    });
  const size_t forced_copies = o.bf16_weights == Bf16Weights::kOn ? copy_bytes : 0;

  // 2. The Engram tables: device or mapped pinned host memory (the gather reads them
  // in place either way; the kernels cannot tell).
  const size_t dense = up.total(), table_bytes = tables.total();
  d.plan.engram_tables = table_bytes;
  if (table_bytes > 0) {
    // The history pool the tables would leave on the device: step 4's arithmetic on
    // the free memory less the weights, slots and arenas (their chunks' rounding and
    // the small buffers aside).
    const size_t before_pool = dense + table_bytes + d.plan.slots + d.plan.arena + d.plan.gemm + forced_copies;
    const size_t left = free_mem > before_pool ? free_mem - before_pool : 0;
    const int64_t wanted = o.num_blocks > 0 ? o.num_blocks : o.max_blocks;
    const int64_t fit_dev = per_block == 0 ? (left > 0 ? wanted : 0)
                                           : int64_t(double(left) * o.memory_fraction / double(per_block));
    std::string why;
    bool host = false;
    switch (o.engram_tables) {
      case EngramTables::kHost:
        host = true;
        why = "as asked (engram_tables host)";
        break;
      case EngramTables::kDevice:
        DI_CHECK_INPUT(dense + table_bytes <= free_mem, "the Engram tables (", table_bytes, " bytes, ",
                       human_bytes(table_bytes), ") and the other weights (", human_bytes(dense),
                       ") do not fit in the ", human_bytes(free_mem),
                       " of free device memory; engram_tables host (--engram-tables host) keeps the tables in "
                       "pinned host memory");
        why = "as asked (engram_tables device)";
        break;
      case EngramTables::kAuto:
        host = fit_dev < wanted;
        why = host ? "auto: on the device they would leave the history pool " + std::to_string(std::max<int64_t>(fit_dev, 0)) +
                         " of the " + std::to_string(wanted) + " blocks asked for"
                   : "auto: the history pool still gets the " + std::to_string(wanted) + " blocks asked for (" +
                         human_bytes(left) + " free after weights, tables, slots and arenas)";
        break;
    }
    d.plan.engram_on_host = host;
    if (host) {
      const cudaError_t e = d.engram_host.alloc(table_bytes);
      DI_CHECK_INPUT(e == cudaSuccess, "cannot allocate ", table_bytes, " bytes (", human_bytes(table_bytes),
                     ") of pinned host memory for the Engram tables: ", cudaGetErrorString(e),
                     (o.engram_tables == EngramTables::kHost ? "" : " (chosen by auto)"),
                     "; engram_tables device (--engram-tables device) puts them on the GPU if they fit");
      tables.run_host(d.engram_host);
      d.plan.host_pinned = table_bytes;
    } else {
      d.engram_dev = tables.run();
    }
    d.plan.engram_note = "deepinfer: Engram tables (" + std::to_string(c.engram_layer_ids.size()) + " layer" +
                         (c.engram_layer_ids.size() == 1 ? "" : "s") + ", " + human_bytes(table_bytes) + ") " +
                         (host ? "in mapped pinned host memory" : "on the device") + ", " + why;
    std::fprintf(stderr, "%s\n", d.plan.engram_note.c_str());
  }
  d.plan.weights = dense + (d.plan.engram_on_host ? 0 : table_bytes);

  // 2b. The bf16 copies, decided now that the Engram tables are placed (auto weighs the
  // history pool as the Engram auto does: what is left after weights, tables, slots,
  // arenas, workspace and copies must still hold the blocks asked for).
  bool copies = false;
  if (o.bf16_weights != Bf16Weights::kOff && d.plan.gemm > 0) {
    const size_t before_pool = d.plan.weights + d.plan.slots + d.plan.arena + d.plan.gemm + copy_bytes;
    const size_t left = free_mem > before_pool ? free_mem - before_pool : 0;
    const int64_t wanted = o.num_blocks > 0 ? o.num_blocks : o.max_blocks;
    const int64_t fit = per_block == 0 ? (left > 0 ? wanted : 0)
                                       : int64_t(double(left) * o.memory_fraction / double(per_block));
    std::string why;
    if (copy_bytes == 0) {
      why = "none needed: no FP8 / FP4 weight takes the GEMM path (BF16 weights are read in place)";
    } else if (o.bf16_weights == Bf16Weights::kOn) {
      DI_CHECK_INPUT(before_pool <= free_mem, "the bf16 weight copies (", copy_bytes, " bytes, ",
                     human_bytes(copy_bytes), ", twice the dense FP8 / FP4 weights) do not fit beside the weights (",
                     human_bytes(d.plan.weights), "), slots, arenas and GEMM workspace (",
                     human_bytes(d.plan.slots + d.plan.arena + d.plan.gemm), ") in the ", human_bytes(free_mem),
                     " of free device memory; bf16_weights off (--bf16-weights off) dequantizes per call instead");
      copies = true;
      why = "as asked (bf16_weights on)";
    } else {
      copies = fit >= wanted;
      why = copies ? "auto: the history pool still gets the " + std::to_string(wanted) + " blocks asked for (" +
                         human_bytes(left) + " free after weights, copies, slots and arenas)"
                   : "auto: they would leave the history pool " + std::to_string(std::max<int64_t>(fit, 0)) +
                         " of the " + std::to_string(wanted) + " blocks asked for; the GEMMs dequantize per call";
    }
    d.plan.bf16_weights = copies ? copy_bytes : 0;
    d.plan.bf16_note = "deepinfer: bf16 weight copies (" + std::to_string(copy_count) + " dense FP8 / FP4 weight" +
                       (copy_count == 1 ? "" : "s") + ", " + human_bytes(copy_bytes) + ") " +
                       (copies ? "on the device" : "off") + ", " + why;
    std::fprintf(stderr, "%s\n", d.plan.bf16_note.c_str());
  }
  d.weights_buf = up.run();
  if (copies) {
    // One allocation; each copy the per-call dequantization's bits for the whole weight.
    d.bf16_buf = DeviceBuffer(copy_bytes);
    size_t off = 0;
    d.for_each_dense([&](WeightRef& r) {
      const size_t b = copy_size(r);
      if (b == 0) return;
      off = (off + 255) / 256 * 256;
      auto* dst = reinterpret_cast<uint16_t*>(d.bf16_buf.data() + off);
      gpu::linear_make_bf16_copy(r, dst, d.stream);
      r.bf16 = dst;
      off += b;
    });
    DI_CHECK(off == copy_bytes, "bf16 copies: laid out ", off, " bytes of ", copy_bytes);
    CUDA_CHECK(cudaStreamSynchronize(d.stream));
  }
  for (DLayer& g : d.layers) {
    std::vector<ops::MoeExpertRef> ex(g.ffn.experts.size());
    for (size_t e = 0; e < ex.size(); ++e) ex[e] = {g.ffn.experts[e].w1, g.ffn.experts[e].w3, g.ffn.experts[e].w2};
    if (!ex.empty()) g.ffn.table = gpu::MoeExpertTable(ex);
  }

  const std::vector<float> mf = ops::rope_inv_freq(c.main_rope, c.qk_rope_head_dim);
  const std::vector<float> cf = ops::rope_inv_freq(c.compress_rope, c.qk_rope_head_dim);
  d.freq_buf = DeviceBuffer((mf.size() + cf.size()) * sizeof(float) + 256);
  CUDA_CHECK(cudaMemcpy(d.freq_buf.data(), mf.data(), mf.size() * 4, cudaMemcpyHostToDevice));
  CUDA_CHECK(cudaMemcpy(d.freq_buf.data() + mf.size() * 4, cf.data(), cf.size() * 4, cudaMemcpyHostToDevice));
  d.main_inv_freq = reinterpret_cast<const float*>(d.freq_buf.data());
  d.compress_inv_freq = reinterpret_cast<const float*>(d.freq_buf.data() + mf.size() * 4);

  // 3. State slots.
  d.slot_buf = DeviceBuffer(d.plan.slots);
  CUDA_CHECK(cudaMemset(d.slot_buf.data(), 0, d.plan.slots));
  d.windows = reinterpret_cast<float*>(d.slot_buf.data());
  d.pending = d.windows + window_floats;
  d.slots.resize(size_t(o.max_slots));
  for (StateSlot& s : d.slots) {
    s.layers.resize(size_t(L));  // counters only; the rows live on the device
    s.reset(c);
  }

  // 4. Activation arenas (sized in 0) and the pinned upload stage.
  d.step_arena = std::make_unique<DeviceArena>(step_bytes);
  d.layer_arena = std::make_unique<DeviceArena>(layer_bytes);
  d.stage = std::make_unique<HostStage>(size_t(8) << 20, d.stream);
  if (d.plan.gemm > 0) {
    d.gemm_buf = DeviceBuffer(d.plan.gemm);
    d.gemm_ws = {d.gemm_buf.data(), d.plan.gemm, o.gemm_min_tokens};
    gpu::linear_gemm_init();  // the cuBLASLt handle exists before any graph capture
  }
  // Decode graphs: the context they cover, and the rows their padded copy lists use.
  d.max_context = o.max_context > 0 ? o.max_context : c.max_position_embeddings;
  d.table_width = (d.max_context + o.block_size - 1) / o.block_size;
  d.pad_dim = std::max(hd, c.index_head_dim);
  d.pad_buf = DeviceBuffer(size_t(2 * d.pad_dim) * sizeof(float));
  CUDA_CHECK(cudaMemset(d.pad_buf.data(), 0, d.pad_buf.size()));
  d.zero_row = reinterpret_cast<const float*>(d.pad_buf.data());
  d.dump_row = reinterpret_cast<float*>(d.pad_buf.data()) + d.pad_dim;

  // 5. The paged history pool from what is left.
  CUDA_CHECK(cudaMemGetInfo(&free_mem, &total_mem));
  const int64_t fit = per_block == 0 ? o.max_blocks : int64_t(double(free_mem) * o.memory_fraction / double(per_block));
  if (o.num_blocks > 0) {
    DI_CHECK_INPUT(o.num_blocks <= fit, o.num_blocks, " history blocks (", per_block, " bytes each) do not fit in ",
                   free_mem, " bytes of free device memory (at most ", fit, ")");
    d.num_blocks = o.num_blocks;
  } else {
    d.num_blocks = std::min(o.max_blocks, fit);
    DI_CHECK_INPUT(d.num_blocks >= 1, "no device memory is left for the history pool");
  }
  d.plan.history = per_block * size_t(d.num_blocks);
  d.plan.num_blocks = d.num_blocks;
  d.history_buf = DeviceBuffer(std::max<size_t>(d.plan.history, 256));
  // Cleared once: a served sequence writes every history row before any read, but a slot reset
  // for replay (reset_slot's history_end) declares rows it never wrote -- flash_layers' decode
  // does, for 8K of context -- and what they read must not depend on what the memory held
  // before (NOTES 58: logits that differed between identical runs). ~30 ms per 100 GB.
  CUDA_CHECK(cudaMemset(d.history_buf.data(), 0, d.history_buf.size()));
  float* p = reinterpret_cast<float*>(d.history_buf.data());
  for (auto& s : d.sources) {
    s.entries = p;
    p += d.num_blocks * s.epb * hd;
    s.keys = p;
    p += d.num_blocks * s.epb * c.index_head_dim;
  }
  CUDA_CHECK(cudaMemGetInfo(&free_mem, &total_mem));
  d.plan.free_after = free_mem;
  return m;
}

// ---------------------------------------------------------------------------
// The forward pass (model.cpp's forward_batch).
// ---------------------------------------------------------------------------

LogitsView CudaModel::Impl::forward(std::vector<CudaBatchItem>& items) {
  const ModelConfig& c = cfg;
  const Clock::time_point t0 = Clock::now();
  timing = {};
  DI_CHECK_INPUT(!items.empty(), "forward: no items");
  std::vector<int64_t> all_tokens;
  std::vector<bool> seen(slots.size(), false);
  for (const CudaBatchItem& it : items) {
    DI_CHECK_INPUT(!it.tokens.empty(), "forward: no tokens");
    DI_CHECK_INPUT(it.slot >= 0 && it.slot < int64_t(slots.size()), "slot ", it.slot, " is out of range [0, ",
                   slots.size(), ")");
    DI_CHECK_INPUT(!seen[it.slot], "slot ", it.slot, " appears twice in one batch");
    seen[it.slot] = true;
    DI_CHECK(it.block_table != nullptr, "item without a block table");
    for (const int64_t t : it.tokens) {
      DI_CHECK_INPUT(t >= 0 && t < c.vocab_size, "token id ", t, " is out of range [0, ", c.vocab_size, ")");
      all_tokens.push_back(t);
    }
  }
  // The engine may step on another thread than the one that loaded the model.
  CUDA_CHECK(cudaSetDevice(opts.device));
  const int64_t bucket = graph_bucket(items);
  if (bucket > 0) {
    LogitsView logits;
    if (forward_graph(items, all_tokens, bucket, logits)) {
      timing.total = ms_since(t0);
      return logits;
    }
    timing = {};  // an eager step after all: its phases alone
  }
  Batch b = make_batch(items, int64_t(all_tokens.size()));
  try {
    timing.plan = ms_since(t0);
    const Clock::time_point t1 = Clock::now();
    int* d_bad_row = nullptr;
    const float* d_logits = run(b, all_tokens, d_bad_row);
    timing.launch = ms_since(t1);
    int64_t m = 0;
    for (size_t i = 0; i < items.size(); ++i) m += items[i].all_logits ? b.count(i) : 1;
    const LogitsView v = finish(b, d_logits, m, d_bad_row);
    timing.total = ms_since(t0);
    return v;
  } catch (...) {
    // Leave the streams drained so the arenas can be reused by the next call.
    drain();
    throw;
  }
}

CudaModel::Impl::Batch CudaModel::Impl::make_batch(std::vector<CudaBatchItem>& items, int64_t rows) const {
  Batch b;
  b.items = &items;
  b.begin.push_back(0);
  for (const CudaBatchItem& it : items) {
    const StateSlot& s = slots[it.slot];
    for (size_t k = 0; k < it.tokens.size(); ++k) b.positions.push_back(s.num_tokens + int64_t(k));
    b.begin.push_back(b.begin.back() + int64_t(it.tokens.size()));
  }
  b.n = rows;
  b.shared.resize(items.size());
  return b;
}

// Embedding, the layers and the head of one batch (launches, or in a graph plan pass
// only the host's share); returns the device logits of the requested rows (every
// row in a graph pass: one per item, the padding rows after them).
float* CudaModel::Impl::run(Batch& b, const std::vector<int64_t>& all_tokens, int*& d_bad_row) {
  const ModelConfig& c = cfg;
  std::vector<CudaBatchItem>& items = *b.items;
  const int64_t d = c.hidden_size, hc = c.hc_mult, n = b.n;
  // The previous step ended with a stream sync: both arenas and the stage are free.
  step_arena->reset();
  layer_arena->reset();
  stage->reset();
  b.d_positions = upload(b.positions, *step_arena, n, 0);
  const int64_t* d_tokens = upload(all_tokens, *step_arena, n, 0);

  float* h = step_arena->alloc<float>(n * hc * d);
  if (launching()) CUDA_CHECK(kernels::embed_rows({gpu::to_weight_args(embed), d_tokens, h, n, hc}, stream));
  if (gp == nullptr) ++trace_step;
  if (launching()) trace("h_embed", -1, h, n * hc * d * int64_t(sizeof(float)));
  const int64_t* d_engram_rows = nullptr;
  int64_t engram_row_stride = 0;
  // The flag, then (DEEPINFER_B1_FUSE) the one-launch hc sites' completion counters, one
  // per row: zeroed by the same memset (no node more), and each launch leaves them zero.
  // With src_chain2 (NOTES 59) one int more after them: the bad-selection flag, which the
  // first sparse layer then takes without a memset node of its own (a graph's memset node
  // there left ~14 us with nothing running on the step's path, NOTES 54).
  const bool hc_one_launch = kernels::b1_fuse_for(n);
  const int64_t flag_ints = (hc_one_launch ? 1 + n : 1) + (src_chain2 ? 1 : 0);
  d_bad_row = step_arena->alloc<int>(flag_ints);
  unsigned* hc_counters = hc_one_launch ? reinterpret_cast<unsigned*>(d_bad_row + 1) : nullptr;
  b.bad_selection_slot = src_chain2 ? d_bad_row + flag_ints - 1 : nullptr;
  if (launching()) CUDA_CHECK(cudaMemsetAsync(d_bad_row, 0, sizeof(int) * flag_ints, stream));
  if (engram) {
    std::vector<int64_t> rows;
    for (size_t i = 0; i < items.size(); ++i) {
      StateSlot& slot = slot_of(b, i);
      auto r = engram->hash(items[i].tokens, slot.num_tokens, slot.recent_ngram_ids);
      rows.insert(rows.end(), r.begin(), r.end());
    }
    engram_row_stride = int64_t(c.engram_layer_ids.size()) * engram->num_columns();
    d_engram_rows = upload(rows, *step_arena, n * engram_row_stride, 0);  // padding rows gather row 0
  }

  std::vector<float> pre_init(n * hc, 0.0f);
  for (int64_t t = 0; t < n; ++t) pre_init[t * hc] = 1.0f;
  float* pre_mix = upload(pre_init, *step_arena, n * hc);
  float* a_pre = step_arena->alloc<float>(n * hc);
  float* post = step_arena->alloc<float>(n * hc);
  float* comb = step_arena->alloc<float>(n * hc * hc);
  float* x = step_arena->alloc<float>(n * d);
  float* y = step_arena->alloc<float>(n * d);
  const float eps = float(c.rms_norm_eps);
  const bool go = launching();
  // The mixes' split-K partial sums: step arena scratch (a cudaMallocAsync / free pair
  // per call was two more graph nodes and an allocator round per call).
  DI_CHECK(hc >= 1 && hc <= kernels::kMaxHc && d <= kernels::kMaxCollapseNormDim, "hc ", hc, " x ", d,
           " is outside the CUDA kernels' range");
  float* mix_ws = step_arena->alloc<float>(kernels::hc_mixes_workspace_floats(n, hc, d));
  auto mixes_args = [&](const DHc& s, float* pre_out) {
    kernels::HcMixesArgs a;
    a.h = h;
    a.fn = s.fn;
    a.base = s.base;
    a.scale = s.scale;
    a.n = n;
    a.hc = hc;
    a.dim = d;
    a.norm_eps = eps;
    a.hc_eps = float(c.hc_eps);
    a.sinkhorn_iters = c.hc_sinkhorn_iters;
    a.pre = pre_out;
    a.post = post;
    a.comb = comb;
    a.workspace = mix_ws;
    a.counters = hc_counters;  // hc_mixes (no collapse) never reads them
    return a;
  };
  // hc_collapse + rms_norm, one launch (bitwise the two kernels).
  auto collapse_norm = [&](const float* hh, const float* pre, float* out, int64_t rows, const float* w) {
    if (go) CUDA_CHECK(kernels::hc_collapse_norm({hh, pre, w, out, rows, hc, d, eps}, stream));
  };
  // A site's mixes (into pre_out, post, comb) and the collapse + norm of h with the
  // previous site's weights: the mixes' finish rides in the collapse kernel (one node
  // fewer per site; bitwise the separate kernels).
  // With expand_y, the hc_expand of the previous sublayer's output (with the current
  // post / comb) runs first, inside the mixes' partial sums: still two launches.
  // DEEPINFER_HC_SITE=1 (NOTES 51): the one-launch site leaves its finish (pre_out / post /
  // comb from mix_ws) to hc_mixes_finish on the `hcs` stream; hc_join() makes the main stream
  // wait for it before anything reads those buffers or rewrites mix_ws.
  const bool hc_defer = go && hc_one_launch && hc_site_defer && hcs != nullptr;
  // Modes 2 / 3 (NOTES 55): the wide site, 3 also a programmatic dependent launch; read per step
  // (the stream is the load's), so a model loaded with 1..3 can compare them.
  const int hc_mode = hc_defer ? kernels::hc_site_mode() : 0;
  bool hc_finish_pending = false;
  auto hc_join = [&] {
    if (!hc_finish_pending) return;
    CUDA_CHECK(cudaStreamWaitEvent(stream, ev_hc_join, 0));
    hc_finish_pending = false;
  };
  auto mixes_collapse_norm = [&](const DHc& s, float* pre_out, const float* collapse_pre, const float* w,
                                 const float* expand_y) {
    if (!go) return;
    hc_join();
    const kernels::HcCollapseNormArgs cn{h, collapse_pre, w, x, n, hc, d, eps};
    kernels::HcMixesArgs m = mixes_args(s, pre_out);
    m.defer_finish = hc_defer && kernels::hc_site_one_launch_applies(m, cn);
    m.wide = m.defer_finish && hc_mode >= 2;
    m.pdl = m.wide && hc_mode == 3;
    if (expand_y != nullptr)
      CUDA_CHECK(kernels::hc_expand_mixes_collapse_norm({h, expand_y, post, comb, n, hc, d}, m, cn, stream));
    else
      CUDA_CHECK(kernels::hc_mixes_collapse_norm(m, cn, stream));
    if (m.defer_finish) {
      CUDA_CHECK(cudaEventRecord(ev_hc_fork, stream));
      CUDA_CHECK(cudaStreamWaitEvent(hcs, ev_hc_fork, 0));
      CUDA_CHECK(kernels::hc_mixes_finish(m, hcs));
      CUDA_CHECK(cudaEventRecord(ev_hc_join, hcs));
      hc_finish_pending = true;
    }
  };
  // An Engram layer's gather of its table rows into e, then its wkv projection into kv, on
  // `stream` (the main one, or the Engram branch's inside a Branch scope).
  auto engram_project = [&](int64_t l, float* e, float* kv) {
    const int64_t cols = engram->num_columns();
    if (go)
      CUDA_CHECK(kernels::engram_gather({gpu::to_weight_args(layers[l].engram.table),
                                         d_engram_rows + c.engram_slot(l) * cols, engram_row_stride, n, cols, e,
                                         d_bad_row},
                                        stream));
    linear(e, kv, n, layers[l].engram.wkv);
    if (go) {
      trace("engram_rows", l, d_engram_rows, n * engram_row_stride * int64_t(sizeof(int64_t)));
      trace("engram_e", l, e, n * cols * c.engram_head_dim * int64_t(sizeof(float)));
      trace("engram_kv", l, kv, n * (hc + 1) * d * int64_t(sizeof(float)));
    }
  };
  // Concurrent branches: every Engram layer's gather + wkv projection read only the token
  // ids, so they run on their own stream from here (after the flag's memset, which the
  // gather may set), beside the layers before them; each Engram gate waits for its layer's.
  const bool engram_ahead = overlap_engram(n);
  std::vector<float*> engram_kv(size_t(c.num_hidden_layers), nullptr);
  // One-row steps (NOTES 55): the wkv's grid capped to a half / a quarter of the SMs (modes 1 / 2)
  // or the branch forked after layer 0's first hc site (3; not where layer 0 has the Engram gate),
  // so that layer 0's path does not wait for the wkv's one-CTA-per-SM grid (NOTES 49 item 6).
  const int engram_mode = engram_ahead && n == 1 ? kernels::engram_wkv_mode() : 0;
  const int sms = kernels::device_sm_count();
  const int engram_cap = engram_mode == 1 ? std::max(1, sms / 2) : engram_mode == 2 ? std::max(1, sms / 4) : 0;
  const bool engram_late = engram_mode == 3 && c.num_hidden_layers > 0 && !layers[0].has_engram;
  auto engram_fork = [&] {
    const int64_t cols = engram->num_columns(), ehd = c.engram_head_dim;
    bool forked = false;
    for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
      if (!layers[l].has_engram) continue;
      float* e = step_arena->alloc<float>(n * cols * ehd);
      engram_kv[l] = step_arena->alloc<float>(n * (hc + 1) * d);
      if (!go) continue;
      if (!forked) fork_to(eng);
      forked = true;
      Branch br(*this, eng);
      const int saved_cap = kernels::gemv_tmap_max_ctas();
      kernels::gemv_set_tmap_max_ctas(engram_cap);
      engram_project(l, e, engram_kv[l]);
      kernels::gemv_set_tmap_max_ctas(saved_cap);
      CUDA_CHECK(cudaEventRecord(ev_engram[size_t(c.engram_slot(l))], stream));
    }
  };
  if (engram_ahead && !engram_late) engram_fork();
  // The MoE output y of the previous layer, not yet expanded into h: the next layer's
  // first mixes take it (unless an Engram gate reads h before them).
  bool expand_pending = false;
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    mark_layer(l);
    layer_arena->reset();
    const DLayer& lw = layers[l];
    if (lw.has_engram) {
      if (go) hc_join();  // the gate reads h only, but the expand reads post / comb
      if (expand_pending && go) gpu::hc_expand({h, y, post, comb, n, hc, d}, stream);
      expand_pending = false;
      float* kv = engram_kv[l];
      if (engram_ahead) {
        if (go) CUDA_CHECK(cudaStreamWaitEvent(stream, ev_engram[size_t(c.engram_slot(l))], 0));
      } else {
        float* e = layer_arena->alloc<float>(n * engram->num_columns() * c.engram_head_dim);
        kv = layer_arena->alloc<float>(n * (hc + 1) * d);
        engram_project(l, e, kv);
      }
      if (go) trace("h_before_gate", l, h, n * hc * d * int64_t(sizeof(float)));
      if (go) CUDA_CHECK(kernels::engram_gate({h, kv, lw.engram.gate_weight, n, hc, d, eps}, stream));
      if (go) trace("h_gated", l, h, n * hc * d * int64_t(sizeof(float)));
    }
    mixes_collapse_norm(lw.hc_attn, a_pre, pre_mix, lw.attn_norm, expand_pending ? y : nullptr);
    expand_pending = false;
    if (go) trace("attn_in", l, x, n * d * int64_t(sizeof(float)));
    if (engram_late && l == 0) engram_fork();
    attention(b, l, x, y);
    if (go) trace("attn_out", l, y, n * d * int64_t(sizeof(float)));

    // The attention output expanded into h, then f_pre (the next site's collapse weights).
    mixes_collapse_norm(lw.hc_ffn, pre_mix, a_pre, lw.ffn_norm, y);
    if (go) trace("ffn_in", l, x, n * d * int64_t(sizeof(float)));
    moe(l, x, n, y);
    if (go) trace("moe_out", l, y, n * d * int64_t(sizeof(float)));
    expand_pending = true;
    sign(*layer_arena);
  }
  if (go) hc_join();  // the last expand and the head's collapse read post / comb / pre_mix
  if (expand_pending && go) gpu::hc_expand({h, y, post, comb, n, hc, d}, stream);
  mark_layer(c.num_hidden_layers);
  for (size_t i = 0; i < items.size(); ++i) slot_of(b, i).num_tokens += b.count(i);

  // Only the requested rows go through the final norm and the head.
  layer_arena->reset();
  std::vector<int64_t> rows = logit_rows(items, b.begin);
  // A graph step's items have one row each: row t is item t, padding rows included.
  for (int64_t t = int64_t(rows.size()); gp != nullptr && t < n; ++t) rows.push_back(t);
  const int64_t m = int64_t(rows.size());
  float* hs = layer_arena->alloc<float>(m * hc * d);
  float* pm = layer_arena->alloc<float>(m * hc);
  std::vector<const float*> src_h, src_p;
  std::vector<float*> dst_h, dst_p;
  for (int64_t r = 0; r < m; ++r) {
    src_h.push_back(h + rows[r] * hc * d);
    dst_h.push_back(hs + r * hc * d);
    src_p.push_back(pre_mix + rows[r] * hc);
    dst_p.push_back(pm + r * hc);
  }
  // hc * d floats per row: graph rows are exact (no padding copies), hence no pad_dim check.
  if (gp != nullptr) {
    auto* s1 = upload(src_h, *layer_arena, m);
    auto* d1 = upload(dst_h, *layer_arena, m);
    auto* s2 = upload(src_p, *layer_arena, m);
    auto* d2 = upload(dst_p, *layer_arena, m);
    if (go) {
      CUDA_CHECK(kernels::copy_rows({s1, d1, m, hc * d}, stream));
      CUDA_CHECK(kernels::copy_rows({s2, d2, m, hc}, stream));
    }
  } else {
    copy_rows(src_h, dst_h, hc * d);
    copy_rows(src_p, dst_p, hc);
  }
  float* xs = layer_arena->alloc<float>(m * d);
  collapse_norm(hs, pm, xs, m, norm);
  float* d_logits = layer_arena->alloc<float>(m * c.vocab_size);
  linear(xs, d_logits, m, head);
  if (go) trace("logits", c.num_hidden_layers, d_logits, m * c.vocab_size * int64_t(sizeof(float)));
  timing_event(c.num_hidden_layers + 1);
  sign(*layer_arena);
  sign(*step_arena);
  return d_logits;
}

// Host memory for `count` logits floats: the pinned buffer (grown as needed) up to
// kPinnedLogits, else the pageable vector. Called after the previous step's sync, so
// nothing still reads either.
float* CudaModel::Impl::logits_buffer(size_t count) {
  const size_t bytes = std::max<size_t>(count, 1) * sizeof(float);
  if (bytes > kPinnedLogits) {
    pageable_logits.resize(count);
    return pageable_logits.data();
  }
  if (bytes > pinned_logits_bytes) {
    if (pinned_logits) CUDA_CHECK(cudaFreeHost(pinned_logits));
    pinned_logits = nullptr;
    pinned_logits_bytes = 0;
    CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_logits), bytes));
    pinned_logits_bytes = bytes;
  }
  return pinned_logits;
}

// The first `rows` logits rows to the host and the step's device-side error flags, one
// sync for all (async copies into pinned memory); then the checks and, with layer
// timing, the device times of the layers, the head and the download.
LogitsView CudaModel::Impl::finish(const Batch& b, const float* d_logits, int64_t rows, const int* d_bad_row) {
  const ModelConfig& c = cfg;
  const size_t count = size_t(std::max<int64_t>(rows, 0)) * size_t(c.vocab_size);
  float* host = logits_buffer(count);
  if (pinned_flags == nullptr) CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&pinned_flags), 2 * sizeof(int)));
  pinned_flags[0] = pinned_flags[1] = 0;  // the previous step's sync ended every copy into them
  if (layer_timing)
    for (cudaEvent_t& e : download_events)
      if (e == nullptr) CUDA_CHECK(cudaEventCreate(&e));
  if (layer_timing) CUDA_CHECK(cudaEventRecord(download_events[0], stream));
  if (count > 0)
    CUDA_CHECK(cudaMemcpyAsync(host, d_logits, count * sizeof(float), cudaMemcpyDeviceToHost, stream));
  if (layer_timing) CUDA_CHECK(cudaEventRecord(download_events[1], stream));
  CUDA_CHECK(cudaMemcpyAsync(&pinned_flags[0], d_bad_row, sizeof(int), cudaMemcpyDeviceToHost, stream));
  if (b.d_bad_selection != nullptr)
    CUDA_CHECK(cudaMemcpyAsync(&pinned_flags[1], b.d_bad_selection, sizeof(int), cudaMemcpyDeviceToHost, stream));
  const Clock::time_point t = Clock::now();
  CUDA_CHECK(cudaStreamSynchronize(stream));
  timing.wait = ms_since(t);
  DI_CHECK(pinned_flags[0] == 0, "engram row out of range");
  DI_CHECK(pinned_flags[1] == 0, "an indexer selection names an entry outside the compressed history");
  // A benchmark hook: an event pair that cannot be read reports -1 rather than failing the step.
  auto elapsed = [](cudaEvent_t a, cudaEvent_t z) {
    float ms = -1.0f;
    if (cudaEventElapsedTime(&ms, a, z) != cudaSuccess) {
      cudaGetLastError();
      ms = -1.0f;
    }
    return ms;
  };
  const int64_t L = c.num_hidden_layers;
  if (layer_timing && int64_t(layer_events.size()) > L) {
    layer_ms.assign(size_t(L), 0.0f);
    for (int64_t l = 0; l < L; ++l) layer_ms[l] = elapsed(layer_events[l], layer_events[l + 1]);
    if (int64_t(layer_events.size()) > L + 1) timing.head_ms = elapsed(layer_events[L], layer_events[L + 1]);
    timing.download_ms = elapsed(download_events[0], download_events[1]);
  }
  return LogitsView{host, rows, c.vocab_size};
}

// ---------------------------------------------------------------------------
// Decode steps as CUDA graphs.
//
// Buckets 1, 2, 4, .. 256 items, the batch padded up to its bucket: at most 9 graphs
// per model (capturing every exact size would mean up to 256 captures, each a full
// step plus an instantiation), and a decode step reads the weights once whatever its
// row count, so padding costs little. Padding rows are tokens 0 at position 0 with no
// slot: their pointer lists read zero_row and write dump_row, their attention reads
// one pool row, the indexer gives them no keys; every kernel works per row (per
// token, query or group), so they change no real row. (In the default linear mode
// the kernel choice depends on the row count, so real rows equal an eager step of
// the bucket's size; with batch_invariant they are bitwise an eager step's.)
//
// Sizes that vary with the data are fixed per bucket: the compressed entries and
// index keys of an item by max_context / ratio, the block table by max_context /
// block_size, the distinct selected entries by top_k, the window ids by the window;
// the kernels read the real counts from the parameter block.
// ---------------------------------------------------------------------------

int64_t CudaModel::Impl::graph_bucket(const std::vector<CudaBatchItem>& items) const {
  if (!opts.cuda_graphs) return 0;
  const int64_t count = int64_t(items.size());
  if (count > 256) return 0;
  for (const CudaBatchItem& it : items) {
    if (it.tokens.size() != 1 || it.all_logits) return 0;
    if (slots[it.slot].num_tokens + 1 > max_context) return 0;
  }
  int64_t bucket = 1;
  while (bucket < count) bucket *= 2;
  auto it = graphs.find(bucket);
  return it != graphs.end() && it->second.failed ? 0 : bucket;
}

// Runs a decode step from its bucket's graph (capturing it first if needed). Returns
// false, with every host counter as it was, when the step must run eagerly instead.
bool CudaModel::Impl::forward_graph(std::vector<CudaBatchItem>& items, const std::vector<int64_t>& all_tokens,
                                    int64_t bucket, LogitsView& logits) {
  const Clock::time_point t0 = Clock::now();
  std::vector<StateSlot> saved;
  saved.reserve(items.size());
  for (const CudaBatchItem& it : items) saved.push_back(slots[it.slot]);
  auto restore = [&] {
    for (size_t i = 0; i < items.size(); ++i) slots[items[i].slot] = saved[i];
  };
  DecodeGraph& g = graphs[bucket];
  if (g.exec != nullptr && g.timed != layer_timing) {  // the event nodes come with the capture
    CUDA_CHECK(cudaStreamSynchronize(stream));
    cudaGraphExecDestroy(g.exec);
    g.exec = nullptr;
  }
  float* d_logits = nullptr;
  int* d_bad_row = nullptr;
  Batch b;
  GraphPass pass;
  pass.rows = bucket;
  pass.pb = &g.block;
  // The key of the block's keyed lists: the slot of each row (padding rows hold none).
  std::vector<int64_t> key(items.size());
  for (size_t i = 0; i < items.size(); ++i) key[i] = items[i].slot;
  bool capturing = false;
  try {
    if (g.exec == nullptr) {
      // Sizing pass (host only), then the capture pass, which also plans this step.
      GraphPass sizing = pass;
      g.block.begin_sizing();
      gp = &sizing;
      b = make_batch(items, bucket);
      run(b, all_tokens, d_bad_row);
      gp = nullptr;
      restore();
      g.block.end_sizing();
      g.params = DeviceBuffer(g.block.bytes());
      if (g.host) cudaFreeHost(g.host), g.host = nullptr;
      CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&g.host), g.block.bytes()));
      pass.launch = true;
      g.block.begin_pass(g.host, g.params.data(), key);
      CUDA_CHECK(cudaStreamSynchronize(stream));
      capturing = true;
      cudaGraph_t graph = nullptr;
      CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
      gp = &pass;
      b = make_batch(items, bucket);
      node_marks.assign(1, {0, 0});
      try {
        d_logits = run(b, all_tokens, d_bad_row);
        node_marks.push_back(count_nodes());
      } catch (...) {
        gp = nullptr;
        cudaStreamEndCapture(stream, &graph);
        if (graph) cudaGraphDestroy(graph);
        throw;
      }
      gp = nullptr;
      CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
      if (!g.block.end_pass()) {  // a plan that depends on more than the bucket: not replayable
        cudaGraphDestroy(graph);
        DI_CHECK(false, "graph step: the capture pass planned another parameter layout than the sizing pass (",
                 g.block.step_bytes(), " + ", g.block.keyed_bytes(), " bytes)");
      }
      const cudaError_t inst = cudaGraphInstantiate(
          &g.exec, graph, branch_priority ? static_cast<unsigned long long>(cudaGraphInstantiateFlagUseNodePriority) : 0ull);
      cudaGraphDestroy(graph);
      CUDA_CHECK(inst);
      g.sig = pass.sig;
      g.timed = layer_timing;
      ++graph_stats.captures;
      // Per layer: the nodes between its marks (embedding first, head last).
      last_nodes = {};
      const size_t marks = node_marks.size();  // start, layers + 1 boundaries, end
      if (marks == size_t(cfg.num_hidden_layers) + 3) {
        auto add = [&](size_t a, size_t z) {
          last_nodes.nodes.push_back(node_marks[z].first - node_marks[a].first);
          last_nodes.kernels.push_back(node_marks[z].second - node_marks[a].second);
        };
        for (size_t l = 1; l + 2 < marks; ++l) add(l, l + 1);
        add(0, 1);
        add(marks - 2, marks - 1);
      }
    } else {
      g.block.begin_pass(g.host, g.params.data(), key);
      gp = &pass;
      b = make_batch(items, bucket);
      d_logits = run(b, all_tokens, d_bad_row);
      gp = nullptr;
      if (!g.block.end_pass() || pass.sig != g.sig) {  // never replay a plan the graph does not hold
        restore();
        ++graph_stats.fallbacks;
        return false;
      }
    }
  } catch (const std::exception&) {
    // The eager step reports a planning error itself (it plans the same way). A failed
    // capture or instantiation means graphs are not supported here: this bucket runs
    // eagerly from now on.
    gp = nullptr;
    cudaGetLastError();
    drain();
    restore();
    if (capturing) {
      g.failed = true;
      if (g.exec) cudaGraphExecDestroy(g.exec), g.exec = nullptr;
    }
    ++graph_stats.fallbacks;
    return false;
  }
  try {
    timing.graph = true;
    timing.plan = ms_since(t0);
    Clock::time_point t = Clock::now();
    // One copy: the step region, and the keyed lists after it when this pass wrote them.
    const size_t up = g.block.upload_bytes();
    if (up > 0) CUDA_CHECK(cudaMemcpyAsync(g.params.data(), g.host, up, cudaMemcpyHostToDevice, stream));
    g.block.commit();
    timing.param_bytes = int64_t(up);
    timing.upload = ms_since(t);
    t = Clock::now();
    CUDA_CHECK(cudaGraphLaunch(g.exec, stream));
    timing.launch = ms_since(t);
    ++graph_stats.replays;
    logits = finish(b, d_logits, int64_t(items.size()), d_bad_row);
  } catch (...) {
    drain();
    throw;
  }
  return true;
}

// ---------------------------------------------------------------------------
// MoE (§6): routed experts in ascending id order, then the shared expert.
// ---------------------------------------------------------------------------

// Device-routed: the router's ids and weights never leave the GPU (no stream sync, so
// the layer can be captured in a graph); moe_experts plans the permutation, runs one
// grouped launch per GEMM stage and combines each token's slots in ascending expert
// id, then adds the shared expert: the CPU model's order.
void CudaModel::Impl::moe(int64_t l, const float* x, int64_t n, float* out) {
  const ModelConfig& c = cfg;
  const DMoe& m = layers[l].ffn;
  const int64_t d = c.hidden_size, k = c.num_experts_per_tok;
  int64_t* d_ids = layer_arena->alloc<int64_t>(n * k);
  float* d_wts = layer_arena->alloc<float>(n * k);
  // Every size here follows n (and the mode): a graph step's allocations repeat.
  const bool go = launching();
  float* shared_out = layer_arena->alloc<float>(n * d);
  // The shared expert as swiglu_expert computes it (x -> w1, w3 -> SwiGLU -> w2), but
  // through linear() with the GEMM workspace, so under bf16 activations its large-batch
  // products run cuBLASLt like the attention's (and read the bf16 copies when made);
  // in f32 mode and below the GEMM threshold these are the same kernels as before.
  const int64_t inter = m.shared.w1.rows;
  float* sg = layer_arena->alloc<float>(n * inter);
  float* su = layer_arena->alloc<float>(n * inter);
  // Concurrent branches: the shared expert on the aux stream while the router, the plan
  // and the routed tiles run here; only the combine (which adds shared_out) waits for it.
  const bool branch = overlap_moe(n, m);
  if (branch && go) fork_to(aux);
  {
    std::optional<Branch> br;
    if (branch) br.emplace(*this, aux);
    linear2(x, n, sg, m.shared.w1, su, m.shared.w3);
    if (go) CUDA_CHECK(kernels::swiglu_act({sg, su, nullptr, n, inter, float(c.swiglu_limit)}, stream));
    linear(sg, shared_out, n, m.shared.w2);
    if (branch && go) CUDA_CHECK(cudaEventRecord(ev_join, stream));
  }
  void* ws = layer_arena->alloc<uint8_t>(int64_t(gpu::moe_experts_workspace_bytes(n, k, m.table, mode)));
  // The router (logits, then the top-k selection folded into the plan's launch at decode
  // sizes: moe_route_experts) after the shared expert (or beside it); ids and weights
  // stay on the device.
  if (go)
    gpu::moe_route_experts({x, n, m.gate, m.gate_bias, k, float(c.gate_temp), c.norm_topk_prob,
                            float(c.routed_scaling_factor), d_ids, d_wts},
                           {x, n, k, d_ids, d_wts, nullptr, c.n_routed_experts, float(c.swiglu_limit), shared_out,
                            out, ops::rounding_of(act)},
                           m.table, mode, stream, ws, branch ? ev_join : nullptr);
  if (go) {
    trace("moe_shared", l, shared_out, n * d * int64_t(sizeof(float)));
    trace("moe_ids", l, d_ids, n * k * int64_t(sizeof(int64_t)));
    trace("moe_weights", l, d_wts, n * k * int64_t(sizeof(float)));
  }
}

}  // namespace deepinfer::v41
