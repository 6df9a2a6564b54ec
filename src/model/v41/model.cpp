// The V4.1 forward pass on the CPU backend, following MODEL_V41.md §2-§7 and the
// transformers reference operation by operation. All arithmetic is fp32 with the
// model's own quantization-aware rounding (FP8 window KV, FP4 compressed KV and
// indexer operands); matrix products accumulate in double.
#include "model/v41/model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "common/check.h"
#include "ops/attention.h"
#include "ops/hyper_connection.h"
#include "ops/indexer.h"
#include "ops/linear.h"
#include "ops/moe.h"
#include "ops/norm.h"
#include "ops/quant.h"
#include "ops/rope.h"

namespace deepinfer::v41 {

namespace cpu = ops::cpu;

// What source layers publish to the layers after them within one forward call
// (the reference's per-forward `shared` dict). Pointers refer into the sequence's
// state, so they see entries appended during this call.
struct Model::Shared {
  const LayerState* compress_source = nullptr;  // whose compressed KV the group attends
  const LayerState* index_source = nullptr;     // whose indexer keys the group scores
  bool has_selection = false;
  ops::Selection selection;          // per-query compressed entries (top-k)
  std::vector<uint8_t> candidates;   // level-1 mask [n, num_keys], empty if none
};

struct Model::Batch {
  int64_t n = 0;
  std::vector<int64_t> positions;
};

std::unique_ptr<Model> Model::load(const std::string& dir) {
  namespace fs = std::filesystem;
  DI_CHECK_INPUT(fs::is_directory(dir), "model directory '", dir, "' does not exist");
  auto m = std::unique_ptr<Model>(new Model());
  m->cfg_ = load_model_config((fs::path(dir) / "config.json").string());
  // The configuration format admits other router functions; this model only has
  // the one V4.1 ships.
  DI_CHECK_INPUT(m->cfg_.scoring_func == "sqrtsoftplus", dir, "/config.json: scoring_func '", m->cfg_.scoring_func,
                 "' is not supported by the V4.1 model (only sqrtsoftplus)");
  m->ckpt_ = Checkpoint::open(dir);
  m->w_ = bind_weights(m->cfg_, *m->ckpt_);
  m->main_inv_freq_ = ops::rope_inv_freq(m->cfg_.main_rope, m->cfg_.qk_rope_head_dim);
  m->compress_inv_freq_ = ops::rope_inv_freq(m->cfg_.compress_rope, m->cfg_.qk_rope_head_dim);
  if (!m->cfg_.engram_layer_ids.empty()) {
    const std::string tok = (fs::path(dir) / "tokenizer.json").string();
    DI_CHECK_INPUT(fs::exists(tok), "model directory '", dir,
                   "' has Engram layers but no tokenizer.json (the n-gram hash is built from it)");
    m->engram_ = EngramHasher::create(m->cfg_, tok);
  }
  return m;
}

SequenceState Model::new_sequence() const {
  SequenceState s;
  s.layers.resize(cfg_.num_hidden_layers);
  for (auto& l : s.layers) l.window.assign(cfg_.sliding_window * cfg_.head_dim, 0.0f);
  return s;
}

std::vector<float> Model::forward(SequenceState& seq, const std::vector<int64_t>& tokens) const {
  const ModelConfig& c = cfg_;
  const int64_t n = int64_t(tokens.size()), d = c.hidden_size, hc = c.hc_mult;
  DI_CHECK_INPUT(n > 0, "forward: no tokens");
  for (int64_t t : tokens)
    DI_CHECK_INPUT(t >= 0 && t < c.vocab_size, "token id ", t, " is out of range [0, ", c.vocab_size, ")");
  DI_CHECK(int64_t(seq.layers.size()) == c.num_hidden_layers, "sequence state belongs to another model");
  Batch b;
  b.n = n;
  for (int64_t i = 0; i < n; ++i) b.positions.push_back(seq.num_tokens + i);

  // Residual state: hc identical copies of the embedding.
  std::vector<float> h(n * hc * d);
  for (int64_t t = 0; t < n; ++t) {
    ops::dequant_row(w_.embed, tokens[t], h.data() + t * hc * d);
    for (int64_t k = 1; k < hc; ++k) std::copy_n(h.data() + t * hc * d, d, h.data() + (t * hc + k) * d);
  }
  std::vector<int64_t> engram_rows;
  if (engram_) engram_rows = engram_->hash(tokens, seq.num_tokens, seq.recent_ngram_ids);

  // The collapse weights of a site are consumed by the next site (§2.5); the first
  // site collapses stream 0.
  std::vector<float> pre_mix(n * hc, 0.0f), a_pre(n * hc), post(n * hc), comb(n * hc * hc);
  for (int64_t t = 0; t < n; ++t) pre_mix[t * hc] = 1.0f;
  std::vector<float> x(n * d), y(n * d);
  Shared shared;
  const float eps = float(c.rms_norm_eps);
  auto mixes = [&](const HcSiteWeights& s, float* pre_out) {
    cpu::hc_mixes({h.data(), n, hc, d, s.fn.data(), s.base.data(), s.scale.data(), eps, float(c.hc_eps),
                   c.hc_sinkhorn_iters, pre_out, post.data(), comb.data()});
  };
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = w_.layers[l];
    if (lw.has_engram) {
      size_t idx = 0;
      while (c.engram_layer_ids[idx] != l) ++idx;
      const int64_t cols = engram_->num_columns();
      const int64_t stride = int64_t(c.engram_layer_ids.size()) * cols;
      apply_engram(c, lw.engram, engram_rows.data() + idx * cols, stride, n, h.data());
    }
    mixes(lw.hc_attn, a_pre.data());
    cpu::hc_collapse({h.data(), pre_mix.data(), x.data(), n, hc, d});
    cpu::rms_norm({x.data(), x.data(), n, d, lw.attn_norm.data(), eps});
    attention(b, l, x.data(), seq, shared, y.data());
    cpu::hc_expand({h.data(), y.data(), post.data(), comb.data(), n, hc, d});

    mixes(lw.hc_ffn, pre_mix.data());  // f_pre becomes the next site's collapse weights
    cpu::hc_collapse({h.data(), a_pre.data(), x.data(), n, hc, d});
    cpu::rms_norm({x.data(), x.data(), n, d, lw.ffn_norm.data(), eps});
    moe(l, x.data(), n, y.data());
    cpu::hc_expand({h.data(), y.data(), post.data(), comb.data(), n, hc, d});
  }
  cpu::hc_collapse({h.data(), pre_mix.data(), x.data(), n, hc, d});
  cpu::rms_norm({x.data(), x.data(), n, d, w_.norm.data(), eps});
  std::vector<float> logits(n * c.vocab_size);
  cpu::linear({x.data(), logits.data(), n, w_.head});
  seq.num_tokens += n;
  return logits;
}

