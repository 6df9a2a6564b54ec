// The CUDA model's internals (model_cuda.h's CudaModel::Impl and the device mirrors of
// the weights), shared by the files that implement it along the data path:
// model_cuda.cpp (load, the step, graphs, MoE) and attention_cuda.cpp (attention, the
// compressor, the indexer). Private to src/model/v41.
#pragma once

#include "model/v41/model_cuda.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "common/check.h"
#include "common/parallel.h"
#include "io/safetensors.h"
#include "kernels/cuda/smxx_attention.cuh"
#include "kernels/cuda/smxx_elementwise.cuh"
#include "kernels/cuda/smxx_hyper_connection.cuh"
#include "kernels/cuda/smxx_indexer.cuh"
#include "kernels/cuda/smxx_linear.cuh"
#include "kernels/cuda/smxx_model.cuh"
#include "kernels/cuda/smxx_moe.cuh"
#include "kernels/cuda/smxx_selection.cuh"
#include "model/v41/engram.h"
#include "model/v41/graph_params.h"
#include "model/v41/weights.h"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"
#include "ops/rope.h"
#include "runtime/cuda/device_memory.h"

namespace deepinfer::v41 {

namespace gpu = ops::cuda;
using runtime::cuda::DeviceArena;
using runtime::cuda::DeviceBuffer;
using runtime::cuda::HostStage;
using runtime::cuda::MappedHostBuffer;

// Device mirrors of weights.h: WeightRef fields point into device memory, vectors
// become device pointers.
struct DAttn {
  WeightRef wq_a, wq_b, wkv, wo_a, wo_b, compressor_wkv, compressor_wgate, indexer_wk, indexer_wq_b,
      indexer_weights_proj;
  const float *q_norm = nullptr, *kv_norm = nullptr, *attn_sink = nullptr, *compressor_norm = nullptr,
              *indexer_k_norm = nullptr;
};
struct DExpert {
  WeightRef w1, w3, w2;
};
struct DMoe {
  WeightRef gate;
  const float* gate_bias = nullptr;
  std::vector<DExpert> experts;
  DExpert shared;
  gpu::MoeExpertTable table;  // the routed experts' device pointer table (grouped kernels)
};
struct DHc {
  const float *fn = nullptr, *base = nullptr, *scale = nullptr;
};
struct DEngram {
  WeightRef table, wkv;
  const float* gate_weight = nullptr;
};
struct DLayer {
  const float *attn_norm = nullptr, *ffn_norm = nullptr;
  DHc hc_attn, hc_ffn;
  DAttn attn;
  DMoe ffn;
  bool has_engram = false;
  DEngram engram;
};

struct CudaModel::Impl {
  ModelConfig cfg;
  CudaModelOptions opts;
  CudaMemoryPlan plan;
  // The stream every launch goes to. Branch swaps it for the length of a concurrent
  // branch (below), so the helpers launch there unchanged.
  cudaStream_t stream = nullptr;

