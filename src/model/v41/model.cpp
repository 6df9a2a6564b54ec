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
// (the reference's per-forward `shared` dict), kept per sequence of the batch.
struct Model::Shared {
  int64_t compress_source = -1;  // KV-source layer whose compressed history is attended
  int64_t index_source = -1;     // KV-source layer whose indexer keys are scored
  bool has_selection = false;
  ops::Selection selection;         // per-query compressed entry ids (top-k)
  std::vector<uint8_t> candidates;  // level-1 mask [tokens, num_keys], empty if none
};

struct Model::Batch {
  HistoryPool* pool = nullptr;
  std::vector<BatchItem>* items = nullptr;
  std::vector<int64_t> begin;      // token offset of each item; begin.back() == n
  std::vector<int64_t> positions;  // [n] absolute positions
  std::vector<Shared> shared;      // per item
  int64_t n = 0;

  StateSlot& slot(size_t i) const { return *(*items)[i].seq.slot; }
  int64_t count(size_t i) const { return begin[i + 1] - begin[i]; }
  // History storage of entry e of KV-source layer `layer` for item i.
  float* entry(size_t i, int64_t layer, int64_t ratio, int64_t e, bool key) const {
    const int64_t pos = e * ratio, bs = pool->block_size();
    const auto& table = *(*items)[i].seq.block_table;
    DI_CHECK(pos / bs < int64_t(table.size()), "block table does not cover position ", pos);
    const int64_t src = pool->source_index(layer);
    const int64_t block = table[pos / bs], off = (pos % bs) / ratio;
    return key ? pool->key(src, block, off) : pool->entry(src, block, off);
  }
};

