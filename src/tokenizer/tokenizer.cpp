#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/check.h"
#include "tokenizer/bpe.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/encoder.h"
#include "tokenizer/hf_normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

namespace {

using nlohmann::json;

constexpr int kMaxDecoderDepth = 16;

int64_t token_id(const json& value, const std::string& origin, const std::string& what) {
  DI_CHECK_INPUT(value.is_number_integer(), origin, ": ", what, " must be an integer id");
  DI_CHECK_INPUT(value.is_number_unsigned() && value.get<uint64_t>() <= uint64_t(Tokenizer::kMaxTokenId), origin,
                 ": ", what, " has id ", value.dump(), ", outside [0, ", Tokenizer::kMaxTokenId, "]");
  return int64_t(value.get<uint64_t>());
}

// The decoder as a count of ByteLevel steps; every other decoder type is refused.
void count_byte_level(const json& spec, const std::string& origin, int depth, int* steps) {
  DI_CHECK_INPUT(depth < kMaxDecoderDepth, origin, ": decoder Sequence nested too deeply");
  DI_CHECK_INPUT(spec.is_object() && spec.contains("type") && spec["type"].is_string(), origin,
                 ": decoder must be an object with a string 'type'");
  const std::string type = spec["type"].get<std::string>();
  if (type == "ByteLevel") {
    ++*steps;
  } else if (type == "Sequence") {
    DI_CHECK_INPUT(spec.contains("decoders") && spec["decoders"].is_array(), origin,
                   ": decoder Sequence needs an array 'decoders'");
    for (const auto& child : spec["decoders"]) count_byte_level(child, origin, depth + 1, steps);
  } else {
    DI_CHECK_INPUT(false, origin, ": decoder type '", type, "' is not supported (byte-level BPE only)");
  }
}

// The merges list: ["a b", ...] (lines starting with "#version" are skipped) or
// [["a", "b"], ...], never a mix (the Rust library refuses both the same way).
std::vector<std::pair<std::string, std::string>> parse_merges(const json& merges, const std::string& origin) {
  DI_CHECK_INPUT(merges.is_array(), origin, ": model.merges must be an array");
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(merges.size());
  const bool pairs = !merges.empty() && merges[0].is_array();
  for (const auto& m : merges) {
    if (pairs) {
      DI_CHECK_INPUT(m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string(), origin,
                     ": model.merges entry ", out.size() + 1, " must be a pair of strings");
      out.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
    } else {
      DI_CHECK_INPUT(m.is_string(), origin, ": model.merges entry ", out.size() + 1, " must be a string");
      const std::string& line = m.get_ref<const std::string&>();
      if (line.rfind("#version", 0) == 0) continue;
      const size_t space = line.find(' ');
      DI_CHECK_INPUT(space != std::string::npos && line.find(' ', space + 1) == std::string::npos, origin,
                     ": model.merges entry ", out.size() + 1, " is not two tokens separated by one space");
      out.emplace_back(line.substr(0, space), line.substr(space + 1));
    }
  }
  return out;
}

bool optional_bool(const json& obj, const char* key, bool fallback, const std::string& origin) {
  const auto it = obj.find(key);
  if (it == obj.end()) return fallback;
  DI_CHECK_INPUT(it->is_boolean(), origin, ": added token field '", key, "' must be a boolean");
  return it->get<bool>();
}

// A model field that is a string or null (absent: null).
std::optional<std::string> optional_string(const json& model, const char* key, const std::string& origin) {
  const auto it = model.find(key);
  if (it == model.end() || it->is_null()) return std::nullopt;
  DI_CHECK_INPUT(it->is_string(), origin, ": model.", key, " must be a string");
  return it->get<std::string>();
}

bool model_bool(const json& model, const char* key, const std::string& origin) {
  const auto it = model.find(key);
  if (it == model.end() || it->is_null()) return false;
  DI_CHECK_INPUT(it->is_boolean(), origin, ": model.", key, " must be a boolean");
  return it->get<bool>();
}

}  // namespace

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DI_CHECK_INPUT(in.good(), path, ": cannot open tokenizer file");
  std::ostringstream ss;
  ss << in.rdbuf();
  DI_CHECK_INPUT(!in.bad(), path, ": cannot read tokenizer file");
  return from_json(ss.str(), path);
}

Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_json(const std::string& json_text, const std::string& origin) {
  std::unique_ptr<Tokenizer> t(new Tokenizer());
  t->parse(json_text, origin);
  return t;
}