  // ---- concurrent branches (CudaModelOptions::overlap) ---------------------
  // At batch 1 every kernel of a layer is latency-bound and leaves most of the GPU idle,
  // so work that does not depend on the kernels before it runs beside them on its own
  // stream, forked from `stream` and joined back with events (a capture records the
  // fork / join as graph edges; no node). Two branches:
  //   - aux: the shared expert (w1 + w3, SwiGLU, w2) beside the router, the plan and the
  //     routed tiles; the combine, the one launch that reads its output, waits for it;
  //   - eng: every Engram layer's gather + wkv projection (they read only the token ids)
  //     from the start of the step, into step-arena buffers; each Engram gate waits;
  //   - aux, graph steps: the compressor path (reads only x) beside wq_a / wkv and the
  //     norms, then the indexer (after qr's norm) beside wq_b; pass 2 waits (attention()).
  // Branches that plan host lists upload them into the graph's parameter block; an eager
  // step's lists go through the pinned stage on `stream`, so its branches upload nothing.
  // Every kernel writes its own buffers and the combine / gate are the same launches in
  // the same order, so the logits are bitwise those of one stream (tests/model_cuda).
  // A branch's linears never touch the GEMM workspace (branch_linear_ok), the only
  // scratch the two streams could otherwise share; layer-arena buffers are disjoint and
  // every branch joins before the arena is rewound for the next layer.
  static constexpr int64_t kOverlapMaxRows = 256;
  bool overlap = false;  // any branch on
  // Which branches (all with overlap; DEEPINFER_OVERLAP's letters pick some, to measure one alone).
  bool overlap_moe_on = false, overlap_engram_on = false, overlap_attention_on = false;
  cudaStream_t aux = nullptr, eng = nullptr;
  cudaEvent_t ev_fork = nullptr, ev_join = nullptr;
  // The source layers' chain (source_chain_mode() 1 at load, NOTES 54; a model per setting):
  // the new compressed entry / index key rows written by their norm_rope_quant launch
  // (copy_to), no pending-row copy at ratio 1, and in graph steps with the attention branch
  // the indexer's weights projection (reads x, from the layer's start) and query (reads qr,
  // after its norm) on `aux2` beside the compressor on `aux`, which waits for them (ev_q)
  // before the score. Created at load with the branches.
  // The compressor's pending-row copy and the stored entry's norm_rope_quant (read by nothing
  // later in the chain) run on aux3 after the latent's norm (ev_lat); the main stream joins it
  // (ev_side) with aux.
  bool src_chain = false;
  cudaStream_t aux2 = nullptr, aux3 = nullptr;
  cudaEvent_t ev_q = nullptr, ev_lat = nullptr, ev_side = nullptr;
  // source_chain_mode() 2 (NOTES 59; implies src_chain): in a split index layer the main
  // stream's wq_b waits for the indexer's score (ev_score): neither the query's gemv_xs nor
  // the score fits on an SM beside wq_b's blocks (registers), so ordered query -> score ->
  // wq_b the query runs alone (~6.5 us, not ~20 behind wq_b) and wq_b beside the selection's
  // mask / top-k kernels, which fit on the SMs it leaves. And the step's bad-selection flag is
  // zeroed by the step start's memset (Batch::bad_selection_slot), not a memset node of its own.
  bool src_chain2 = false;
  cudaEvent_t ev_score = nullptr;
  std::vector<cudaEvent_t> ev_engram;  // one per Engram layer: its kv is ready
  // The one-launch hc site's deferred finish (kernels::hc_site_mode() 1, NOTES 51): after the
  // site, hc_mixes_finish on its own stream `hcs` (one warp's gates + Sinkhorn, off the path
  // of the gemv after the site); the main stream joins it (ev_hc_join) before the next reader
  // of pre / post / comb or the split sums (the next site, an hc_expand, the head's collapse).
  // Created at load (a stream cannot be made inside a capture).
  bool hc_site_defer = false;  // kernels::hc_site_mode() >= 1 at load (a model per setting)
  cudaStream_t hcs = nullptr;
  cudaEvent_t ev_hc_fork = nullptr, ev_hc_join = nullptr;
  // How the branches yield to the critical path (CudaModelOptions::branch_priority /
  // branch_bulk_per_sm after DEEPINFER_BRANCH_PRIO / DEEPINFER_BRANCH_BULK; NOTES 34).
  bool branch_priority = false;
  int branch_bulk_per_sm = 0;
  struct Branch {
    Impl& d;
    cudaStream_t saved;
    int saved_cap;
    // The branch's bulk gemvs keep at most branch_bulk_per_sm blocks per SM (this host
    // thread's launches only, for the length of the branch).
    Branch(Impl& impl, cudaStream_t side)
        : d(impl), saved(impl.stream), saved_cap(kernels::gemv_bulk_blocks_per_sm()) {
      d.stream = side;
      kernels::gemv_set_bulk_blocks_per_sm(d.branch_bulk_per_sm);
    }
    ~Branch() {
      d.stream = saved;
      kernels::gemv_set_bulk_blocks_per_sm(saved_cap);
    }
    Branch(const Branch&) = delete;
    Branch& operator=(const Branch&) = delete;
  };
  // `side` starts after everything issued to `stream` so far.
  void fork_to(cudaStream_t side) {
    CUDA_CHECK(cudaEventRecord(ev_fork, stream));
    CUDA_CHECK(cudaStreamWaitEvent(side, ev_fork, 0));
  }
  // A linear a branch may run: it leaves the GEMM workspace alone (and kFP8 x, whose
  // per-call codes come from it or from the allocator, stays on one stream).
  bool branch_linear_ok(int64_t n, const WeightRef& w) const {
    const ops::Activations a = ops::activations_for(act, w);
    if (a == ops::Activations::kFP8) return false;
    return !gpu::linear_may_use_workspace({nullptr, nullptr, n, w, 0, -1, a}, mode, gemm_ws);
  }
  bool overlap_rows(int64_t n) const { return overlap && n > 0 && n <= kOverlapMaxRows; }
  bool overlap_moe(int64_t n, const DMoe& m) const {
    return overlap_moe_on && overlap_rows(n) && branch_linear_ok(n, m.shared.w1) && branch_linear_ok(n, m.shared.w3) &&
           branch_linear_ok(n, m.shared.w2);
  }
  bool overlap_engram(int64_t n) const {
    if (!overlap_engram_on || !overlap_rows(n) || !engram) return false;
    for (const DLayer& g : layers)
      if (g.has_engram && !branch_linear_ok(n, g.engram.wkv)) return false;
    return true;
  }
  // After a failed step: every stream drained, so the arenas can be reused.
  void drain() {
    cudaStreamSynchronize(stream);
    if (aux) cudaStreamSynchronize(aux);
    if (eng) cudaStreamSynchronize(eng);
    if (hcs) cudaStreamSynchronize(hcs);
    if (aux2) cudaStreamSynchronize(aux2);
    if (aux3) cudaStreamSynchronize(aux3);
  }