std::unique_ptr<Model> Model::load(const std::string& dir, const ModelOptions& options) {
  namespace fs = std::filesystem;
  DI_CHECK_INPUT(fs::is_directory(dir), "model directory '", dir, "' does not exist");
  auto m = std::unique_ptr<Model>(new Model());
  m->act_ = options.activations;
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

std::vector<float> Model::forward(SequenceState& seq, const std::vector<int64_t>& tokens) const {
  seq.ensure_capacity(seq.slot.num_tokens + int64_t(tokens.size()));
  std::vector<BatchItem> items(1);
  items[0].seq = {&seq.slot, &seq.block_table};
  items[0].tokens = tokens;
  items[0].all_logits = true;
  return forward_batch(seq.pool, items);
}

std::vector<int64_t> Model::replay_recent_ids(std::span<const int64_t> preceding) const {
  return engram_ ? engram_->recent_ids(preceding) : std::vector<int64_t>{};
}

std::vector<float> Model::forward_batch(HistoryPool& pool, std::vector<BatchItem>& items) const {
  const ModelConfig& c = cfg_;
  const int64_t d = c.hidden_size, hc = c.hc_mult;
  Batch b;
  b.pool = &pool;
  b.items = &items;
  b.begin.push_back(0);
  for (const BatchItem& it : items) {
    DI_CHECK_INPUT(!it.tokens.empty(), "forward: no tokens");
    DI_CHECK(it.seq.slot && int64_t(it.seq.slot->layers.size()) == c.num_hidden_layers,
             "sequence state belongs to another model");
    for (size_t k = 0; k < it.tokens.size(); ++k) {
      const int64_t t = it.tokens[k];
      DI_CHECK_INPUT(t >= 0 && t < c.vocab_size, "token id ", t, " is out of range [0, ", c.vocab_size, ")");
      b.positions.push_back(it.seq.slot->num_tokens + int64_t(k));
    }
    b.begin.push_back(b.begin.back() + int64_t(it.tokens.size()));
  }
  const int64_t n = b.n = b.begin.back();
  b.shared.resize(items.size());

  // Residual state: hc identical copies of the embedding.
  std::vector<float> h(n * hc * d);
  std::vector<int64_t> engram_rows;
  const int64_t engram_row_stride = engram_ ? int64_t(c.engram_layer_ids.size()) * engram_->num_columns() : 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const auto& toks = items[i].tokens;
    for (size_t k = 0; k < toks.size(); ++k) {
      float* row = h.data() + (b.begin[i] + int64_t(k)) * hc * d;
      ops::dequant_row(w_.embed, toks[k], row);
      for (int64_t s = 1; s < hc; ++s) std::copy_n(row, d, row + s * d);
    }
    if (engram_) {
      StateSlot& slot = b.slot(i);
      auto rows = engram_->hash(toks, slot.num_tokens, slot.recent_ngram_ids);
      engram_rows.insert(engram_rows.end(), rows.begin(), rows.end());
    }
  }

  // The collapse weights of a site are consumed by the next site (§2.5); the first
  // site collapses stream 0.
  std::vector<float> pre_mix(n * hc, 0.0f), a_pre(n * hc), post(n * hc), comb(n * hc * hc);
  for (int64_t t = 0; t < n; ++t) pre_mix[t * hc] = 1.0f;
  std::vector<float> x(n * d), y(n * d);
  const float eps = float(c.rms_norm_eps);
  auto mixes = [&](const HcSiteWeights& s, float* pre_out) {
    cpu::hc_mixes({h.data(), n, hc, d, s.fn.data(), s.base.data(), s.scale.data(), eps, float(c.hc_eps),
                   c.hc_sinkhorn_iters, pre_out, post.data(), comb.data()});
  };
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const LayerWeights& lw = w_.layers[l];
    if (lw.has_engram) {
      const int64_t cols = engram_->num_columns();
      apply_engram(c, lw.engram, engram_rows.data() + c.engram_slot(l) * cols, engram_row_stride, n, h.data(),
                   ops::activations_for(act_, lw.engram.wkv));
    }
    mixes(lw.hc_attn, a_pre.data());
    cpu::hc_collapse({h.data(), pre_mix.data(), x.data(), n, hc, d});
    cpu::rms_norm({x.data(), x.data(), n, d, lw.attn_norm.data(), eps});
    attention(b, l, x.data(), y.data());
    cpu::hc_expand({h.data(), y.data(), post.data(), comb.data(), n, hc, d});

    mixes(lw.hc_ffn, pre_mix.data());  // f_pre becomes the next site's collapse weights
    cpu::hc_collapse({h.data(), a_pre.data(), x.data(), n, hc, d});
    cpu::rms_norm({x.data(), x.data(), n, d, lw.ffn_norm.data(), eps});
    moe(l, x.data(), n, y.data());
    cpu::hc_expand({h.data(), y.data(), post.data(), comb.data(), n, hc, d});
  }
  for (size_t i = 0; i < items.size(); ++i) b.slot(i).num_tokens += b.count(i);

  // Only the requested rows go through the final norm and the head.
  std::vector<int64_t> rows = logit_rows(items, b.begin);
  const int64_t m = int64_t(rows.size());
  std::vector<float> hs(m * hc * d), pm(m * hc), xs(m * d);
  for (int64_t r = 0; r < m; ++r) {
    std::copy_n(h.data() + rows[r] * hc * d, hc * d, hs.data() + r * hc * d);
    std::copy_n(pre_mix.data() + rows[r] * hc, hc, pm.data() + r * hc);
  }
  cpu::hc_collapse({hs.data(), pm.data(), xs.data(), m, hc, d});
  cpu::rms_norm({xs.data(), xs.data(), m, d, w_.norm.data(), eps});
  std::vector<float> logits(m * c.vocab_size);
  cpu::linear({xs.data(), logits.data(), m, w_.head, 0, -1, ops::activations_for(act_, w_.head)});
  return logits;
}

// ---------------------------------------------------------------------------
// Attention (§3) with the compressed branch (§4).
// ---------------------------------------------------------------------------

