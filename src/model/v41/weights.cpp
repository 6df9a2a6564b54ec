#include "model/v41/weights.h"

#include "common/check.h"
#include "common/numeric.h"

namespace deepinfer::v41 {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Looks tensors up under both naming schemes and checks dtypes and shapes.
class Binder {
 public:
  Binder(const ModelConfig& cfg, const Checkpoint& ckpt) : cfg_(cfg), ckpt_(ckpt) {}

  const TensorView* find(const std::string& name) const {
    if (const TensorView* t = ckpt_.find(name)) return t;
    return ckpt_.find("model." + name);
  }

  const TensorView& require(const std::string& name, const std::vector<int64_t>& shape) const {
    const TensorView* t = find(name);
    DI_CHECK_INPUT(t != nullptr, "checkpoint: tensor '", name, "' is missing (expected shape ", shape_str(shape), ")");
    return *t;
  }

  void check_shape(const TensorView& t, const std::vector<int64_t>& shape) const {
    DI_CHECK_INPUT(t.shape == shape, "checkpoint: tensor '", t.name, "' has shape ", shape_str(t.shape),
                   ", expected ", shape_str(shape));
  }

  // A 1-D (or any-shape) float parameter, converted to fp32.
  std::vector<float> vec(const std::string& name, const std::vector<int64_t>& shape) const {
    const TensorView& t = require(name, shape);
    check_shape(t, shape);
    std::vector<float> out(t.numel());
    WeightRef w{t.dtype, t.data, 1, t.numel()};
    DI_CHECK_INPUT(t.dtype == DType::F32 || t.dtype == DType::BF16 || t.dtype == DType::F16, "checkpoint: tensor '",
                   name, "' has dtype ", dtype_name(t.dtype), ", expected F32, BF16 or F16");
    ops::dequant_row(w, 0, out.data());
    return out;
  }

  // A matrix [rows, cols] in a float format, FP8 e4m3 with block scales, or packed FP4.
  WeightRef matrix(const std::string& module, int64_t rows, int64_t cols) const {
    const std::string wname = module + ".weight";
    const TensorView& t = require(wname, {rows, cols});
    WeightRef w;
    w.dtype = t.dtype;
    w.data = t.data;
    w.rows = rows;
    w.cols = cols;
    switch (t.dtype) {
      case DType::F32:
      case DType::BF16:
      case DType::F16:
        check_shape(t, {rows, cols});
        return w;
      case DType::F8_E4M3: {
        check_shape(t, {rows, cols});
        const TensorView& s = scale_of(module, wname);
        int64_t br = cfg_.quant.present ? cfg_.quant.weight_block_rows : infer_block(rows, s.shape[0], wname);
        int64_t bc = cfg_.quant.present ? cfg_.quant.weight_block_cols : infer_block(cols, s.shape[1], wname);
        check_scale(s, {ceil_div(rows, br), ceil_div(cols, bc)}, wname);
        return with_scale(w, s, br, bc);
      }
      case DType::I8:
      case DType::U8: {
        // Packed e2m1 pairs: [rows, cols / 2] with one scale per 1 x block columns.
        DI_CHECK_INPUT(cols % 2 == 0, "checkpoint: tensor '", wname, "' is packed FP4 but has an odd column count ",
                       cols);
        check_shape(t, {rows, cols / 2});
        w.dtype = DType::I8;
        const TensorView& s = scale_of(module, wname);
        DI_CHECK_INPUT(s.shape.size() == 2 && s.shape[0] == rows && s.shape[1] > 0 && cols % s.shape[1] == 0,
                       "checkpoint: scale of '", wname, "' has shape ", shape_str(s.shape), ", expected [", rows,
                       ", ", cols, " / block]");
        check_scale(s, s.shape, wname);
        return with_scale(w, s, 1, cols / s.shape[1]);
      }
      default:
        DI_CHECK_INPUT(false, "checkpoint: tensor '", wname, "' has unsupported dtype ", dtype_name(t.dtype));
    }
    return w;
  }