// ---------------------------------------------------------------------------
// Attention (§3) with the compressed branch (§4).
// ---------------------------------------------------------------------------

void Model::attention(const Batch& b, int64_t l, const float* x, SequenceState& seq, Shared& shared,
                      float* out) const {
  const ModelConfig& c = cfg_;
  const AttentionWeights& a = w_.layers[l].attn;
  const int64_t n = b.n, hd = c.head_dim, heads = c.num_attention_heads, rd = c.qk_rope_head_dim;
  const int64_t ratio = c.compress_ratios[l], win = c.sliding_window;
  const std::vector<float>& inv_freq = ratio > 0 ? compress_inv_freq_ : main_inv_freq_;
  const float af = float(c.rope_for(l).attention_factor), caf = float(c.compress_rope.attention_factor);
  LayerState& st = seq.layers[l];

  std::vector<float> qr(n * c.q_lora_rank), q(n * heads * hd), kv(n * hd);
  cpu::linear({x, qr.data(), n, a.wq_a});
  cpu::rms_norm({qr.data(), qr.data(), n, c.q_lora_rank, a.q_norm.data(), float(c.rms_norm_eps)});
  cpu::linear({qr.data(), q.data(), n, a.wq_b});
  cpu::rope({q.data(), n, heads, hd, rd, b.positions.data(), inv_freq.data(), false, af});
  cpu::linear({x, kv.data(), n, a.wkv});
  cpu::rms_norm({kv.data(), kv.data(), n, hd, a.kv_norm.data(), float(c.rms_norm_eps)});
  cpu::rope({kv.data(), n, 1, hd, rd, b.positions.data(), inv_freq.data(), false, af});
  cpu::fake_quant_fp8({kv.data(), n, hd, 32});

  if (ratio > 0) {
    std::vector<float> latent;
    int64_t num_groups = 0, first_pos = 0;
    if (c.is_kv_source(l)) compressor(b, l, x, st, latent, num_groups, first_pos);
    // The indexer reads the pre-RoPE latent, so it runs before the latent is
    // rotated into the compressed cache.
    if (c.is_index_source(l)) indexer(b, l, x, qr.data(), latent, num_groups, first_pos, st, shared);
    if (num_groups > 0) {
      std::vector<int64_t> pos(num_groups);
      for (int64_t g = 0; g < num_groups; ++g) pos[g] = first_pos + ratio * g;
      cpu::rope({latent.data(), num_groups, 1, hd, rd, pos.data(), compress_inv_freq_.data(), false, caf});
      cpu::fake_quant_fp4({latent.data(), num_groups, hd, 16}, ops::Fp4Scale::kE4m3);
      st.compressed.insert(st.compressed.end(), latent.begin(), latent.end());
      st.num_entries += num_groups;
    }
    if (c.is_kv_source(l)) shared.compress_source = &st;
  }

  // KV pool: [old window entries (ring) | new entries | compressed entries].
  const int64_t p0 = b.positions[0];
  const int64_t ring_base = 0, new_base = win, comp_base = win + n;
  const LayerState* src = ratio > 0 ? shared.compress_source : nullptr;
  const int64_t num_comp = (src && shared.has_selection) ? src->num_entries : 0;
  std::vector<float> pool((comp_base + num_comp) * hd);
  std::copy(st.window.begin(), st.window.end(), pool.begin());
  std::copy(kv.begin(), kv.end(), pool.begin() + new_base * hd);
  if (num_comp > 0) std::copy_n(src->compressed.data(), num_comp * hd, pool.begin() + comp_base * hd);

  std::vector<int64_t> offsets{0}, ids;
  for (int64_t t = 0; t < n; ++t) {
    const int64_t p = b.positions[t];
    // Window: positions max(0, p - win + 1) .. p inclusive.
    for (int64_t s = std::max<int64_t>(0, p - win + 1); s <= p; ++s)
      ids.push_back(s < p0 ? ring_base + s % win : new_base + (s - p0));
    if (num_comp > 0) {
      const auto& sel = shared.selection;
      for (int64_t j = sel.offsets[t]; j < sel.offsets[t + 1]; ++j) ids.push_back(comp_base + sel.ids[j]);
    }
    offsets.push_back(int64_t(ids.size()));
  }
  std::vector<float> o(n * heads * hd);
  cpu::sink_attention({q.data(), pool.data(), offsets.data(), ids.data(), a.attn_sink.data(),
                       1.0f / std::sqrt(float(hd)), o.data(), n, heads, hd});
  for (int64_t t = 0; t < n; ++t) {
    const int64_t p = b.positions[t];
    std::copy_n(kv.data() + t * hd, hd, st.window.begin() + (p % win) * hd);
  }
  // The values carried RoPE; rotate the output back by the query position.
  cpu::rope({o.data(), n, heads, hd, rd, b.positions.data(), inv_freq.data(), /*inverse=*/true, af});

  // Grouped low-rank output: group g (heads g*H/G ..) through its own wo_a block.
  const int64_t groups = c.o_groups, group_in = heads * hd / groups, rank = c.o_lora_rank;
  std::vector<float> z(n * groups * rank), xg(n * group_in), zg(n * rank);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t t = 0; t < n; ++t) std::copy_n(o.data() + t * heads * hd + g * group_in, group_in, xg.data() + t * group_in);
    cpu::linear({xg.data(), zg.data(), n, a.wo_a, /*row0=*/g * rank, /*num_rows=*/rank});
    for (int64_t t = 0; t < n; ++t) std::copy_n(zg.data() + t * rank, rank, z.data() + (t * groups + g) * rank);
  }
  cpu::linear({z.data(), out, n, a.wo_b});
}

