// Parsing mirrors transformers' DeepseekV41TextConfig.__post_init__ (and the base
// class's rope standardization) step by step, so a config.json means here exactly what
// it means to the reference. Checks go beyond the reference where a config it accepts
// would crash it later or give a schedule with no defined meaning; each such check says
// so in a comment.
#include "model/config.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/check.h"

namespace deepinfer {
namespace {

using Json = nlohmann::json;

// Hostile configs must not make us allocate or overflow: these bounds are far above
// any real DeepSeek model and keep every product of two sizes inside int64.
constexpr int64_t kMaxLayers = 1024;
constexpr int64_t kMaxDim = int64_t{1} << 24;
constexpr int64_t kMaxPositions = int64_t{1} << 32;
constexpr int64_t kMaxTableRows = int64_t{1} << 40;
constexpr size_t kMaxConfigBytes = size_t{16} << 20;
constexpr size_t kMaxShownChars = 60;

// The released schedule, used by the reference only when `compress_ratios` is absent.
const std::vector<int64_t>& default_compress_ratios() {
  static const std::vector<int64_t> ratios = [] {
    std::vector<int64_t> r = {0, 0};
    r.insert(r.end(), 18, 2);
    r.insert(r.end(), 20, 1);
    return r;
  }();
  return ratios;
}
const std::vector<int64_t> kDefaultKvSources = {2, 8, 14, 20};
const std::vector<int64_t> kDefaultIndexSources = {2, 8, 14, 20, 24, 28, 32, 36};

std::string shorten(std::string s) {
  if (s.size() > kMaxShownChars) s = s.substr(0, kMaxShownChars) + "...";
  return s;
}

// Bounded on purpose: a hostile value may be nested a million levels deep, and
// json::dump recurses.
void append_shown(const Json& v, int depth, std::string& out) {
  if (out.size() > kMaxShownChars) return;
  if (v.is_array()) {
    if (depth >= 2) {
      out += "[...]";
      return;
    }
    out += '[';
    for (size_t i = 0; i < v.size() && out.size() <= kMaxShownChars; ++i) {
      if (i) out += ", ";
      append_shown(v[i], depth + 1, out);
    }
    out += ']';
  } else if (v.is_object()) {
    out += v.empty() ? "{}" : "{...}";
  } else if (v.is_string()) {
    out += Json(shorten(v.get<std::string>())).dump(-1, ' ', false, Json::error_handler_t::replace);
  } else {
    out += v.dump();
  }
}

std::string show(const Json& v) {
  std::string out;
  append_shown(v, 0, out);
  return shorten(out);
}

std::string show(const std::vector<int64_t>& v) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ']';
  return shorten(os.str());
}

bool contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// Reads typed fields from one JSON object and reports errors in one format:
// "<origin>: config field '<prefix><name>': <rule> (got <value>)".
class Fields {
 public:
  Fields(const Json& obj, std::string origin, std::string prefix)
      : obj_(obj), origin_(std::move(origin)), prefix_(std::move(prefix)) {}

  [[noreturn]] void fail(const std::string& name, const std::string& rule, const std::string& got) const {
    throw InputError(str_cat(origin_, ": config field '", prefix_, name, "': ", rule, " (got ", got, ")"));
  }
  void require(bool ok, const std::string& name, const std::string& rule, const std::string& got) const {
    if (!ok) fail(name, rule, got);
  }
  template <typename T>
  void require(bool ok, const std::string& name, const std::string& rule, const T& got) const {
    if (!ok) fail(name, rule, str_cat(got));
  }