  gpu::LinearMode mode = gpu::LinearMode::kAuto;
  ops::Activations act = ops::Activations::kF32;
  DeviceBuffer gemm_buf;        // bf16 mode: the cuBLASLt path's workspace (plan.gemm)
  gpu::LinearWorkspace gemm_ws;
  DeviceBuffer bf16_buf;        // the persistent bf16 weight copies (plan.bf16_weights)

  // The device weights the bf16 GEMM path dequantizes, in a fixed order (the copies'
  // layout): every linear() weight, the shared experts (moe() runs them through linear()).
  template <class F>
  void for_each_dense(F&& f) {
    f(head);
    for (DLayer& g : layers) {
      DAttn& a = g.attn;
      for (WeightRef* r : {&a.wq_a, &a.wq_b, &a.wkv, &a.wo_a, &a.wo_b, &a.compressor_wkv, &a.compressor_wgate,
                           &a.indexer_wk, &a.indexer_wq_b, &a.indexer_weights_proj, &g.ffn.shared.w1,
                           &g.ffn.shared.w3, &g.ffn.shared.w2})
        f(*r);
      if (g.has_engram) f(g.engram.wkv);
    }
  }

  DeviceBuffer weights_buf, slot_buf, history_buf, freq_buf;
  // The Engram tables: on the device (engram_dev) or in mapped pinned host memory.
  DeviceBuffer engram_dev;
  MappedHostBuffer engram_host;
  WeightRef embed, head;
  const float* norm = nullptr;
  std::vector<DLayer> layers;
  const float *main_inv_freq = nullptr, *compress_inv_freq = nullptr;
  std::unique_ptr<EngramHasher> engram;