void Tokenizer::parse(const std::string& json_text, const std::string& origin) {
  const json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  DI_CHECK_INPUT(!root.is_discarded(), origin, ": not valid JSON");
  DI_CHECK_INPUT(root.is_object(), origin, ": the top level must be a JSON object");
  const auto model = root.find("model");
  DI_CHECK_INPUT(model != root.end() && model->is_object(), origin, ": missing object 'model'");

  std::vector<const std::string*> model_token_of_id;
  BpeOptions bpe_options;
  const auto merges = parse_model(*model, origin, &model_token_of_id, &bpe_options);
  if (root.contains("decoder") && !root["decoder"].is_null()) {
    byte_level_steps_ = 0;
    count_byte_level(root["decoder"], origin, 0, &byte_level_steps_);
  }
  HfNormalizer normalizer = HfNormalizer::parse(root.contains("normalizer") ? root["normalizer"] : json());
  AddedTokens added;
  if (root.contains("added_tokens") && !root["added_tokens"].is_null()) {
    added = parse_added_tokens(root["added_tokens"], normalizer, origin);
  }

  // The per-id token string, added tokens first (AddedVocabulary::simple_id_to_token).
  hf_len_ = int64_t(vocab_.size());
  for (const auto& [content, id] : added_ids_) hf_len_ += vocab_.count(content) == 0 ? 1 : 0;
  int64_t size = int64_t(model_token_of_id.size());
  for (const auto& [id, tok] : added.by_id) size = std::max(size, id + 1);
  slot_of_id_.assign(size_t(size), -1);
  for (int64_t id = 0; id < size; ++id) {
    Slot slot;
    if (const auto it = added.by_id.find(id); it != added.by_id.end()) {
      const auto n = added.normalized_form.find(id);
      slot.token = n != added.normalized_form.end() ? n->second : it->second.content;
    } else if (id < int64_t(model_token_of_id.size()) && model_token_of_id[id] != nullptr) {
      slot.token = *model_token_of_id[id];
    } else {
      continue;
    }
    slot.special = added.special_contents.count(slot.token) != 0;
    slot_of_id_[id] = int32_t(slots_.size());
    slots_.push_back(std::move(slot));
  }
  build_encoder(root, added, std::move(normalizer), merges, std::move(bpe_options), origin);
}

void Tokenizer::build_encoder(const json& root, const AddedTokens& added, HfNormalizer normalizer,
                              const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
                              const std::string& origin) {
  // tokenizers matches each id's latest token; normalized ones by their normalized form.
  std::vector<AddedTokenSpec> plain, normalized;
  std::vector<int64_t> ids;
  for (const auto& [id, tok] : added.by_id) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (int64_t id : ids) {
    const AddedToken& tok = added.by_id.at(id);
    AddedTokenSpec spec;
    const auto n = added.normalized_form.find(id);
    spec.pattern = tok.normalized && n != added.normalized_form.end() ? n->second : tok.content;
    spec.id = id;
    spec.special = added.special_contents.count(tok.content) != 0;
    spec.single_word = tok.single_word;
    spec.lstrip = tok.lstrip;
    spec.rstrip = tok.rstrip;
    (tok.normalized ? normalized : plain).push_back(std::move(spec));
  }
  PreTokenizer pre = PreTokenizer::parse(root.contains("pre_tokenizer") ? root["pre_tokenizer"] : json(), origin);
  auto bpe = std::make_unique<BpeModel>(&vocab_, merges, std::move(options));
  encoder_ = std::make_unique<Encoder>(std::move(plain), std::move(normalized), std::move(normalizer),
                                       std::move(pre), std::move(bpe));
}