void Model::compressor(const Batch& b, int64_t l, const float* x, LayerState& st, std::vector<float>& latent,
                       int64_t& num_groups, int64_t& first_group_position) const {
  const ModelConfig& c = cfg_;
  const AttentionWeights& a = w_.layers[l].attn;
  const int64_t n = b.n, hd = c.head_dim, ratio = c.compress_ratios[l];
  const float eps = float(c.rms_norm_eps);
  if (ratio == 1) {
    latent.resize(n * hd);
    cpu::linear({x, latent.data(), n, a.compressor_wkv});
    cpu::rms_norm({latent.data(), latent.data(), n, hd, a.compressor_norm.data(), eps});
    num_groups = n;
    first_group_position = st.num_entries;
    return;
  }
  // Ratio > 1: softmax-gated pooling of `ratio` consecutive tokens, per channel.
  std::vector<float> kvp(n * hd), gate(n * hd);
  cpu::linear({x, kvp.data(), n, a.compressor_wkv});
  cpu::linear({x, gate.data(), n, a.compressor_wgate});
  st.pending_kv.insert(st.pending_kv.end(), kvp.begin(), kvp.end());
  st.pending_gate.insert(st.pending_gate.end(), gate.begin(), gate.end());
  st.num_pending += n;
  first_group_position = st.num_entries * ratio;
  num_groups = st.num_pending / ratio;
  latent.assign(num_groups * hd, 0.0f);
  for (int64_t g = 0; g < num_groups; ++g) {
    for (int64_t ch = 0; ch < hd; ++ch) {
      float mx = -INFINITY;
      for (int64_t i = 0; i < ratio; ++i) mx = std::max(mx, st.pending_gate[(g * ratio + i) * hd + ch]);
      float denom = 0.0f;
      for (int64_t i = 0; i < ratio; ++i) denom += std::exp(st.pending_gate[(g * ratio + i) * hd + ch] - mx);
      float acc = 0.0f;
      for (int64_t i = 0; i < ratio; ++i) {
        float wgt = std::exp(st.pending_gate[(g * ratio + i) * hd + ch] - mx) / denom;
        acc += st.pending_kv[(g * ratio + i) * hd + ch] * wgt;
      }
      latent[g * hd + ch] = acc;
    }
  }
  const int64_t used = num_groups * ratio;
  st.pending_kv.erase(st.pending_kv.begin(), st.pending_kv.begin() + used * hd);
  st.pending_gate.erase(st.pending_gate.begin(), st.pending_gate.begin() + used * hd);
  st.num_pending -= used;
  if (num_groups > 0) cpu::rms_norm({latent.data(), latent.data(), num_groups, hd, a.compressor_norm.data(), eps});
}