  // State slots: host counters + device window rings [slots, layers, window, head_dim]
  // and compressor pending rows [slots, sources, {kv, gate}, max_ratio, head_dim].
  std::vector<StateSlot> slots;
  float* windows = nullptr;
  float* pending = nullptr;
  int64_t max_ratio = 1;
  // Paged history: per KV source, entries [blocks, epb, head_dim] and keys [blocks, epb, index_head_dim].
  struct Source {
    int64_t layer = 0, ratio = 1, epb = 0;
    float *entries = nullptr, *keys = nullptr;
  };
  std::vector<Source> sources;
  int64_t num_blocks = 0;

  std::unique_ptr<DeviceArena> step_arena, layer_arena;
  std::unique_ptr<HostStage> stage;

  // Diagnostic hook (DEEPINFER_TRACE_FNV=1): at eager steps, after a device sync, one stderr line
  // per named tensor with the FNV-1a of its bytes, so two runs that should agree bit for bit can be
  // diffed to the first tensor that does not (NOTES 61). Off by default; it syncs the device per
  // tensor, so it is for finding a divergence, never for timing. Graph steps print nothing (no sync
  // can sit in a capture); their logits are hashed by the caller.
  bool trace_fnv = false;
  int64_t trace_step = 0;  // eager steps traced so far (the lines' step=)
  void trace(const char* what, int64_t layer, const void* p, int64_t bytes) {
    if (!trace_fnv || gp != nullptr || p == nullptr || bytes <= 0) return;
    CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<unsigned char> host(static_cast<size_t>(bytes));
    CUDA_CHECK(cudaMemcpy(host.data(), p, size_t(bytes), cudaMemcpyDeviceToHost));
    trace_host(what, layer, host.data(), bytes);
  }
  void trace_host(const char* what, int64_t layer, const void* p, int64_t bytes) const {
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < bytes; ++i) h = (h ^ static_cast<const unsigned char*>(p)[i]) * 1099511628211ull;
    std::fprintf(stderr, "trace_fnv step=%lld layer=%lld %s bytes=%lld fnv=%016llx\n", (long long)trace_step,
                 (long long)layer, what, (long long)bytes, (unsigned long long)h);
  }