void Model::attention(Batch& b, int64_t l, const float* x, float* out) const {
  const ModelConfig& c = cfg_;
  const AttentionWeights& a = w_.layers[l].attn;
  const int64_t n = b.n, hd = c.head_dim, heads = c.num_attention_heads, rd = c.qk_rope_head_dim;
  const int64_t ratio = c.compress_ratios[l], win = c.sliding_window;
  const std::vector<float>& inv_freq = ratio > 0 ? compress_inv_freq_ : main_inv_freq_;
  const float af = float(c.rope_for(l).attention_factor), caf = float(c.compress_rope.attention_factor);

  std::vector<float> qr(n * c.q_lora_rank), q(n * heads * hd), kv(n * hd);
  cpu::linear({x, qr.data(), n, a.wq_a, 0, -1, ops::activations_for(act_, a.wq_a)});
  cpu::rms_norm({qr.data(), qr.data(), n, c.q_lora_rank, a.q_norm.data(), float(c.rms_norm_eps)});
  cpu::linear({qr.data(), q.data(), n, a.wq_b, 0, -1, ops::activations_for(act_, a.wq_b)});
  cpu::rope({q.data(), n, heads, hd, rd, b.positions.data(), inv_freq.data(), false, af});
  cpu::linear({x, kv.data(), n, a.wkv, 0, -1, ops::activations_for(act_, a.wkv)});
  cpu::rms_norm({kv.data(), kv.data(), n, hd, a.kv_norm.data(), float(c.rms_norm_eps)});
  cpu::rope({kv.data(), n, 1, hd, rd, b.positions.data(), inv_freq.data(), false, af});
  cpu::fake_quant_fp8({kv.data(), n, hd, 32});

  // KV pool of the whole batch: per item [its window ring | its new entries |
  // the compressed entries its queries selected].
  std::vector<float> pool;
  std::vector<int64_t> offsets{0}, ids;
  for (size_t i = 0; i < b.items->size(); ++i) {
    StateSlot& slot = b.slot(i);
    LayerSlot& st = slot.layers[l];
    Shared& sh = b.shared[i];
    const int64_t t0 = b.begin[i], cnt = b.count(i);
    if (ratio > 0) {
      std::vector<float> latent;
      std::vector<int64_t> group_pos;
      if (c.is_kv_source(l)) compressor(b, i, l, x + t0 * c.hidden_size, latent, group_pos);
      const int64_t groups = int64_t(group_pos.size());
      if (groups > 0) {
        // The stored entry is the RoPE-rotated, FP4-rounded latent; the indexer below
        // derives its keys from the unrotated latent.
        std::vector<float> rotated = latent;
        cpu::rope({rotated.data(), groups, 1, hd, rd, group_pos.data(), compress_inv_freq_.data(), false, caf});
        cpu::fake_quant_fp4({rotated.data(), groups, hd, 16}, ops::Fp4Scale::kE4m3);
        for (int64_t g = 0; g < groups; ++g) {
          DI_CHECK(group_pos[g] / ratio == st.num_entries, "compressed history out of order at layer ", l);
          std::copy_n(rotated.data() + g * hd, hd, b.entry(i, l, ratio, st.num_entries, false));
          ++st.num_entries;
        }
      }
      if (c.is_kv_source(l)) sh.compress_source = l;
      if (c.is_index_source(l)) indexer(b, i, l, x + t0 * c.hidden_size, qr.data() + t0 * c.q_lora_rank, latent,
                                        group_pos);
    }

    const int64_t base = int64_t(pool.size()) / hd;
    pool.insert(pool.end(), st.window.begin(), st.window.end());
    pool.insert(pool.end(), kv.begin() + t0 * hd, kv.begin() + (t0 + cnt) * hd);
    const int64_t new_base = base + win, comp_base = new_base + cnt;
    const bool use_comp = ratio > 0 && sh.compress_source >= 0 && sh.has_selection;
    std::vector<int64_t> comp_ids;  // distinct selected entries, in pool order
    if (use_comp) {
      comp_ids = sh.selection.ids;
      std::sort(comp_ids.begin(), comp_ids.end());
      comp_ids.erase(std::unique(comp_ids.begin(), comp_ids.end()), comp_ids.end());
      const int64_t src_ratio = c.compress_ratios[sh.compress_source];
      for (int64_t e : comp_ids) {
        const float* v = b.entry(i, sh.compress_source, src_ratio, e, false);
        pool.insert(pool.end(), v, v + hd);
      }
    }
    const int64_t p0 = b.positions[t0];
    for (int64_t k = 0; k < cnt; ++k) {
      const int64_t p = b.positions[t0 + k];
      // Window: positions max(window start, p - win + 1) .. p inclusive.
      for (int64_t s = std::max<int64_t>(slot.window_start, p - win + 1); s <= p; ++s)
        ids.push_back(s < p0 ? base + s % win : new_base + (s - p0));
      if (use_comp) {
        const auto& sel = sh.selection;
        for (int64_t j = sel.offsets[k]; j < sel.offsets[k + 1]; ++j) {
          auto it = std::lower_bound(comp_ids.begin(), comp_ids.end(), sel.ids[j]);
          ids.push_back(comp_base + (it - comp_ids.begin()));
        }
      }
      offsets.push_back(int64_t(ids.size()));
    }
    for (int64_t k = 0; k < cnt; ++k)
      std::copy_n(kv.data() + (t0 + k) * hd, hd, st.window.begin() + (b.positions[t0 + k] % win) * hd);
  }
  std::vector<float> o(n * heads * hd);
  cpu::sink_attention({q.data(), pool.data(), offsets.data(), ids.data(), a.attn_sink.data(),
                       1.0f / std::sqrt(float(hd)), o.data(), n, heads, hd, ops::rounding_of(act_)});
  // The values carried RoPE; rotate the output back by the query position.
  cpu::rope({o.data(), n, heads, hd, rd, b.positions.data(), inv_freq.data(), /*inverse=*/true, af});

  // Grouped low-rank output: group g (heads g*H/G ..) through its own block of wo_a.
  const int64_t groups = c.o_groups, group_in = heads * hd / groups, rank = c.o_lora_rank;
  std::vector<float> z(n * groups * rank), xg(n * group_in), zg(n * rank);
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t t = 0; t < n; ++t)
      std::copy_n(o.data() + t * heads * hd + g * group_in, group_in, xg.data() + t * group_in);
    cpu::linear({xg.data(), zg.data(), n, a.wo_a, /*row0=*/g * rank, /*num_rows=*/rank,
                 ops::activations_for(act_, a.wo_a)});
    for (int64_t t = 0; t < n; ++t) std::copy_n(zg.data() + t * rank, rank, z.data() + (t * groups + g) * rank);
  }
  cpu::linear({z.data(), out, n, a.wo_b, 0, -1, ops::activations_for(act_, a.wo_b)});
}