  // An FP8 matrix whose scale has one entry per row and per `cols / scale_cols` columns.
  WeightRef row_scaled(const std::string& module, int64_t rows, int64_t cols) const {
    const std::string wname = module + ".weight";
    const TensorView& t = require(wname, {rows, cols});
    check_shape(t, {rows, cols});
    const TensorView& s = scale_of(module, wname);
    DI_CHECK_INPUT(s.shape[0] == rows && s.shape[1] > 0 && cols % s.shape[1] == 0, "checkpoint: scale of '", wname,
                   "' has shape ", shape_str(s.shape), ", expected [", rows, ", ", cols, " / block]");
    check_scale(s, s.shape, wname);
    return with_scale(WeightRef{t.dtype, t.data, rows, cols}, s, 1, cols / s.shape[1]);
  }

 private:
  const TensorView& scale_of(const std::string& module, const std::string& wname) const {
    const TensorView* s = find(module + ".scale");
    if (s == nullptr) s = find(module + ".weight_scale_inv");
    DI_CHECK_INPUT(s != nullptr, "checkpoint: quantized tensor '", wname, "' has no scale tensor '", module,
                   ".scale'");
    DI_CHECK_INPUT(s->shape.size() == 2, "checkpoint: scale of '", wname, "' must be 2-D, got ",
                   shape_str(s->shape));
    return *s;
  }
  // Without quantization_config the block size is read off the scale's shape: the
  // smallest power of two that gives exactly that many blocks (DeepSeek uses 32 or 128).
  static int64_t infer_block(int64_t size, int64_t num_blocks, const std::string& wname) {
    for (int64_t b = 1; b <= (int64_t(1) << 20); b *= 2)
      if (ceil_div(size, b) == num_blocks) return b;
    DI_CHECK_INPUT(false, "checkpoint: scale of '", wname, "' has ", num_blocks, " blocks along a dimension of ",
                   size, ", which no power-of-two block size gives");
    return 0;
  }
  void check_scale(const TensorView& s, const std::vector<int64_t>& shape, const std::string& wname) const {
    DI_CHECK_INPUT(s.dtype == DType::F8_E8M0 || s.dtype == DType::F32, "checkpoint: scale of '", wname,
                   "' has dtype ", dtype_name(s.dtype), ", expected F8_E8M0 or F32");
    DI_CHECK_INPUT(s.shape == shape, "checkpoint: scale of '", wname, "' has shape ", shape_str(s.shape),
                   ", expected ", shape_str(shape));
  }
  static WeightRef with_scale(WeightRef w, const TensorView& s, int64_t br, int64_t bc) {
    w.scale = s.data;
    w.scale_dtype = s.dtype;
    w.scale_cols = s.shape[1];
    w.block_rows = br;
    w.block_cols = bc;
    return w;
  }