std::vector<int64_t> Tokenizer::encode(std::string_view text, bool allow_special) const {
  DI_CHECK_INPUT(is_valid_utf8(text), "text to encode is not valid UTF-8");
  std::vector<int64_t> ids;
  ids.reserve(text.size() / 3 + 1);
  encoder_->encode(text, allow_special, &ids);
  return ids;
}

std::vector<std::pair<std::string, std::string>> Tokenizer::parse_model(const json& model, const std::string& origin,
                                                                        std::vector<const std::string*>* token_of_id,
                                                                        BpeOptions* options) {
  if (model.contains("type")) {
    DI_CHECK_INPUT(model["type"] == "BPE", origin, ": model type ", model["type"].dump(),
                   " is not supported (byte-level BPE only)");
  }
  DI_CHECK_INPUT(model.contains("vocab") && model["vocab"].is_object(), origin, ": missing object 'model.vocab'");
  DI_CHECK_INPUT(model.contains("merges"), origin, ": missing 'model.merges'");
  if (model.contains("dropout") && !model["dropout"].is_null()) {
    const json& p = model["dropout"];
    DI_CHECK_INPUT(p.is_number() && p.get<double>() >= 0.0 && p.get<double>() <= 1.0, origin,
                   ": model.dropout must be a number in [0, 1]");
  }

  for (const auto& [token, value] : model["vocab"].items()) {
    const int64_t id = token_id(value, origin, "vocab token " + json(token).dump());
    if (id >= int64_t(token_of_id->size())) token_of_id->resize(size_t(id) + 1, nullptr);
    DI_CHECK_INPUT((*token_of_id)[id] == nullptr, origin, ": vocab id ", id, " is used by both ",
                   json(*(*token_of_id)[id]).dump(), " and ", json(token).dump());
    const auto [it, inserted] = vocab_.emplace(token, id);
    (*token_of_id)[id] = &it->first;
  }

  // Both parts of a merge and their concatenation (less the continuing-subword prefix
  // of the right part) must be vocabulary tokens, as the Rust BPE builder requires.
  std::string prefix;
  if (model.contains("continuing_subword_prefix") && !model["continuing_subword_prefix"].is_null()) {
    DI_CHECK_INPUT(model["continuing_subword_prefix"].is_string(), origin,
                   ": model.continuing_subword_prefix must be a string");
    prefix = model["continuing_subword_prefix"].get<std::string>();
  }
  const auto merges = parse_merges(model["merges"], origin);
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    for (const std::string* part : {&a, &b}) {
      DI_CHECK_INPUT(vocab_.count(*part), origin, ": merge ", rank + 1, " uses ", json(*part).dump(),
                     ", which is not in the vocabulary");
    }
    DI_CHECK_INPUT(b.size() >= prefix.size(), origin, ": merge ", rank + 1, " right part is shorter than the prefix");
    const std::string merged = a + b.substr(prefix.size());
    DI_CHECK_INPUT(vocab_.count(merged), origin, ": merge ", rank + 1, " makes ", json(merged).dump(),
                   ", which is not in the vocabulary");
  }
  options->continuing_subword_prefix = prefix;
  options->end_of_word_suffix = optional_string(model, "end_of_word_suffix", origin).value_or("");
  options->unk_token = optional_string(model, "unk_token", origin);
  options->fuse_unk = model_bool(model, "fuse_unk", origin);
  options->byte_fallback = model_bool(model, "byte_fallback", origin);
  options->ignore_merges = model_bool(model, "ignore_merges", origin);
  return merges;
}