void Model::indexer(const Batch& b, int64_t l, const float* x, const float* qr, const std::vector<float>& latent,
                    int64_t num_groups, int64_t first_pos, LayerState& st, Shared& shared) const {
  const ModelConfig& c = cfg_;
  const AttentionWeights& a = w_.layers[l].attn;
  const int64_t n = b.n, ihd = c.index_head_dim, ih = c.index_n_heads, ratio = c.compress_ratios[l];
  if (c.is_kv_source(l)) {
    // Keys come from the pre-RoPE latent, rotated to the group's first position.
    if (num_groups > 0) {
      std::vector<float> k(num_groups * ihd);
      cpu::linear({latent.data(), k.data(), num_groups, a.indexer_wk});
      cpu::rms_norm({k.data(), k.data(), num_groups, ihd, a.indexer_k_norm.data(), float(c.rms_norm_eps)});
      std::vector<int64_t> pos(num_groups);
      for (int64_t g = 0; g < num_groups; ++g) pos[g] = first_pos + ratio * g;
      cpu::rope({k.data(), num_groups, 1, ihd, c.qk_rope_head_dim, pos.data(), compress_inv_freq_.data(), false,
                 float(c.compress_rope.attention_factor)});
      cpu::fake_quant_fp4({k.data(), num_groups, ihd, 32}, ops::Fp4Scale::kUe8m0);
      st.index_keys.insert(st.index_keys.end(), k.begin(), k.end());
      st.num_index_keys += num_groups;
    }
    shared.index_source = &st;
  }
  const LayerState* keys = shared.index_source;
  const int64_t num_keys = keys ? keys->num_index_keys : 0;
  if (num_keys == 0) return;  // nothing to select yet; an earlier selection stays published

  std::vector<float> qi(n * ih * ihd), w(n * ih), scores(n * num_keys);
  cpu::linear({qr, qi.data(), n, a.indexer_wq_b});
  cpu::rope({qi.data(), n, ih, ihd, c.qk_rope_head_dim, b.positions.data(), compress_inv_freq_.data(), false,
             float(c.compress_rope.attention_factor)});
  cpu::fake_quant_fp4({qi.data(), n * ih, ihd, 32}, ops::Fp4Scale::kUe8m0);
  cpu::linear({x, w.data(), n, a.indexer_weights_proj});
  const float head_scale = 1.0f / std::sqrt(float(ih));
  for (float& v : w) v *= head_scale;
  cpu::indexer_score({qi.data(), w.data(), keys->index_keys.data(), n, ih, ihd, num_keys,
                      1.0f / std::sqrt(float(ihd)), scores.data()});

  ops::IndexerSelectParams sp;
  sp.scores = scores.data();
  sp.n = n;
  sp.num_keys = num_keys;
  sp.positions = b.positions.data();
  sp.ratio = ratio;
  sp.top_k = std::min(c.index_topk, num_keys);
  const bool is_candidate_source = l == c.candidate_source_layer_id;
  const bool uses_candidates = c.candidate_source_layer_id >= 0 && c.candidate_source_layer_id < l;
  std::vector<uint8_t> cand;
  if (is_candidate_source) {
    cand.resize(n * num_keys);
    sp.candidates_out = cand.data();
    sp.candidate_topk_blocks = c.candidate_topk_blocks;
    sp.candidate_block_size = c.candidate_block_size;
  } else if (uses_candidates && !shared.candidates.empty()) {
    DI_CHECK(int64_t(shared.candidates.size()) == n * num_keys, "candidate mask width mismatch at layer ", l);
    sp.candidates_in = shared.candidates.data();
  }
  shared.selection = cpu::indexer_select(sp);
  shared.has_selection = true;
  if (is_candidate_source) shared.candidates = std::move(cand);
}

