#include "tokenizer/hf_normalizer.h"

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

namespace {

constexpr int kMaxDepth = 16;

std::string string_field(const nlohmann::json& spec, const char* key, const std::string& type) {
  const auto it = spec.find(key);
  DI_CHECK_INPUT(it != spec.end() && it->is_string(), "tokenizer.json: normalizer ", type, " needs a string '",
                 key, "'");
  return it->get<std::string>();
}

bool bool_field(const nlohmann::json& spec, const char* key, bool fallback) {
  const auto it = spec.find(key);
  if (it == spec.end() || it->is_null()) return fallback;
  DI_CHECK_INPUT(it->is_boolean(), "tokenizer.json: normalizer field '", key, "' must be a boolean");
  return it->get<bool>();
}

std::string replace_all(const std::string& text, const std::string& pattern, const std::string& content) {
  std::string out;
  size_t pos = 0;
  while (true) {
    const size_t hit = text.find(pattern, pos);
    if (hit == std::string::npos) break;
    out.append(text, pos, hit - pos);
    out += content;
    pos = hit + pattern.size();
  }
  out.append(text, pos);
  return out;
}

}  // namespace

HfNormalizer HfNormalizer::parse(const nlohmann::json& spec) {
  HfNormalizer n;
  if (!spec.is_null()) n.add(spec, 0);
  return n;
}

void HfNormalizer::add(const nlohmann::json& spec, int depth) {
  DI_CHECK_INPUT(depth < kMaxDepth, "tokenizer.json: normalizer Sequence nested too deeply");
  DI_CHECK_INPUT(spec.is_object(), "tokenizer.json: a normalizer must be an object");
  const std::string type = string_field(spec, "type", "");
  if (type == "Sequence") {
    const auto it = spec.find("normalizers");
    DI_CHECK_INPUT(it != spec.end() && it->is_array(), "tokenizer.json: normalizer Sequence needs 'normalizers'");
    for (const auto& child : *it) add(child, depth + 1);
  } else if (type == "NFC") {
    steps_.push_back({Kind::kNfc});
  } else if (type == "NFD") {
    steps_.push_back({Kind::kNfd});
  } else if (type == "NFKC") {
    steps_.push_back({Kind::kNfkc});
  } else if (type == "NFKD") {
    steps_.push_back({Kind::kNfkd});
  } else if (type == "Lowercase") {
    steps_.push_back({Kind::kLowercase});
  } else if (type == "StripAccents") {
    steps_.push_back({Kind::kStripAccents});
  } else if (type == "ByteLevel") {
    steps_.push_back({Kind::kByteLevel});
  } else if (type == "Strip") {
    steps_.push_back({Kind::kStrip, bool_field(spec, "strip_left", true), bool_field(spec, "strip_right", true)});
  } else if (type == "Prepend") {
    steps_.push_back({Kind::kPrepend, true, true, string_field(spec, "prepend", type)});
  } else if (type == "Replace" && spec.contains("pattern") && spec["pattern"].is_object() &&
             spec["pattern"].contains("String")) {
    const auto& pattern = spec["pattern"]["String"];
    DI_CHECK_INPUT(pattern.is_string() && !pattern.get<std::string>().empty(),
                   "tokenizer.json: normalizer Replace needs a non-empty String pattern");
    steps_.push_back({Kind::kReplace, true, true, pattern.get<std::string>(), string_field(spec, "content", type)});
  } else if (unsupported_.empty()) {
    // Regex replacements, Precompiled, BertNormalizer, ...: not needed by DeepSeek.
    unsupported_ = type;
  }
}

std::string HfNormalizer::normalize(const std::string& utf8) const {
  DI_CHECK_INPUT(unsupported_.empty(), "tokenizer.json: normalizer type '", unsupported_, "' is not supported");
  if (steps_.empty()) return utf8;
  std::u32string text;
  DI_CHECK_INPUT(decode_utf8(utf8, &text), "normalizer input is not valid UTF-8");
  using hf_unicode::NormalForm;
  for (const Step& step : steps_) {
    switch (step.kind) {
      case Kind::kNfc: text = hf_unicode::normalize(text, NormalForm::kNfc); break;
      case Kind::kNfd: text = hf_unicode::normalize(text, NormalForm::kNfd); break;
      case Kind::kNfkc: text = hf_unicode::normalize(text, NormalForm::kNfkc); break;
      case Kind::kNfkd: text = hf_unicode::normalize(text, NormalForm::kNfkd); break;
      case Kind::kLowercase: text = hf_unicode::lowercase(text); break;
      case Kind::kStripAccents: text = hf_unicode::strip_accents(text); break;
      case Kind::kStrip: text = hf_unicode::strip(text, step.left, step.right); break;
      case Kind::kPrepend: {
        if (text.empty()) break;
        std::u32string prefix;
        decode_utf8(step.text, &prefix);  // came from JSON, so valid
        text = prefix + text;
        break;
      }
      case Kind::kReplace: {
        std::u32string replaced;
        decode_utf8(replace_all(encode_utf8(text), step.text, step.content), &replaced);
        text = std::move(replaced);
        break;
      }
      case Kind::kByteLevel: {
        std::u32string mapped;
        decode_utf8(byte_level::encode(encode_utf8(text)), &mapped);
        text = std::move(mapped);
        break;
      }
    }
  }
  return encode_utf8(text);
}

}  // namespace deepinfer
