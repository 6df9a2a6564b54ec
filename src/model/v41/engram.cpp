#include "model/v41/engram.h"

#include <cmath>

#include "common/check.h"
#include "ops/linear.h"
#include "tokenizer/engram_vocab.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::v41 {

std::unique_ptr<EngramHasher> EngramHasher::create(const ModelConfig& cfg, const std::string& tokenizer_path) {
  auto tok = Tokenizer::load(tokenizer_path);
  CompressedVocab vocab = build_compressed_vocab(*tok);
  DI_CHECK_INPUT(vocab.size == cfg.engram_compressed_vocab_size, tokenizer_path,
                 ": the compressed vocabulary derived from this tokenizer has ", vocab.size,
                 " entries but config field 'engram_compressed_vocab_size' is ", cfg.engram_compressed_vocab_size,
                 " (the engram tables would be addressed with the wrong hashes)");
  DI_CHECK_INPUT(cfg.engram_pad_id >= 0 && cfg.engram_pad_id < int64_t(vocab.token_map.size()),
                 "config field 'engram_pad_id': ", cfg.engram_pad_id, " is not a token id of ", tokenizer_path);
  auto h = std::unique_ptr<EngramHasher>(new EngramHasher());
  h->layout_ = build_engram_layout(cfg, vocab.size);
  h->token_map_ = std::move(vocab.token_map);
  h->pad_id_ = h->token_map_[cfg.engram_pad_id];
  return h;
}

int64_t EngramHasher::num_columns() const { return (layout_.max_ngram_size - 1) * layout_.n_heads; }

std::vector<int64_t> EngramHasher::hash(const std::vector<int64_t>& tokens, int64_t first_position,
                                        std::vector<int64_t>& recent) const {
  const int64_t m = layout_.max_ngram_size, heads = layout_.n_heads, cols = num_columns();
  const int64_t num_layers = int64_t(layout_.layer_ids.size());
  // ids[k] is the compressed id at position first_position - recent.size() + k.
  std::vector<int64_t> ids = recent;
  const int64_t base = first_position - int64_t(recent.size());
  for (int64_t t : tokens) ids.push_back(compressed_id(t));
  std::vector<int64_t> out(tokens.size() * num_layers * cols);
  std::vector<int64_t> gram(m);
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int64_t pos = first_position + int64_t(i);
    bool blocked = false;
    for (int64_t s = 0; s < m; ++s) {
      // Look-back stops at the first position whose id the slot holds -- the sequence's start,
      // or a replay's start (StateSlot::reset_for_replay keeps no ids from before it); every
      // longer shift is padding. A replay's first tokens are outside the cone its continuation
      // reads, so their padded n-grams change no logit the replay keeps; reading past the ids
      // there instead read heap memory before the vector (undefined, and it made runs differ,
      // NOTES 61).
      blocked = blocked || pos - s < base;
      gram[s] = blocked ? pad_id_ : ids[pos - s - base];
    }
    for (int64_t l = 0; l < num_layers; ++l) {
      int64_t rolling = gram[0] * layout_.multipliers[l][0];
      for (int64_t n = 1; n < m; ++n) {
        rolling ^= gram[n] * layout_.multipliers[l][n];
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t c = (n - 1) * heads + h;
          out[(i * num_layers + l) * cols + c] = rolling % layout_.primes[l][c] + layout_.offsets[l][c];
        }
      }
    }
  }
  const size_t keep = size_t(m - 1);
  recent.assign(ids.size() > keep ? ids.end() - keep : ids.begin(), ids.end());
  return out;
}

std::vector<int64_t> EngramHasher::recent_ids(std::span<const int64_t> tokens) const {
  const size_t keep = size_t(lookback());
  std::vector<int64_t> ids;
  for (size_t i = tokens.size() > keep ? tokens.size() - keep : 0; i < tokens.size(); ++i)
    ids.push_back(compressed_id(tokens[i]));
  return ids;
}

int64_t EngramHasher::compressed_id(int64_t token) const {
  // Tokens outside the tokenizer's range hash as padding (a model whose vocab is larger
  // than its tokenizer); ids were validated against vocab_size already.
  return token >= 0 && token < int64_t(token_map_.size()) ? token_map_[token] : pad_id_;
}

void apply_engram(const ModelConfig& cfg, const EngramWeights& w, const int64_t* rows, int64_t row_stride, int64_t n,
                  float* h, ops::Activations act) {
  const int64_t d = cfg.hidden_size, hc = cfg.hc_mult, hd = cfg.engram_head_dim;
  const int64_t cols = (cfg.engram_max_ngram_size - 1) * cfg.engram_n_heads;
  std::vector<float> e(n * cols * hd);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t r = rows[t * row_stride + c];
      DI_CHECK(r >= 0 && r < w.table.rows, "engram row ", r, " out of range");
      ops::dequant_row(w.table, r, e.data() + (t * cols + c) * hd);
    }
  std::vector<float> kv(n * (hc + 1) * d);
  ops::cpu::linear({e.data(), kv.data(), n, w.wkv, 0, -1, act});
  const float eps = float(cfg.rms_norm_eps);
  for (int64_t t = 0; t < n; ++t) {
    const float* key = kv.data() + t * (hc + 1) * d;
    const float* value = key + hc * d;
    for (int64_t k = 0; k < hc; ++k) {
      float* hk = h + (t * hc + k) * d;
      const float* kk = key + k * d;
      const float* gw = w.gate_weight.data() + k * d;
      double ssh = 0, ssk = 0, dot = 0;
      for (int64_t i = 0; i < d; ++i) {
        ssh += double(hk[i]) * hk[i];
        ssk += double(kk[i]) * kk[i];
        dot += double(hk[i]) * gw[i] * kk[i];
      }
      // Normalized per stream over the hidden width, then a signed square root.
      float rstd = (1.0f / std::sqrt(float(ssh / d) + eps)) * (1.0f / std::sqrt(float(ssk / d) + eps));
      float g = float(dot) * rstd / std::sqrt(float(d));
      float root = std::sqrt(std::max(std::fabs(g), 1e-6f));
      float gate = 1.0f / (1.0f + std::exp(-std::copysign(root, g)));
      for (int64_t i = 0; i < d; ++i) hk[i] += gate * value[i];
    }
  }
}

}  // namespace deepinfer::v41