// Added tokens get their ids exactly as tokenizers' AddedVocabulary::add_tokens assigns
// them when it loads a file: the id of the same content if known (added before, or in
// the model vocabulary), else the next id after the model vocabulary's size. The "id"
// written in the file is not used (the library only warns on a mismatch).
Tokenizer::AddedTokens Tokenizer::parse_added_tokens(const json& list, const HfNormalizer& normalizer,
                                                     const std::string& origin) {
  DI_CHECK_INPUT(list.is_array(), origin, ": 'added_tokens' must be an array");
  AddedTokens added;
  int64_t next_id = int64_t(vocab_.size());
  for (const json& entry : list) {
    DI_CHECK_INPUT(entry.is_object(), origin, ": every added token must be an object");
    DI_CHECK_INPUT(entry.contains("content") && entry["content"].is_string(), origin,
                   ": an added token has no string 'content'");
    DI_CHECK_INPUT(entry.contains("id"), origin, ": added token ", entry["content"].dump(), " has no 'id'");
    token_id(entry["id"], origin, "added token " + entry["content"].dump());
    AddedToken tok;
    tok.content = entry["content"].get<std::string>();
    tok.special = optional_bool(entry, "special", false, origin);
    tok.normalized = optional_bool(entry, "normalized", !tok.special, origin);
    tok.single_word = optional_bool(entry, "single_word", false, origin);
    tok.lstrip = optional_bool(entry, "lstrip", false, origin);
    tok.rstrip = optional_bool(entry, "rstrip", false, origin);
    if (tok.content.empty()) continue;
    int64_t id;
    if (const auto it = added_ids_.find(tok.content); it != added_ids_.end()) {
      if (added.by_id[it->second] == tok) continue;
      id = it->second;
    } else if (const auto iv = vocab_.find(tok.content); iv != vocab_.end()) {
      id = iv->second;
    } else {
      DI_CHECK_INPUT(next_id <= kMaxTokenId, origin, ": too many added tokens (id above ", kMaxTokenId, ")");
      id = next_id++;
    }
    // simple_id_to_token hands the decoder the normalized form of a normalized token.
    if (tok.normalized && !normalizer.is_identity()) {
      std::string normed = normalizer.normalize(tok.content);
      if (normed != tok.content) added.normalized_form[id] = std::move(normed);
    }
    added_ids_[tok.content] = id;
    if (tok.special) added.special_contents.insert(tok.content);
    added.by_id[id] = std::move(tok);
  }
  return added;
}

bool Tokenizer::has_token(int64_t id) const { return id >= 0 && id < size() && slot_of_id_[id] >= 0; }

std::string Tokenizer::id_to_token(int64_t id) const {
  DI_CHECK_INPUT(id >= 0 && id < size(), "token id ", id, " is outside the tokenizer's range [0, ", size(), ")");
  const int32_t slot = slot_of_id_[id];
  return slot < 0 ? std::string() : slots_[slot].token;
}

std::optional<int64_t> Tokenizer::token_to_id(const std::string& token) const {
  if (const auto it = added_ids_.find(token); it != added_ids_.end()) return it->second;
  if (const auto it = vocab_.find(token); it != vocab_.end()) return it->second;
  return std::nullopt;
}

bool Tokenizer::is_special(int64_t id) const { return has_token(id) && slots_[slot_of_id_[id]].special; }

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::vector<const std::string*> tokens;
  tokens.reserve(ids.size());
  for (int64_t id : ids) {
    DI_CHECK_INPUT(id >= 0 && id < size(), "token id ", id, " is outside the tokenizer's range [0, ", size(), ")");
    const int32_t slot = slot_of_id_[id];
    if (slot < 0) continue;
    if (skip_special_tokens && slots_[slot].special) continue;
    tokens.push_back(&slots_[slot].token);
  }
  std::string out;
  if (byte_level_steps_ < 0) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0) out.push_back(' ');
      out += *tokens[i];
    }
    return out;
  }
  if (byte_level_steps_ == 0) {
    for (const std::string* t : tokens) out += *t;
    return out;
  }
  // Each ByteLevel step turns the token list into one string.
  std::string bytes;
  for (const std::string* t : tokens) bytes += byte_level::decode_token(*t);
  out = utf8_lossy(bytes);
  for (int step = 1; step < byte_level_steps_; ++step) out = utf8_lossy(byte_level::decode_token(out));
  return out;
}

}  // namespace deepinfer