  const ModelConfig& cfg_;
  const Checkpoint& ckpt_;
};

ExpertWeights bind_expert(const Binder& b, const std::string& prefix, int64_t hidden, int64_t inter) {
  return {b.matrix(prefix + ".w1", inter, hidden), b.matrix(prefix + ".w3", inter, hidden),
          b.matrix(prefix + ".w2", hidden, inter)};
}

HcSiteWeights bind_hc(const Binder& b, const std::string& prefix, const ModelConfig& c) {
  const int64_t mix = (2 + c.hc_mult) * c.hc_mult;
  return {b.vec(prefix + "_fn", {mix, c.hc_mult * c.hidden_size}), b.vec(prefix + "_base", {mix}),
          b.vec(prefix + "_scale", {3})};
}

AttentionWeights bind_attention(const Binder& b, const std::string& p, const ModelConfig& c, int64_t layer) {
  const int64_t d = c.hidden_size, hd = c.head_dim, heads = c.num_attention_heads;
  AttentionWeights a;
  a.wq_a = b.matrix(p + ".wq_a", c.q_lora_rank, d);
  a.q_norm = b.vec(p + ".q_norm.weight", {c.q_lora_rank});
  a.wq_b = b.matrix(p + ".wq_b", heads * hd, c.q_lora_rank);
  a.wkv = b.matrix(p + ".wkv", hd, d);
  a.kv_norm = b.vec(p + ".kv_norm.weight", {hd});
  a.wo_a = b.matrix(p + ".wo_a", c.o_groups * c.o_lora_rank, heads * hd / c.o_groups);
  a.wo_b = b.matrix(p + ".wo_b", d, c.o_groups * c.o_lora_rank);
  a.attn_sink = b.vec(p + ".attn_sink", {heads});
  if (c.is_kv_source(layer)) {
    a.compressor_wkv = b.matrix(p + ".compressor.wkv", hd, d);
    if (c.compress_ratios[layer] > 1) a.compressor_wgate = b.matrix(p + ".compressor.wgate", hd, d);
    a.compressor_norm = b.vec(p + ".compressor.norm.weight", {hd});
    if (c.is_index_source(layer)) {
      a.indexer_wk = b.matrix(p + ".indexer.wk", c.index_head_dim, hd);
      a.indexer_k_norm = b.vec(p + ".indexer.k_norm.weight", {c.index_head_dim});
    }
  }
  if (c.is_index_source(layer)) {
    a.indexer_wq_b = b.matrix(p + ".indexer.wq_b", c.index_n_heads * c.index_head_dim, c.q_lora_rank);
    a.indexer_weights_proj = b.matrix(p + ".indexer.weights_proj", c.index_n_heads, d);
  }
  return a;
}

EngramWeights bind_engram(const Binder& b, const std::string& p, const ModelConfig& c, size_t engram_index) {
  EngramWeights e;
  const int64_t rows = c.engram_num_embeddings.at(engram_index);
  const int64_t cols = (c.engram_max_ngram_size - 1) * c.engram_n_heads;
  const TensorView& table = b.require(p + ".embed.weight", {rows, c.engram_head_dim});
  b.check_shape(table, {rows, c.engram_head_dim});
  if (table.dtype == DType::F8_E4M3) {
    // Engram rows carry one ue8m0 scale per 32 columns of each row (1 x 32 blocks),
    // unlike the 32 x 32 blocks of the FP8 linears.
    e.table = b.row_scaled(p + ".embed", rows, c.engram_head_dim);
  } else {
    // A float table is used as stored: the reference applies .scale only to FP8 rows.
    e.table = WeightRef{table.dtype, table.data, rows, c.engram_head_dim};
    DI_CHECK_INPUT(table.dtype == DType::F32 || table.dtype == DType::BF16 || table.dtype == DType::F16,
                   "checkpoint: tensor '", table.name, "' has unsupported dtype ", dtype_name(table.dtype));
  }
  e.wkv = b.matrix(p + ".wkv", c.hidden_size * (c.hc_mult + 1), cols * c.engram_head_dim);
  std::vector<float> q = b.vec(p + ".q_weight", {c.hc_mult, c.hidden_size});
  std::vector<float> k = b.vec(p + ".k_weight", {c.hc_mult, c.hidden_size});
  e.gate_weight.resize(q.size());
  for (size_t i = 0; i < q.size(); ++i) e.gate_weight[i] = q[i] * k[i];
  return e;
}

}  // namespace

ModelWeights bind_weights(const ModelConfig& c, const Checkpoint& ckpt) {
  Binder b(c, ckpt);
  ModelWeights m;
  const int64_t d = c.hidden_size;
  m.embed = b.matrix("embed", c.vocab_size, d);
  const bool hf_head = b.find("lm_head.weight") != nullptr;
  m.head = b.matrix(hf_head ? "lm_head" : "head", c.vocab_size, d);
  m.norm = b.vec("norm.weight", {d});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "layers." + std::to_string(l);
    LayerWeights lw;
    lw.attn_norm = b.vec(p + ".attn_norm.weight", {d});
    lw.ffn_norm = b.vec(p + ".ffn_norm.weight", {d});
    lw.hc_attn = bind_hc(b, p + ".hc_attn", c);
    lw.hc_ffn = bind_hc(b, p + ".hc_ffn", c);
    lw.attn = bind_attention(b, p + ".attn", c, l);
    lw.ffn.gate = b.matrix(p + ".ffn.gate", c.n_routed_experts, d);
    lw.ffn.gate_bias = b.vec(p + ".ffn.gate.bias", {c.n_routed_experts});
    for (int64_t e = 0; e < c.n_routed_experts; ++e)
      lw.ffn.experts.push_back(
          bind_expert(b, p + ".ffn.experts." + std::to_string(e), d, c.moe_intermediate_size));
    lw.ffn.shared = bind_expert(b, p + ".ffn.shared_experts", d, c.moe_intermediate_size);
    for (size_t i = 0; i < c.engram_layer_ids.size(); ++i) {
      if (c.engram_layer_ids[i] == l) {
        lw.has_engram = true;
        lw.engram = bind_engram(b, p + ".engram", c, i);
      }
    }
    m.layers.push_back(std::move(lw));
  }
  return m;
}

}  // namespace deepinfer::v41