// Emits the pre-RoPE latents of the groups completed by item i's tokens, with the
// absolute position of each group's first token. Groups starting below the slot's
// write floor are already in the (shared) history and are not emitted.
void Model::compressor(Batch& b, size_t i, int64_t l, const float* x, std::vector<float>& latent,
                       std::vector<int64_t>& group_pos) const {
  const ModelConfig& c = cfg_;
  const AttentionWeights& a = w_.layers[l].attn;
  StateSlot& slot = b.slot(i);
  LayerSlot& st = slot.layers[l];
  const int64_t n = b.count(i), hd = c.head_dim, ratio = c.compress_ratios[l];
  const float eps = float(c.rms_norm_eps);
  std::vector<float> kvp(n * hd), gate;
  cpu::linear({x, kvp.data(), n, a.compressor_wkv, 0, -1, ops::activations_for(act_, a.compressor_wkv)});
  if (ratio > 1) {
    gate.resize(n * hd);
    cpu::linear(
        {x, gate.data(), n, a.compressor_wgate, 0, -1, ops::activations_for(act_, a.compressor_wgate)});
  }
  st.pending_kv.insert(st.pending_kv.end(), kvp.begin(), kvp.end());
  st.pending_gate.insert(st.pending_gate.end(), gate.begin(), gate.end());
  st.num_pending += n;
  const int64_t complete = st.num_pending / ratio;
  for (int64_t g = 0; g < complete; ++g) {
    const int64_t pos = st.next_group_position + g * ratio;
    if (pos < slot.write_floor) continue;
    group_pos.push_back(pos);
    const float* ka = st.pending_kv.data() + g * ratio * hd;
    if (ratio == 1) {
      latent.insert(latent.end(), ka, ka + hd);
      continue;
    }
    // Softmax-gated pooling of the group's tokens, per channel, in fp32.
    const float* ga = st.pending_gate.data() + g * ratio * hd;
    for (int64_t ch = 0; ch < hd; ++ch) {
      float mx = -INFINITY;
      for (int64_t k = 0; k < ratio; ++k) mx = std::max(mx, ga[k * hd + ch]);
      float denom = 0.0f;
      for (int64_t k = 0; k < ratio; ++k) denom += std::exp(ga[k * hd + ch] - mx);
      float acc = 0.0f;
      for (int64_t k = 0; k < ratio; ++k) acc += ka[k * hd + ch] * (std::exp(ga[k * hd + ch] - mx) / denom);
      latent.push_back(acc);
    }
  }
  const int64_t used = complete * ratio;
  st.pending_kv.erase(st.pending_kv.begin(), st.pending_kv.begin() + used * hd);
  if (ratio > 1) st.pending_gate.erase(st.pending_gate.begin(), st.pending_gate.begin() + used * hd);
  st.num_pending -= used;
  st.next_group_position += used;
  const int64_t groups = int64_t(group_pos.size());
  if (groups > 0) cpu::rms_norm({latent.data(), latent.data(), groups, hd, a.compressor_norm.data(), eps});
}