  // Benchmark hook (set_layer_timing): one event per layer start plus one at the end.
  // In a capture pass the records become event nodes of the graph (external events),
  // so a replay times its layers like an eager step; a plan pass records nothing.
  bool layer_timing = false;
  std::vector<cudaEvent_t> layer_events;
  std::vector<float> layer_ms;
  // Event i of the step: layer i's start for i < layers, the end of the last layer at
  // i == layers, the end of the head at layers + 1.
  void timing_event(int64_t i) {
    if (!layer_timing || !launching()) return;
    while (int64_t(layer_events.size()) <= i) {
      cudaEvent_t e;
      CUDA_CHECK(cudaEventCreate(&e));
      layer_events.push_back(e);
    }
    if (gp != nullptr) CUDA_CHECK(cudaEventRecordWithFlags(layer_events[i], stream, cudaEventRecordExternal));
    else CUDA_CHECK(cudaEventRecord(layer_events[i], stream));
  }
  void mark_layer(int64_t l) {
    if (gp != nullptr && gp->launch) node_marks.push_back(count_nodes());
    timing_event(l);
  }
  // Host phases of the last forward (CudaModel::StepTiming), and the two events around
  // the logits download (recorded with layer timing on, outside any graph).
  using Clock = std::chrono::steady_clock;
  static double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }
  CudaModel::StepTiming timing;
  cudaEvent_t download_events[2] = {nullptr, nullptr};
  // The logits' host side: pinned (grown to the largest step up to kPinnedLogits), or
  // a pageable vector above that (a long prefill's every-position logits); two pinned
  // ints receive the step's device-side error flags with the same sync.
  static constexpr size_t kPinnedLogits = size_t(256) << 20;
  float* pinned_logits = nullptr;
  size_t pinned_logits_bytes = 0;
  std::vector<float> pageable_logits;
  int* pinned_flags = nullptr;
  // Launch count of a decode step (benchmark): the capture's node count at each layer
  // boundary, as {nodes less event records, kernel nodes}.
  std::vector<std::pair<int64_t, int64_t>> node_marks;
  CudaModel::GraphNodes last_nodes;
  std::pair<int64_t, int64_t> count_nodes() const {
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamGetCaptureInfo(stream, &st, nullptr, &graph));
    if (st != cudaStreamCaptureStatusActive || graph == nullptr) return {0, 0};
    size_t num = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &num));
    std::vector<cudaGraphNode_t> nodes(num);
    if (num > 0) CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &num));
    int64_t all = 0, kern = 0;
    for (cudaGraphNode_t nd : nodes) {
      cudaGraphNodeType t;
      CUDA_CHECK(cudaGraphNodeGetType(nd, &t));
      if (t == cudaGraphNodeTypeEventRecord) continue;
      ++all;
      if (t == cudaGraphNodeTypeKernel) ++kern;
    }
    return {all, kern};
  }

  ~Impl() {
    for (auto& [bucket, g] : graphs) {
      if (g.exec) cudaGraphExecDestroy(g.exec);
      if (g.host) cudaFreeHost(g.host);
    }
    for (cudaEvent_t e : layer_events) cudaEventDestroy(e);
    for (cudaEvent_t e : download_events)
      if (e) cudaEventDestroy(e);
    if (pinned_logits) cudaFreeHost(pinned_logits);
    if (pinned_flags) cudaFreeHost(pinned_flags);
    for (cudaEvent_t e : ev_engram) cudaEventDestroy(e);
    for (cudaEvent_t e : {ev_fork, ev_join, ev_hc_fork, ev_hc_join, ev_q, ev_lat, ev_side, ev_score})
      if (e) cudaEventDestroy(e);
    for (cudaStream_t s : {aux, eng, hcs, aux2, aux3})
      if (s) cudaStreamDestroy(s);
    if (stream) cudaStreamDestroy(stream);
  }

  // ---- decode graphs (forward_graph) -----------------------------------------
  // One pass of a graph step over the forward's code. The capture pass records the
  // launches (stream capture); a plan pass launches nothing and only recomputes, on
  // the host, what the captured kernels read: every upload lands in the parameter
  // block at the offset it had at capture (lists padded to fixed capacities), and
  // every arena allocation repeats at the same address (same sizes, same order).
  struct GraphPass {
    int64_t rows = 0;              // the bucket: the batch padded to it
    bool launch = false;           // capture pass
    GraphParamBlock* pb = nullptr; // the parameter block (sizing or writing)
    uint64_t sig = 0;              // arena marks along the pass (checked against the capture's)
  };
  GraphPass* gp = nullptr;
  bool launching() const { return gp == nullptr || gp->launch; }
  void sign(const DeviceArena& a) {
    if (gp == nullptr) return;
    const DeviceArena::Mark m = a.mark();
    gp->sig = (gp->sig * 1000003u) ^ (uint64_t(m.chunk) << 48) ^ uint64_t(m.offset);
  }
  struct DecodeGraph {
    cudaGraphExec_t exec = nullptr;
    GraphParamBlock block;    // layout and keyed-list bookkeeping of the parameter block
    DeviceBuffer params;      // its device copy
    uint8_t* host = nullptr;  // its host image (pinned)
    uint64_t sig = 0;
    bool failed = false;  // capture unsupported: this bucket always runs eagerly
    bool timed = false;   // captured with the layer-timing event records
  };
  std::map<int64_t, DecodeGraph> graphs;
  CudaModel::GraphStats graph_stats;
  int64_t max_context = 0, table_width = 0;
  // Padding rows of the graph's fixed-length row-copy lists read zero_row and write
  // dump_row (no state is touched); pad_dim floats each.
  DeviceBuffer pad_buf;
  const float* zero_row = nullptr;
  float* dump_row = nullptr;
  int64_t pad_dim = 0;

  // ---- helpers -------------------------------------------------------------
  // Host data for the device. Eager: through the pinned stage into `arena`. In a graph
  // pass: into the parameter block, padded with `pad` to `cap` elements, the capacity
  // that makes the block's layout the same at every step of the bucket.
  template <class T>
  T* upload(const std::vector<T>& v, DeviceArena& arena, int64_t cap = -1, std::type_identity_t<T> pad = T()) {
    if (gp != nullptr) {
      DI_CHECK(cap >= 0, "graph step: a list without a capacity");
      return gp->pb->put(GraphParamBlock::Region::kStep, v, size_t(cap), pad);
    }
    T* d = arena.alloc<T>(int64_t(v.size()));
    if (v.empty()) return d;
    void* h = stage->alloc_bytes(v.size() * sizeof(T));
    std::memcpy(h, v.data(), v.size() * sizeof(T));
    CUDA_CHECK(cudaMemcpyAsync(d, h, v.size() * sizeof(T), cudaMemcpyHostToDevice, stream));
    return d;
  }
  // Row copies from host-built pointer lists (one launch). In a graph pass the lists
  // have `cap` rows, the padding copying zero_row to dump_row.
  void copy_rows(const std::vector<const float*>& src, const std::vector<float*>& dst, int64_t dim, int64_t cap = -1) {
    DI_CHECK(src.size() == dst.size(), "copy_rows: list sizes differ");
    const int64_t count = gp != nullptr ? cap : int64_t(src.size());
    if (count <= 0) return;
    DI_CHECK(gp == nullptr || dim <= pad_dim, "graph step: row copies of ", dim, " floats exceed the padding rows");
    auto* s = upload(src, *layer_arena, cap, zero_row);
    auto* d = upload(dst, *layer_arena, cap, dump_row);
    if (launching()) CUDA_CHECK(kernels::copy_rows({s, d, count, dim}, stream));
  }
  // Row copies whose lists depend only on the slot each row holds (see graph_params.h):
  // `build` fills them; a graph pass whose parameter block already holds them for this
  // batch's slots skips it. Eager: copy_rows.
  template <class Build>
  void copy_rows_keyed(Build&& build, int64_t dim, int64_t cap) {
    std::vector<const float*> src;
    std::vector<float*> dst;
    if (gp == nullptr) {
      build(src, dst);
      copy_rows(src, dst, dim);
      return;
    }
    if (cap <= 0) return;
    DI_CHECK(dim <= pad_dim, "graph step: row copies of ", dim, " floats exceed the padding rows");
    if (gp->pb->keyed_needed()) {
      src.reserve(size_t(cap));
      dst.reserve(size_t(cap));
      build(src, dst);
      DI_CHECK(src.size() == dst.size(), "copy_rows: list sizes differ");
    }
    auto* s = gp->pb->put(GraphParamBlock::Region::kKeyed, src, size_t(cap), zero_row);
    auto* d = gp->pb->put(GraphParamBlock::Region::kKeyed, dst, size_t(cap), dump_row);
    if (launching() && cap > 0) CUDA_CHECK(kernels::copy_rows({s, d, cap, dim}, stream));
  }
  void d2d(float* dst, const float* src, int64_t count) {
    if (count > 0 && launching())
      CUDA_CHECK(cudaMemcpyAsync(dst, src, sizeof(float) * size_t(count), cudaMemcpyDeviceToDevice, stream));
  }
  void linear(const float* x, float* y, int64_t n, const WeightRef& w, int64_t row0 = 0, int64_t rows = -1) {
    if (launching()) gpu::linear({x, y, n, w, row0, rows, ops::activations_for(act, w)}, mode, stream, gemm_ws);
  }
  // Two projections of the same x: one gemv launch at decode sizes (gpu::linear_multi;
  // each output bitwise its own linear(), but for the one-token pairs on the tensor-map
  // kernel, NOTES 47), else the two linears.
  void linear2(const float* x, int64_t n, float* y1, const WeightRef& w1, float* y2, const WeightRef& w2) {
    if (!launching()) return;
    const ops::LinearParams ps[2] = {{x, y1, n, w1, 0, -1, ops::activations_for(act, w1)},
                                     {x, y2, n, w2, 0, -1, ops::activations_for(act, w2)}};
    gpu::linear_multi(ps, 2, mode, stream, gemm_ws);
  }
  // kernels::norm_rope_quant on `rows` single-head rows (see smxx_elementwise.cuh).
  // The arguments norm_rope_quant launches with; the fused q / kv norm launch
  // (attention_cuda.cpp) starts from them too.
  kernels::NormRopeQuantArgs nrq_args(const float* x, float* y, int64_t rows, int64_t dim, bool norm,
                                      const float* weight, const int64_t* positions, const float* inv_freq,
                                      int64_t rope_dim, float factor, int block, kernels::QuantKind kind,
                                      int64_t heads = 1) const {
    kernels::NormRopeQuantArgs a;
    a.x = x;
    a.y = y;
    a.n = rows;
    a.dim = dim;
    a.norm = norm;
    a.weight = weight;
    a.eps = float(cfg.rms_norm_eps);
    a.positions = positions;
    a.heads = heads;
    a.inv_freq = inv_freq;
    a.rope_dim = rope_dim;
    a.attention_factor = factor;
    a.quant_block = block;
    a.kind = kind;
    return a;
  }
  void norm_rope_quant(const float* x, float* y, int64_t rows, int64_t dim, bool norm, const float* weight,
                       const int64_t* positions, const float* inv_freq, int64_t rope_dim, float factor, int block,
                       kernels::QuantKind kind, int64_t heads = 1) {
    if (!launching() || rows == 0) return;
    CUDA_CHECK(kernels::norm_rope_quant(
        nrq_args(x, y, rows, dim, norm, weight, positions, inv_freq, rope_dim, factor, block, kind, heads), stream));
  }
  float* window(int64_t slot, int64_t layer) const {
    return windows + (slot * cfg.num_hidden_layers + layer) * cfg.sliding_window * cfg.head_dim;
  }
  float* pending_rows(int64_t slot, int64_t source, bool gate) const {
    const int64_t s = int64_t(sources.size());
    return pending + ((slot * s + source) * 2 + (gate ? 1 : 0)) * max_ratio * cfg.head_dim;
  }
  int64_t source_index(int64_t layer) const {
    for (size_t i = 0; i < sources.size(); ++i)
      if (sources[i].layer == layer) return int64_t(i);
    DI_CHECK(false, "layer ", layer, " is not a KV source");
    return -1;
  }

  // ---- the batch -----------------------------------------------------------
  struct Shared {
    int64_t compress_source = -1, index_source = -1;
    // The published selection, on the device: the buffer of the index layer that made
    // it, counts [n] then ids [n, index_topk] over the step's tokens (step arena).
    const int64_t* d_selection = nullptr;
    // The item's level-1 candidate masks in Batch::candidates: [count, cand_keys] from
    // cand_begin (-1: none published).
    int64_t cand_begin = -1, cand_keys = 0;
  };
  struct Batch {
    std::vector<CudaBatchItem>* items = nullptr;
    std::vector<int64_t> begin, positions;
    const int64_t* d_positions = nullptr;
    std::vector<Shared> shared;
    int64_t n = 0;  // rows: the tokens, or in a graph step the bucket (rows >= begin.back() are padding)
    // Every item's block table, concatenated, on the device (uploaded once per step,
    // by the first index layer): the batched indexer reads keys in place through them.
    const int64_t* d_tables = nullptr;
    bool tables_ready = false;  // (a graph's sizing pass has d_tables null)
    std::vector<int64_t> table_begin;
    uint8_t* candidates = nullptr;  // level-1 masks of the candidate source (step arena, ragged)
    int* d_bad_selection = nullptr;  // set by build_selection_lists on an id outside the history
    // src_chain2: the flag's int in the step start's memset (run()); the first sparse layer
    // takes it as d_bad_selection instead of a memset of its own.
    int* bad_selection_slot = nullptr;
    // What the config decides for the whole step (a graph step's launches follow these,
    // never the per-item state): the latest KV source, and whether an index layer ran.
    int64_t compress_source = -1;
    bool selection_made = false;
    int64_t count(size_t i) const { return begin[i + 1] - begin[i]; }
  };
  StateSlot& slot_of(const Batch& b, size_t i) { return slots[(*b.items)[i].slot]; }
  float* entry(const Batch& b, size_t i, int64_t layer, int64_t ratio, int64_t e, bool key) {
    const int64_t pos = e * ratio, bs = opts.block_size;
    const auto& table = *(*b.items)[i].block_table;
    DI_CHECK(pos / bs < int64_t(table.size()), "block table does not cover position ", pos);
    const Source& s = sources[source_index(layer)];
    const int64_t block = table[pos / bs], off = (pos % bs) / ratio;
    DI_CHECK(block >= 0 && block < num_blocks, "block ", block, " is outside the history pool");
    const int64_t row = block * s.epb + off;
    return key ? s.keys + row * cfg.index_head_dim : s.entries + row * cfg.head_dim;
  }

  LogitsView forward(std::vector<CudaBatchItem>& items);
  Batch make_batch(std::vector<CudaBatchItem>& items, int64_t rows) const;
  float* run(Batch& b, const std::vector<int64_t>& all_tokens, int*& d_bad_row);
  LogitsView finish(const Batch& b, const float* d_logits, int64_t rows, const int* d_bad_row);
  float* logits_buffer(size_t count);
  int64_t graph_bucket(const std::vector<CudaBatchItem>& items) const;
  bool forward_graph(std::vector<CudaBatchItem>& items, const std::vector<int64_t>& all_tokens, int64_t bucket,
                     LogitsView& logits);
  void attention(Batch& b, int64_t l, const float* x, float* out);
  // The compressor's copy of the rows left pending, when deferred (defer set: NOTES 54's side
  // stream issues it after the latent's norm; it must follow the gather, which reads the old ones).
  struct PendingCopy {
    std::vector<const float*> src;
    std::vector<float*> dst;
    int64_t count = 0;  // copy_rows' cap (a graph step's fixed list length)
  };
  void compressor(Batch& b, int64_t l, const float* x, float*& latent, std::vector<int64_t>& group_pos,
                  std::vector<size_t>& group_item, PendingCopy* defer = nullptr);
  void upload_tables(Batch& b);
  void indexer(Batch& b, int64_t l, const float* x, const float* qr);
  // indexer() in parts (attention_cuda.cpp): the host plan (row info, buffers; inactive when
  // no row has keys), the query (reads qr), the heads' weights (reads x), then the score and
  // the selection, which read both. A graph step with the source chain mode runs the first
  // two on the aux2 stream beside the compressor (NOTES 54).
  struct IndexerRun {
    bool active = false;
    int64_t layer = -1, n = 0, total = 0, max_keys = 0;
    const Source* src = nullptr;
    bool is_candidate_source = false, uses_candidates = false;
    std::vector<bool> active_items;
    const int64_t* d_info = nullptr;
    float *qi = nullptr, *w = nullptr, *scores = nullptr;
  };
  IndexerRun indexer_plan(Batch& b, int64_t l);
  void indexer_query(const IndexerRun& r, const Batch& b, const float* qr);
  void indexer_weights(const IndexerRun& r, const float* x);
  // after_score: recorded on the stream after the score launch (src_chain2's wq_b waits for it).
  void indexer_select(const IndexerRun& r, Batch& b, int64_t l, cudaEvent_t after_score = nullptr);
  void moe(int64_t l, const float* x, int64_t n, float* out);
};

}  // namespace deepinfer::v41