// ---------------------------------------------------------------------------
// MoE (§6): routed experts in ascending id order, then the shared expert.
// ---------------------------------------------------------------------------

void Model::moe(int64_t l, const float* x, int64_t n, float* out) const {
  const ModelConfig& c = cfg_;
  const MoeWeights& m = w_.layers[l].ffn;
  const int64_t d = c.hidden_size, k = c.num_experts_per_tok;
  std::vector<int64_t> ids(n * k);
  std::vector<float> wts(n * k);
  cpu::moe_router({x, n, m.gate, m.gate_bias.data(), k, float(c.gate_temp), c.norm_topk_prob,
                   float(c.routed_scaling_factor), ids.data(), wts.data()});
  std::vector<float> acc(n * d, 0.0f);
  for (int64_t e = 0; e < c.n_routed_experts; ++e) {
    std::vector<int64_t> rows;
    std::vector<float> rw;
    for (int64_t t = 0; t < n; ++t)
      for (int64_t j = 0; j < k; ++j)
        if (ids[t * k + j] == e) {
          rows.push_back(t);
          rw.push_back(wts[t * k + j]);
        }
    if (rows.empty()) continue;
    const int64_t m_rows = int64_t(rows.size());
    std::vector<float> xin(m_rows * d), yout(m_rows * d);
    for (int64_t i = 0; i < m_rows; ++i) std::copy_n(x + rows[i] * d, d, xin.data() + i * d);
    cpu::swiglu_expert({xin.data(), m_rows, m.experts[e].w1, m.experts[e].w3, m.experts[e].w2, rw.data(),
                        float(c.swiglu_limit), yout.data()});
    for (int64_t i = 0; i < m_rows; ++i)
      for (int64_t j = 0; j < d; ++j) acc[rows[i] * d + j] += yout[i * d + j];
  }
  std::vector<float> shared_out(n * d);
  cpu::swiglu_expert({x, n, m.shared.w1, m.shared.w3, m.shared.w2, nullptr, float(c.swiglu_limit),
                      shared_out.data()});
  for (int64_t i = 0; i < n * d; ++i) out[i] = acc[i] + shared_out[i];
}

}  // namespace deepinfer::v41