void Model::indexer(Batch& b, size_t i, int64_t l, const float* x, const float* qr, const std::vector<float>& latent,
                    const std::vector<int64_t>& group_pos) const {
  const ModelConfig& c = cfg_;
  const AttentionWeights& a = w_.layers[l].attn;
  StateSlot& slot = b.slot(i);
  Shared& sh = b.shared[i];
  const int64_t n = b.count(i), ihd = c.index_head_dim, ih = c.index_n_heads, ratio = c.compress_ratios[l];
  const int64_t* positions = b.positions.data() + b.begin[i];
  if (c.is_kv_source(l)) {
    // Keys come from the pre-RoPE latent, rotated to the group's first position.
    const int64_t groups = int64_t(group_pos.size());
    if (groups > 0) {
      std::vector<float> k(groups * ihd);
      cpu::linear(
          {latent.data(), k.data(), groups, a.indexer_wk, 0, -1, ops::activations_for(act_, a.indexer_wk)});
      cpu::rms_norm({k.data(), k.data(), groups, ihd, a.indexer_k_norm.data(), float(c.rms_norm_eps)});
      cpu::rope({k.data(), groups, 1, ihd, c.qk_rope_head_dim, group_pos.data(), compress_inv_freq_.data(), false,
                 float(c.compress_rope.attention_factor)});
      cpu::fake_quant_fp4({k.data(), groups, ihd, 32}, ops::Fp4Scale::kUe8m0);
      for (int64_t g = 0; g < groups; ++g)
        std::copy_n(k.data() + g * ihd, ihd, b.entry(i, l, ratio, group_pos[g] / ratio, true));
    }
    sh.index_source = l;
  }
  if (sh.index_source < 0) return;
  const int64_t key_layer = sh.index_source, key_ratio = c.compress_ratios[key_layer];
  // The keys this call can see: the source's entries so far (its compressor ran
  // earlier in this layer pass, or in this very layer).
  const int64_t num_keys = slot.layers[key_layer].num_entries;
  if (num_keys == 0) return;  // nothing to select yet; an earlier selection stays published
  std::vector<float> keys(num_keys * ihd);
  for (int64_t e = 0; e < num_keys; ++e) std::copy_n(b.entry(i, key_layer, key_ratio, e, true), ihd, keys.data() + e * ihd);

  std::vector<float> qi(n * ih * ihd), w(n * ih), scores(n * num_keys);
  cpu::linear({qr, qi.data(), n, a.indexer_wq_b, 0, -1,
               ops::activations_for(act_, a.indexer_wq_b)});
  cpu::rope({qi.data(), n, ih, ihd, c.qk_rope_head_dim, positions, compress_inv_freq_.data(), false,
             float(c.compress_rope.attention_factor)});
  cpu::fake_quant_fp4({qi.data(), n * ih, ihd, 32}, ops::Fp4Scale::kUe8m0);
  cpu::linear(
      {x, w.data(), n, a.indexer_weights_proj, 0, -1, ops::activations_for(act_, a.indexer_weights_proj)});
  const float head_scale = 1.0f / std::sqrt(float(ih));
  for (float& v : w) v *= head_scale;
  cpu::indexer_score({qi.data(), w.data(), keys.data(), n, ih, ihd, num_keys, 1.0f / std::sqrt(float(ihd)),
                      scores.data()});

  ops::IndexerSelectParams sp;
  sp.scores = scores.data();
  sp.n = n;
  sp.num_keys = num_keys;
  sp.positions = positions;
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
  } else if (uses_candidates && !sh.candidates.empty()) {
    DI_CHECK(int64_t(sh.candidates.size()) == n * num_keys, "candidate mask width mismatch at layer ", l);
    sp.candidates_in = sh.candidates.data();
  }
  sh.selection = cpu::indexer_select(sp);
  sh.has_selection = true;
  if (is_candidate_source) sh.candidates = std::move(cand);
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
  std::vector<ops::MoeExpertRef> experts(m.experts.size());
  for (size_t e = 0; e < experts.size(); ++e) experts[e] = {m.experts[e].w1, m.experts[e].w3, m.experts[e].w2};
  std::vector<float> shared_out(n * d);
  cpu::swiglu_expert({x, n, m.shared.w1, m.shared.w3, m.shared.w2, nullptr, float(c.swiglu_limit),
                      shared_out.data(), act_});
  cpu::moe_experts({x, n, k, ids.data(), wts.data(), experts.data(), int64_t(experts.size()), float(c.swiglu_limit),
                    shared_out.data(), out, ops::rounding_of(act_)});
}

}  // namespace deepinfer::v41