  // Absent and null are the same to the reference's optional fields.
  const Json* find(const std::string& name) const {
    auto it = obj_.find(name);
    if (it == obj_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  bool has(const std::string& name) const { return find(name) != nullptr; }

  int64_t to_int(const Json& v, const std::string& name) const {
    require(v.is_number_integer(), name, "must be an integer", show(v));
    if (v.is_number_unsigned()) {
      require(v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()), name, "is too large", show(v));
    }
    return v.get<int64_t>();
  }
  double to_number(const Json& v, const std::string& name) const {
    require(v.is_number(), name, "must be a number", show(v));
    double d = v.get<double>();
    require(std::isfinite(d), name, "must be finite", show(v));
    return d;
  }

  // Non-optional fields of the reference reject null like any other wrong type.
  const Json* find_strict(const std::string& name) const {
    auto it = obj_.find(name);
    if (it == obj_.end()) return nullptr;
    require(!it->is_null(), name, "must not be null", "null");
    return &*it;
  }
  int64_t get_int(const std::string& name, int64_t def, int64_t lo, int64_t hi) const {
    const Json* v = find_strict(name);
    if (!v) return def;
    int64_t x = to_int(*v, name);
    check_range(name, x, lo, hi);
    return x;
  }
  double get_number(const std::string& name, double def) const {
    const Json* v = find_strict(name);
    return v ? to_number(*v, name) : def;
  }
  bool get_bool(const std::string& name, bool def) const {
    const Json* v = find_strict(name);
    if (!v) return def;
    require(v->is_boolean(), name, "must be true or false", show(*v));
    return v->get<bool>();
  }
  std::string get_string(const std::string& name, const std::string& def) const {
    const Json* v = find_strict(name);
    if (!v) return def;
    require(v->is_string(), name, "must be a string", show(*v));
    return v->get<std::string>();
  }
  std::optional<int64_t> get_opt_int(const std::string& name) const {
    const Json* v = find(name);
    if (!v) return std::nullopt;
    return to_int(*v, name);
  }
  std::optional<std::vector<int64_t>> get_int_list(const std::string& name) const {
    const Json* v = find(name);
    if (!v) return std::nullopt;
    require(v->is_array(), name, "must be a list of integers", show(*v));
    require(v->size() <= size_t(kMaxLayers) * 4, name, "has too many entries", v->size());
    std::vector<int64_t> out;
    out.reserve(v->size());
    for (size_t i = 0; i < v->size(); ++i) out.push_back(to_int((*v)[i], str_cat(name, "[", i, "]")));
    return out;
  }

  void check_range(const std::string& name, int64_t x, int64_t lo, int64_t hi) const {
    if (x < lo) {
      fail(name, lo == 1 ? std::string("must be positive") : str_cat("must be >= ", lo), str_cat(x));
    }
    require(x <= hi, name, str_cat("must be at most ", hi), x);
  }

  const std::string& origin() const { return origin_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const Json& obj_;
  std::string origin_;
  std::string prefix_;
};

// Optional schedule fields as given; null and absent both mean "derive".
struct RawSchedule {
  std::optional<std::vector<int64_t>> compress_ratios;
  std::optional<std::vector<int64_t>> kv_sources;
  std::optional<std::vector<int64_t>> index_sources;
  std::optional<int64_t> candidate_source;
  std::optional<std::vector<int64_t>> engram_layers;
  std::optional<std::vector<int64_t>> engram_num_embeddings;
  std::optional<std::vector<int64_t>> dspark_targets;
};

void read_scalars(const Fields& f, ModelConfig& c) {
  c.vocab_size = f.get_int("vocab_size", c.vocab_size, 1, kMaxDim);
  c.hidden_size = f.get_int("hidden_size", c.hidden_size, 1, kMaxDim);
  c.num_hidden_layers = f.get_int("num_hidden_layers", c.num_hidden_layers, 1, kMaxLayers);
  c.num_attention_heads = f.get_int("num_attention_heads", c.num_attention_heads, 1, kMaxDim);
  c.num_key_value_heads = f.get_int("num_key_value_heads", c.num_key_value_heads, 1, kMaxDim);
  c.head_dim = f.get_int("head_dim", c.head_dim, 1, kMaxDim);
  c.qk_rope_head_dim = f.get_int("qk_rope_head_dim", c.qk_rope_head_dim, 1, kMaxDim);
  c.q_lora_rank = f.get_int("q_lora_rank", c.q_lora_rank, 1, kMaxDim);
  c.o_groups = f.get_int("o_groups", c.o_groups, 1, kMaxDim);
  c.o_lora_rank = f.get_int("o_lora_rank", c.o_lora_rank, 1, kMaxDim);
  c.sliding_window = f.get_int("sliding_window", c.sliding_window, 1, kMaxPositions);
  c.max_position_embeddings = f.get_int("max_position_embeddings", c.max_position_embeddings, 1, kMaxPositions);

  c.candidate_topk_blocks = f.get_int("candidate_topk_blocks", c.candidate_topk_blocks, 1, kMaxPositions);
  c.candidate_block_size = f.get_int("candidate_block_size", c.candidate_block_size, 1, kMaxPositions);
  c.index_n_heads = f.get_int("index_n_heads", c.index_n_heads, 1, kMaxDim);
  c.index_head_dim = f.get_int("index_head_dim", c.index_head_dim, 1, kMaxDim);
  c.index_topk = f.get_int("index_topk", c.index_topk, 1, kMaxPositions);

  c.moe_intermediate_size = f.get_int("moe_intermediate_size", c.moe_intermediate_size, 1, kMaxDim);
  c.n_routed_experts = f.get_int("n_routed_experts", c.n_routed_experts, 1, kMaxDim);
  c.num_experts_per_tok = f.get_int("num_experts_per_tok", c.num_experts_per_tok, 1, kMaxDim);
  // The reference always builds exactly one shared expert; the count is informational.
  c.n_shared_experts = f.get_int("n_shared_experts", c.n_shared_experts, 0, kMaxDim);
  c.scoring_func = f.get_string("scoring_func", c.scoring_func);
  c.topk_method = f.get_string("topk_method", c.topk_method);
  c.gate_temp = f.get_number("gate_temp", c.gate_temp);
  c.norm_topk_prob = f.get_bool("norm_topk_prob", c.norm_topk_prob);
  c.routed_scaling_factor = f.get_number("routed_scaling_factor", c.routed_scaling_factor);
  c.swiglu_limit = f.get_number("swiglu_limit", c.swiglu_limit);
  c.hidden_act = f.get_string("hidden_act", c.hidden_act);

  c.hc_mult = f.get_int("hc_mult", c.hc_mult, 1, 64);
  c.hc_sinkhorn_iters = f.get_int("hc_sinkhorn_iters", c.hc_sinkhorn_iters, 1, 10000);
  c.hc_eps = f.get_number("hc_eps", c.hc_eps);
  c.rms_norm_eps = f.get_number("rms_norm_eps", c.rms_norm_eps);

  c.engram_vocab_size = f.get_int("engram_vocab_size", c.engram_vocab_size, 1, kMaxTableRows);
  c.engram_max_ngram_size = f.get_int("engram_max_ngram_size", c.engram_max_ngram_size, 1, 64);
  c.engram_n_heads = f.get_int("engram_n_heads", c.engram_n_heads, 1, 1024);
  c.engram_head_dim = f.get_int("engram_head_dim", c.engram_head_dim, 1, kMaxDim);
  c.engram_compressed_vocab_size =
      f.get_int("engram_compressed_vocab_size", c.engram_compressed_vocab_size, 1, kMaxDim);
  // The reference's field is `engram_pad_id`; the released config.json may spell it
  // `engram_pad_token_id`. Both are accepted, and must agree when both are given.
  std::optional<int64_t> pad = f.get_opt_int("engram_pad_id");
  std::optional<int64_t> pad_alias = f.get_opt_int("engram_pad_token_id");
  if (pad && pad_alias) {
    f.require(*pad == *pad_alias, "engram_pad_token_id", str_cat("must equal engram_pad_id ", *pad), *pad_alias);
  }
  if (pad) c.engram_pad_id = *pad;
  else if (pad_alias) c.engram_pad_id = *pad_alias;
  f.require(c.engram_pad_id >= 0, pad || !pad_alias ? "engram_pad_id" : "engram_pad_token_id",
            "must be a token id", c.engram_pad_id);

  c.num_nextn_predict_layers = f.get_int("num_nextn_predict_layers", c.num_nextn_predict_layers, 0, 64);
  c.dspark_block_size = f.get_int("dspark_block_size", c.dspark_block_size, 1, 1024);
  c.dspark_noise_token_id = f.get_int("dspark_noise_token_id", c.dspark_noise_token_id, 0, kMaxDim);
  c.dspark_markov_rank = f.get_int("dspark_markov_rank", c.dspark_markov_rank, 1, kMaxDim);
  c.dspark_n_routed_experts = f.get_int("dspark_n_routed_experts", c.dspark_n_routed_experts, 1, kMaxDim);
  c.dspark_num_experts_per_tok =
      f.get_int("dspark_num_experts_per_tok", c.dspark_num_experts_per_tok, 1, kMaxDim);

  // Special token ids: the reference only warns when they fall outside the vocabulary.
  if (auto bos = f.get_opt_int("bos_token_id")) c.bos_token_id = *bos;
  if (auto pad_token = f.get_opt_int("pad_token_id")) c.pad_token_id = *pad_token;
  if (const Json* eos = f.find("eos_token_id")) {
    if (eos->is_array()) {
      f.require(!eos->empty(), "eos_token_id", "must not be an empty list", show(*eos));
      f.require(eos->size() <= 1024, "eos_token_id", "has too many entries", eos->size());
      c.eos_token_ids.clear();
      for (size_t i = 0; i < eos->size(); ++i) {
        c.eos_token_ids.push_back(f.to_int((*eos)[i], str_cat("eos_token_id[", i, "]")));
      }
    } else {
      c.eos_token_ids = {f.to_int(*eos, "eos_token_id")};
    }
    c.eos_token_id = c.eos_token_ids.front();
  }
  c.tie_word_embeddings = f.get_bool("tie_word_embeddings", c.tie_word_embeddings);
}

void read_schedule_fields(const Fields& f, RawSchedule& raw) {
  raw.compress_ratios = f.get_int_list("compress_ratios");
  raw.kv_sources = f.get_int_list("kv_source_layer_ids");
  raw.index_sources = f.get_int_list("index_source_layer_ids");
  raw.candidate_source = f.get_opt_int("candidate_source_layer_id");
  raw.engram_layers = f.get_int_list("engram_layer_ids");
  raw.engram_num_embeddings = f.get_int_list("engram_num_embeddings");
  raw.dspark_targets = f.get_int_list("dspark_target_layer_ids");
}

// Lists of layer ids the engine walks in order: in range and strictly increasing
// (the reference accepts any order, but its own defaults are always sorted).
void check_layer_list(const Fields& f, const std::string& name, const std::vector<int64_t>& ids, int64_t n) {
  for (size_t i = 0; i < ids.size(); ++i) {
    f.require(ids[i] >= 0 && ids[i] < n, name, str_cat("entries must be layer ids in [0, ", n, ")"), show(ids));
    f.require(i == 0 || ids[i] > ids[i - 1], name, "must be strictly increasing", show(ids));
  }
}

// compress_ratios, KV / index / candidate sources and DSpark targets, in the order
// and with the defaults of the reference's __post_init__.
void derive_schedule(const Fields& f, const RawSchedule& raw, ModelConfig& c) {
  const int64_t n = c.num_hidden_layers;
  const int64_t n_nextn = c.num_nextn_predict_layers;
  const auto& released = default_compress_ratios();

  std::vector<int64_t> ratios;
  if (raw.compress_ratios) {
    ratios = *raw.compress_ratios;
  } else if (n == int64_t(released.size())) {
    ratios = released;
  } else {
    // The released pattern scaled to n layers: 2 window-only layers, a ratio-2
    // "encoder" of ceil((n-2)/2) layers, ratio-1 "decoder" for the rest.
    int64_t n_slide = std::min<int64_t>(2, n);
    int64_t n_enc = std::max<int64_t>(0, (n - n_slide + 1) / 2);
    ratios.assign(size_t(n_slide), 0);
    ratios.insert(ratios.end(), size_t(n_enc), 2);
    ratios.insert(ratios.end(), size_t(std::max<int64_t>(0, n - n_slide - n_enc)), 1);
  }
  f.require(int64_t(ratios.size()) >= n, "compress_ratios",
            str_cat("needs num_hidden_layers (", n, ") entries, plus up to num_nextn_predict_layers (", n_nextn,
                    ") draft entries"),
            str_cat(ratios.size(), " entries"));
  f.require(int64_t(ratios.size()) <= n + n_nextn, "compress_ratios",
            str_cat("has more entries than num_hidden_layers + num_nextn_predict_layers = ", n + n_nextn),
            str_cat(ratios.size(), " entries"));
  for (size_t i = 0; i < ratios.size(); ++i) {
    // Any ratio >= 0 is meaningful to the reference (r > 1 pools r tokens).
    f.require(ratios[i] >= 0 && ratios[i] <= kMaxDim, "compress_ratios",
              str_cat("entries must be in [0, ", kMaxDim, "]"), str_cat(ratios[i], " at layer ", i));
    // DSpark draft layers are window-only; the reference documents this but does not
    // check it, and nothing defines a compressed draft layer.
    f.require(int64_t(i) < n || ratios[i] == 0, "compress_ratios", "draft-layer entries must be 0",
              str_cat(ratios[i], " at layer ", i));
  }
  ratios.resize(size_t(n));
  c.compress_ratios = ratios;

  bool released_prefix = n <= int64_t(released.size()) && std::equal(ratios.begin(), ratios.end(), released.begin());
  if (raw.kv_sources) {
    c.kv_source_layer_ids = *raw.kv_sources;
  } else if (released_prefix) {
    c.kv_source_layer_ids = kDefaultKvSources;
  } else {
    // The first layer of each run of equal nonzero ratios publishes for the run.
    c.kv_source_layer_ids.clear();
    for (int64_t i = 0; i < n; ++i) {
      if (ratios[size_t(i)] > 0 && (i == 0 || ratios[size_t(i - 1)] != ratios[size_t(i)])) {
        c.kv_source_layer_ids.push_back(i);
      }
    }
  }
  if (raw.index_sources) {
    c.index_source_layer_ids = *raw.index_sources;
  } else {
    c.index_source_layer_ids =
        c.kv_source_layer_ids == kDefaultKvSources ? kDefaultIndexSources : c.kv_source_layer_ids;
  }
  if (raw.dspark_targets) {
    c.dspark_target_layer_ids = *raw.dspark_targets;
  } else {
    // The last three layers that are not KV sources, ascending.
    std::vector<int64_t> others;
    for (int64_t i = 0; i < n; ++i) {
      if (!contains(c.kv_source_layer_ids, i)) others.push_back(i);
    }
    size_t keep = std::min<size_t>(3, others.size());
    c.dspark_target_layer_ids.assign(others.end() - std::ptrdiff_t(keep), others.end());
  }

  const auto& kv = c.kv_source_layer_ids;
  const auto& index = c.index_source_layer_ids;
  check_layer_list(f, "kv_source_layer_ids", kv, n);
  for (int64_t s : kv) {
    f.require(ratios[size_t(s)] > 0, "kv_source_layer_ids", "each source needs compress_ratios[layer] > 0",
              str_cat("layer ", s, " with ratio 0"));
  }
  // The reference does not range-check index sources (a negative id would wrap).
  check_layer_list(f, "index_source_layer_ids", index, n);
  for (int64_t s : index) {
    f.require(ratios[size_t(s)] > 0, "index_source_layer_ids", "each source needs compress_ratios[layer] > 0",
              str_cat("layer ", s, " with ratio 0"));
    f.require(!kv.empty() && kv.front() <= s, "index_source_layer_ids",
              "each source needs a kv_source_layer_ids entry at or before it", str_cat("layer ", s));
  }
  // Indexer keys are projected by the KV source's own indexer: a KV source that does
  // not index leaves its group scoring the previous group's keys (the reference
  // accepts this and then mixes the two groups' caches).
  for (int64_t s : kv) {
    f.require(contains(index, s), "index_source_layer_ids", "must include every KV source",
              str_cat("KV source ", s, " missing from ", show(index)));
  }

  c.candidate_source_layer_id = raw.candidate_source ? *raw.candidate_source : (kv.empty() ? -1 : kv.back());
  if (c.candidate_source_layer_id < 0) c.candidate_source_layer_id = -1;
  if (c.candidate_source_layer_id >= 0) {
    f.require(contains(index, c.candidate_source_layer_id), "candidate_source_layer_id",
              str_cat("must be one of index_source_layer_ids ", show(index), " or negative"),
              c.candidate_source_layer_id);
  }

  for (int64_t i = 0; i < n; ++i) {
    if (ratios[size_t(i)] == 0) continue;
    int64_t src = c.kv_source_for(i);
    f.require(src >= 0, "kv_source_layer_ids",
              "every layer with compress_ratios > 0 needs a KV source at or before it", str_cat("layer ", i));
    // The reference lets a layer read a source of another ratio, but positions and
    // visibility are then computed with two different ratios; nothing defines that.
    f.require(ratios[size_t(src)] == ratios[size_t(i)], "compress_ratios",
              str_cat("layer ", i, " must have the ratio of its KV source ", src, " (", ratios[size_t(src)], ")"),
              ratios[size_t(i)]);
  }
  // The candidate mask covers the candidate source's compressed cache; a later index
  // source reading another KV source would apply it to a different cache.
  if (c.candidate_source_layer_id >= 0) {
    int64_t group = c.kv_source_for(c.candidate_source_layer_id);
    for (int64_t s : index) {
      if (s <= c.candidate_source_layer_id) continue;
      f.require(c.kv_source_for(s) == group, "candidate_source_layer_id",
                str_cat("index sources after it must share its KV source ", group),
                str_cat(c.candidate_source_layer_id, "; index source ", s, " reads KV source ", c.kv_source_for(s)));
    }
  }

  for (int64_t t : c.dspark_target_layer_ids) {
    f.require(t >= 0 && t < n, "dspark_target_layer_ids", str_cat("entries must be layer ids in [0, ", n, ")"),
              show(c.dspark_target_layer_ids));
  }
}

void derive_engram(const Fields& f, const RawSchedule& raw, ModelConfig& c) {
  c.engram_layer_ids = raw.engram_layers.value_or(std::vector<int64_t>{});
  check_layer_list(f, "engram_layer_ids", c.engram_layer_ids, c.num_hidden_layers);
  // The reference fills zeros when absent; a zero-row table fails at the first lookup,
  // so real rows are required as soon as an engram layer exists.
  c.engram_num_embeddings =
      raw.engram_num_embeddings.value_or(std::vector<int64_t>(c.engram_layer_ids.size(), 0));
  f.require(c.engram_num_embeddings.size() == c.engram_layer_ids.size(), "engram_num_embeddings",
            str_cat("must have one entry per engram_layer_ids entry (", c.engram_layer_ids.size(), ")"),
            str_cat(c.engram_num_embeddings.size(), " entries"));
  for (int64_t rows : c.engram_num_embeddings) {
    f.require(rows > 0 && rows <= kMaxTableRows, "engram_num_embeddings",
              str_cat("entries must be in [1, ", kMaxTableRows, "]"), show(c.engram_num_embeddings));
  }
  if (!c.engram_layer_ids.empty()) {
    // Like the DSpark noise token, the pad id is only looked up when the module exists.
    f.require(c.engram_pad_id < c.vocab_size, "engram_pad_id",
              str_cat("must be a token id below vocab_size ", c.vocab_size), c.engram_pad_id);
    f.require(c.engram_max_ngram_size >= 2, "engram_max_ngram_size", "must be >= 2 when engram layers exist",
              c.engram_max_ngram_size);
  }
}

// One rope sub-dict, after the reference's standardization. `name` prefixes errors.
RopeParams read_rope_dict(const Fields& top, const Json& d, const std::string& name, const ModelConfig& c,
                          double default_theta, bool default_original_max, bool derived) {
  Fields f(d, top.origin(), str_cat(top.prefix(), name, "."));
  RopeParams p;
  // An explicit "rope_type" wins; "type" (the V3/V4 spelling) is honoured only by the
  // standardization of nested dicts. The dict derived from `rope_scaling` sets
  // rope_type "default" before anything looks at "type": transformers then runs
  // without YaRN, and so do we.
  std::string type = "default";
  if (const Json* t = f.find("rope_type")) {
    f.require(t->is_string(), "rope_type", "must be a string", show(*t));
    type = t->get<std::string>();
  } else if (const Json* t2 = f.find("type"); t2 && !derived) {
    f.require(t2->is_string(), "type", "must be a string", show(*t2));
    type = t2->get<std::string>();
  }
  f.require(type == "default" || type == "yarn", "rope_type", "must be \"default\" or \"yarn\"", "\"" + type + "\"");
  p.yarn = type == "yarn";

  // partial_rotary_factor decides how many trailing channels rotate; it must name
  // exactly qk_rope_head_dim of them (the reference defaults it to 1.0: whole head).
  double partial = derived ? double(c.qk_rope_head_dim) / double(c.head_dim) : 1.0;
  if (const Json* pr = f.find("partial_rotary_factor"); pr && !derived) {
    partial = f.to_number(*pr, "partial_rotary_factor");
  }
  double rotary = double(c.head_dim) * partial;
  f.require(rotary >= 0 && rotary < double(kMaxDim) && int64_t(rotary) == c.qk_rope_head_dim,
            "partial_rotary_factor",
            str_cat("must rotate qk_rope_head_dim (", c.qk_rope_head_dim, ") of head_dim (", c.head_dim,
                    ") channels"),
            partial);

  // The derived compress dict takes compress_rope_theta whatever rope_scaling says.
  p.theta = default_theta;
  if (const Json* th = f.find("rope_theta"); th && !derived) {
    p.theta = f.to_number(*th, "rope_theta");
    f.require(p.theta > 0, "rope_theta", "must be positive", p.theta);
  }
  if (!p.yarn) return p;

  // YaRN's correction range divides by ln(theta).
  if (derived) {
    top.require(p.theta > 1, "compress_rope_theta", "must be > 1 for YaRN", p.theta);
  } else {
    f.require(p.theta > 1, "rope_theta", "must be > 1 for YaRN", p.theta);
  }
  const Json* omax = f.find("original_max_position_embeddings");
  if (omax) {
    p.original_max_position_embeddings = f.to_int(*omax, "original_max_position_embeddings");
    f.check_range("original_max_position_embeddings", p.original_max_position_embeddings, 1, kMaxPositions);
  } else {
    f.require(default_original_max, "original_max_position_embeddings", "is required for YaRN", "missing");
    p.original_max_position_embeddings = c.max_position_embeddings;
  }
  auto it = d.find("factor");
  f.require(it != d.end(), "factor", "is required for YaRN", "missing");
  // A null factor means max_position_embeddings / original_max_position_embeddings.
  p.factor = it->is_null() ? double(c.max_position_embeddings) / double(p.original_max_position_embeddings)
                           : f.to_number(*it, "factor");
  f.require(p.factor > 0, "factor", "must be positive", p.factor);
  // `get(...) or default`: a null or zero beta falls back to the default.
  p.beta_fast = 32.0;
  if (const Json* b = f.find("beta_fast"); b && f.to_number(*b, "beta_fast") != 0) p.beta_fast = b->get<double>();
  p.beta_slow = 1.0;
  if (const Json* b = f.find("beta_slow"); b && f.to_number(*b, "beta_slow") != 0) p.beta_slow = b->get<double>();
  f.require(p.beta_fast > 0, "beta_fast", "must be positive", p.beta_fast);
  f.require(p.beta_slow > 0, "beta_slow", "must be positive", p.beta_slow);

  auto mscale_of = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
  if (const Json* af = f.find("attention_factor")) {
    p.attention_factor = f.to_number(*af, "attention_factor");
    f.require(p.attention_factor >= 0, "attention_factor", "must be >= 0", p.attention_factor);
  } else if (derived) {
    p.attention_factor = 1.0;  // V4.1 forces it: the reference model applies no mscale
  } else {
    double m = 0, m_all = 0;
    if (const Json* v = f.find("mscale")) m = f.to_number(*v, "mscale");
    if (const Json* v = f.find("mscale_all_dim")) m_all = f.to_number(*v, "mscale_all_dim");
    p.attention_factor = (m != 0 && m_all != 0) ? mscale_of(p.factor, m) / mscale_of(p.factor, m_all)
                                                : mscale_of(p.factor, 1.0);
    f.require(std::isfinite(p.attention_factor), "mscale_all_dim", "gives a non-finite attention factor", m_all);
  }
  return p;
}

void read_rope(const Fields& f, ModelConfig& c) {
  double rope_theta = f.get_number("rope_theta", 10000.0);
  double compress_theta = f.get_number("compress_rope_theta", 160000.0);
  f.require(rope_theta > 0, "rope_theta", "must be positive", rope_theta);
  f.require(compress_theta > 0, "compress_rope_theta", "must be positive", compress_theta);

  // A nested {"main": {...}, "compress": {...}} (what save_pretrained writes) is used
  // as is; anything else is rebuilt from the checkpoint's flat fields.
  const Json* rp = f.find("rope_parameters");
  if (rp) {
    f.require(rp->is_object(), "rope_parameters", "must be an object", show(*rp));
    for (const char* key : {"main", "compress"}) {
      auto it = rp->find(key);
      f.require(it == rp->end() || it->is_null() || it->is_object(), str_cat("rope_parameters.", key),
                "must be an object", it == rp->end() ? std::string() : show(*it));
    }
    auto main = rp->find("main");
    auto compress = rp->find("compress");
    if (main != rp->end() && main->is_object() && compress != rp->end() && compress->is_object()) {
      // Standardization fills each nested dict's missing rope_theta with the top-level
      // rope_theta, for the compress rope too.
      c.main_rope = read_rope_dict(f, *main, "rope_parameters.main", c, rope_theta, true, false);
      c.compress_rope = read_rope_dict(f, *compress, "rope_parameters.compress", c, rope_theta, true, false);
      return;
    }
  }

  // The compress dict is rope_scaling minus any "main"/"compress" keys, which the
  // reads below never look at anyway.
  static const Json kEmpty = Json::object();
  const Json* rs = f.find("rope_scaling");
  if (rs) f.require(rs->is_object(), "rope_scaling", "must be an object", show(*rs));
  c.main_rope = RopeParams{};
  c.main_rope.theta = rope_theta;
  c.compress_rope = read_rope_dict(f, rs ? *rs : kEmpty, "rope_scaling", c, compress_theta, false, true);
}

void read_quant(const Json& root, const std::string& origin, ModelConfig& c) {
  Fields top(root, origin, "");
  const Json* q = top.find("quantization_config");
  if (!q) return;
  top.require(q->is_object(), "quantization_config", "must be an object", show(*q));
  Fields f(*q, origin, "quantization_config.");
  QuantConfig& qc = c.quant;
  qc.present = true;
  // Defaults are transformers' FineGrainedFP8Config's.
  qc.quant_method = f.get_string("quant_method", "fp8");
  f.require(qc.quant_method == "fp8", "quant_method", "only \"fp8\" is supported", "\"" + qc.quant_method + "\"");
  qc.activation_scheme = f.get_string("activation_scheme", "dynamic");
  std::transform(qc.activation_scheme.begin(), qc.activation_scheme.end(), qc.activation_scheme.begin(),
                 [](unsigned char ch) { return char(std::tolower(ch)); });
  f.require(qc.activation_scheme == "dynamic" || qc.activation_scheme == "static", "activation_scheme",
            "must be \"dynamic\" or \"static\"", shorten("\"" + qc.activation_scheme + "\""));
  if (const Json* wb = f.find_strict("weight_block_size")) {
    bool ok = wb->is_array() && wb->size() == 2 && (*wb)[0].is_number_integer() && (*wb)[1].is_number_integer();
    f.require(ok, "weight_block_size", "must be a list of two positive integers", show(*wb));
    qc.weight_block_rows = f.to_int((*wb)[0], "weight_block_size[0]");
    qc.weight_block_cols = f.to_int((*wb)[1], "weight_block_size[1]");
    f.require(qc.weight_block_rows > 0 && qc.weight_block_cols > 0 && qc.weight_block_rows <= kMaxDim &&
                  qc.weight_block_cols <= kMaxDim,
              "weight_block_size", "must be a list of two positive integers", show(*wb));
  }
  qc.scale_fmt = f.get_string("scale_fmt", "float");
  f.require(qc.scale_fmt == "float" || qc.scale_fmt == "ue8m0", "scale_fmt", "must be \"float\" or \"ue8m0\"",
            shorten("\"" + qc.scale_fmt + "\""));
  qc.expert_dtype = f.get_string("expert_dtype", "fp8");
  f.require(qc.expert_dtype == "fp8" || qc.expert_dtype == "fp4", "expert_dtype", "must be \"fp8\" or \"fp4\"",
            shorten("\"" + qc.expert_dtype + "\""));
}

// Cross-field rules on the scalar fields.
void validate_scalars(const Fields& f, const ModelConfig& c) {
  f.require(c.head_dim % 2 == 0, "head_dim", "must be even (RoPE rotates channel pairs)", c.head_dim);
  f.require(c.qk_rope_head_dim % 2 == 0, "qk_rope_head_dim", "must be even", c.qk_rope_head_dim);
  f.require(c.qk_rope_head_dim <= c.head_dim, "qk_rope_head_dim", str_cat("must be <= head_dim ", c.head_dim),
            c.qk_rope_head_dim);
  f.require(c.index_head_dim >= c.qk_rope_head_dim, "index_head_dim",
            str_cat("must be >= qk_rope_head_dim ", c.qk_rope_head_dim), c.index_head_dim);
  f.require(c.num_attention_heads % c.o_groups == 0, "o_groups",
            str_cat("must divide num_attention_heads ", c.num_attention_heads), c.o_groups);
  f.require(c.num_experts_per_tok <= c.n_routed_experts, "num_experts_per_tok",
            str_cat("must be <= n_routed_experts ", c.n_routed_experts), c.num_experts_per_tok);
  f.require(c.dspark_num_experts_per_tok <= c.dspark_n_routed_experts, "dspark_num_experts_per_tok",
            str_cat("must be <= dspark_n_routed_experts ", c.dspark_n_routed_experts), c.dspark_num_experts_per_tok);
  // Only a model with DSpark stages ever embeds the noise token (tiny test configs
  // without draft layers keep the released default id).
  f.require(c.num_nextn_predict_layers == 0 || c.dspark_noise_token_id < c.vocab_size, "dspark_noise_token_id",
            str_cat("must be a token id below vocab_size ", c.vocab_size), c.dspark_noise_token_id);
  f.require(c.scoring_func == "sqrtsoftplus" || c.scoring_func == "softmax" || c.scoring_func == "sigmoid",
            "scoring_func", "must be \"sqrtsoftplus\", \"softmax\" or \"sigmoid\"",
            shorten("\"" + c.scoring_func + "\""));
  f.require(c.hidden_act == "silu", "hidden_act", "only \"silu\" is supported", shorten("\"" + c.hidden_act + "\""));
  f.require(c.gate_temp > 0, "gate_temp", "must be positive", c.gate_temp);
  f.require(c.hc_eps >= 0, "hc_eps", "must be >= 0", c.hc_eps);
  f.require(c.rms_norm_eps >= 0, "rms_norm_eps", "must be >= 0", c.rms_norm_eps);
}

Json parse_json(const std::string& text, const std::string& origin) {
  try {
    return Json::parse(text);
  } catch (const Json::exception& e) {
    // parse_error, and out_of_range for numbers beyond double's range.
    throw InputError(str_cat(origin, ": config is not valid JSON: ", e.what()));
  }
}

std::string json_kind(const Json& v) { return v.type_name(); }

constexpr const char* kModelTypeRule =
    "must be \"deepseek_v41\" or \"deepseek_v41_text\" (deepseek_v4 is not yet supported)";

}  // namespace

ModelConfig parse_model_config(const std::string& json_text, const std::string& origin) {
  Json root = parse_json(json_text, origin);
  DI_CHECK_INPUT(root.is_object(), origin, ": config must be a JSON object (got ", json_kind(root), ")");
  Fields top(root, origin, "");
  const Json* mt = top.find("model_type");
  top.require(mt != nullptr, "model_type", kModelTypeRule, "missing");
  top.require(mt->is_string(), "model_type", "must be a string", show(*mt));
  std::string model_type = mt->get<std::string>();
  if (model_type == "deepseek_v4" || model_type == "deepseek_v4_text") {
    top.fail("model_type",
             "DeepSeek-V4 configs are not yet supported; expected \"deepseek_v41\" or \"deepseek_v41_text\"",
             show(*mt));
  }
  top.require(model_type == "deepseek_v41" || model_type == "deepseek_v41_text", "model_type", kModelTypeRule,
              show(*mt));

  ModelConfig c;
  c.model_type = "deepseek_v41_text";
  const Json* text = &root;
  std::string prefix;
  if (model_type == "deepseek_v41") {
    // The released composite config; its vision_config is not ours to read.
    const Json* tc = top.find("text_config");
    top.require(tc != nullptr, "text_config", "composite deepseek_v41 configs need a text_config object", "missing");
    top.require(tc->is_object(), "text_config", "must be an object", show(*tc));
    text = tc;
    prefix = "text_config.";
    c.image_token_id = top.get_int("image_token_id", 129264, 0, kMaxDim);
  }
  Fields f(*text, origin, prefix);
  if (text != &root) {
    if (const Json* tmt = f.find("model_type")) {
      f.require(tmt->is_string() && tmt->get<std::string>() == "deepseek_v41_text", "model_type",
                "must be \"deepseek_v41_text\"", show(*tmt));
    }
  }

  read_scalars(f, c);
  validate_scalars(f, c);
  RawSchedule raw;
  read_schedule_fields(f, raw);
  derive_schedule(f, raw, c);
  derive_engram(f, raw, c);
  read_rope(f, c);
  read_quant(root, origin, c);
  return c;
}

ModelConfig load_model_config(const std::string& path) {
  std::error_code ec;
  DI_CHECK_INPUT(std::filesystem::is_regular_file(path, ec), path, ": config file not found or not a regular file");
  auto size = std::filesystem::file_size(path, ec);
  DI_CHECK_INPUT(!ec, path, ": cannot read config file size");
  DI_CHECK_INPUT(size <= kMaxConfigBytes, path, ": config file is too large (", size, " bytes)");
  std::ifstream in(path, std::ios::binary);
  DI_CHECK_INPUT(in.good(), path, ": cannot open config file");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  DI_CHECK_INPUT(!in.bad(), path, ": error reading config file");
  return parse_model_config(text, path);
}

bool ModelConfig::is_kv_source(int64_t layer) const { return contains(kv_source_layer_ids, layer); }

bool ModelConfig::is_index_source(int64_t layer) const { return contains(index_source_layer_ids, layer); }

bool ModelConfig::is_engram_layer(int64_t layer) const { return contains(engram_layer_ids, layer); }

static int64_t nearest_at_or_before(const std::vector<int64_t>& sorted_ids, int64_t layer) {
  auto it = std::upper_bound(sorted_ids.begin(), sorted_ids.end(), layer);
  return it == sorted_ids.begin() ? -1 : *(it - 1);
}

int64_t ModelConfig::kv_source_for(int64_t layer) const { return nearest_at_or_before(kv_source_layer_ids, layer); }

int64_t ModelConfig::index_source_for(int64_t layer) const {
  return nearest_at_or_before(index_source_layer_ids, layer);
}

int64_t ModelConfig::compress_ratio(int64_t layer) const {
  return layer >= 0 && layer < int64_t(compress_ratios.size()) ? compress_ratios[size_t(layer)] : 0;
}

const RopeParams& ModelConfig::rope_for(int64_t layer) const {
  return compress_ratio(layer) > 0 ? compress_rope : main_rope;
}

int64_t ModelConfig::engram_slot(int64_t layer) const {
  auto it = std::find(engram_layer_ids.begin(), engram_layer_ids.end(), layer);
  return it == engram_layer_ids.end() ? -1 : int64_t(it - engram_layer_ids.begin());
}

bool ModelConfig::is_candidate_source(int64_t layer) const {
  return candidate_source_layer_id >= 0 && layer == candidate_source_layer_id;
}

bool ModelConfig::uses_candidate_mask(int64_t layer) const {
  return candidate_source_layer_id >= 0 && layer > candidate_source_layer_id && is_index_source(layer);
}

}  // namespace deepinfer
