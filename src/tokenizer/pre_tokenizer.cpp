#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/onig_regex.h"

namespace deepinfer {

namespace {

using nlohmann::json;

constexpr int kMaxDepth = 16;

// The word regex tokenizers' ByteLevel pre-tokenizer uses when use_regex is set.
constexpr const char* kGpt2Regex = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

bool optional_bool(const json& spec, const char* key, bool fallback, const std::string& origin) {
  const auto it = spec.find(key);
  if (it == spec.end() || it->is_null()) return fallback;
  DI_CHECK_INPUT(it->is_boolean(), origin, ": pre_tokenizer field '", key, "' must be a boolean");
  return it->get<bool>();
}

struct Piece {
  size_t begin, end;
  bool is_match;
};

}  // namespace

PreTokenizer::PreTokenizer() = default;
PreTokenizer::~PreTokenizer() = default;
PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;

PreTokenizer PreTokenizer::parse(const json& spec, const std::string& origin) {
  PreTokenizer p;
  if (!spec.is_null()) p.add(spec, origin, 0);
  return p;
}

void PreTokenizer::add(const json& spec, const std::string& origin, int depth) {
  DI_CHECK_INPUT(depth < kMaxDepth, origin, ": pre_tokenizer Sequence nested too deeply");
  DI_CHECK_INPUT(spec.is_object() && spec.contains("type") && spec["type"].is_string(), origin,
                 ": pre_tokenizer must be an object with a string 'type'");
  const std::string type = spec["type"].get<std::string>();
  Step step;
  if (type == "Sequence") {
    DI_CHECK_INPUT(spec.contains("pretokenizers") && spec["pretokenizers"].is_array(), origin,
                   ": pre_tokenizer Sequence needs an array 'pretokenizers'");
    for (const json& child : spec["pretokenizers"]) add(child, origin, depth + 1);
    return;
  }
  if (type == "Split") {
    const auto pattern = spec.find("pattern");
    DI_CHECK_INPUT(pattern != spec.end() && pattern->is_object() && pattern->size() == 1, origin,
                   ": Split needs a 'pattern' object with 'String' or 'Regex'");
    const std::string kind = pattern->begin().key();
    const json& value = pattern->begin().value();
    DI_CHECK_INPUT((kind == "String" || kind == "Regex") && value.is_string(), origin,
                   ": Split pattern must be {\"String\": text} or {\"Regex\": text}");
    const std::string text = value.get<std::string>();
    try {
      step.regex = std::make_shared<OnigRegex>(kind == "Regex" ? OnigRegex(text) : OnigRegex::literal(text));
    } catch (const InputError& e) {
      DI_CHECK_INPUT(false, origin, ": Split pattern: ", e.what());
    }
    const auto behavior = spec.find("behavior");
    DI_CHECK_INPUT(behavior != spec.end() && behavior->is_string(), origin, ": Split needs a string 'behavior'");
    const std::string b = behavior->get<std::string>();
    if (b == "Removed") {
      step.behavior = Behavior::kRemoved;
    } else if (b == "Isolated") {
      step.behavior = Behavior::kIsolated;
    } else if (b == "MergedWithPrevious") {
      step.behavior = Behavior::kMergedWithPrevious;
    } else if (b == "MergedWithNext") {
      step.behavior = Behavior::kMergedWithNext;
    } else if (b == "Contiguous") {
      step.behavior = Behavior::kContiguous;
    } else {
      DI_CHECK_INPUT(false, origin, ": Split behavior '", b, "' is unknown");
    }
    step.invert = optional_bool(spec, "invert", false, origin);
  } else if (type == "ByteLevel") {
    step.kind = Kind::kByteLevel;
    step.add_prefix_space = optional_bool(spec, "add_prefix_space", true, origin);
    if (optional_bool(spec, "use_regex", true, origin)) step.regex = std::make_shared<OnigRegex>(kGpt2Regex);
  } else if (type == "Digits") {
    // char::is_numeric, one match per character.
    step.regex = std::make_shared<OnigRegex>("\\p{N}");
    step.behavior = optional_bool(spec, "individual_digits", false, origin) ? Behavior::kIsolated
                                                                               : Behavior::kContiguous;
  } else {
    if (unsupported_.empty()) unsupported_ = type;
    return;
  }
  steps_.push_back(std::move(step));
}

bool PreTokenizer::ends_with_plain_byte_level() const {
  return unsupported_.empty() && !steps_.empty() && steps_.back().kind == Kind::kByteLevel;
}

// tokenizers' Pattern::find_matches followed by NormalizedString::split.
void PreTokenizer::apply_split(const Step& step, const std::vector<std::string_view>& in,
                               std::vector<std::string_view>* out) const {
  std::vector<std::pair<size_t, size_t>> matches;
  std::vector<Piece> pieces, kept;
  for (std::string_view text : in) {
    matches.clear();
    step.regex->find_all(text, &matches);
    pieces.clear();
    size_t prev = 0;
    for (const auto& [s, e] : matches) {
      if (prev != s) pieces.push_back({prev, s, false});
      pieces.push_back({s, e, true});
      prev = e;
    }
    if (prev != text.size()) pieces.push_back({prev, text.size(), false});
    if (step.invert)
      for (Piece& p : pieces) p.is_match = !p.is_match;

    kept.clear();
    bool previous_match = false;
    switch (step.behavior) {
      case Behavior::kIsolated:
        kept = pieces;
        break;
      case Behavior::kRemoved:
        for (const Piece& p : pieces)
          if (!p.is_match) kept.push_back(p);
        break;
      case Behavior::kContiguous:
        for (const Piece& p : pieces) {
          if (p.is_match == previous_match && !kept.empty()) {
            kept.back().end = p.end;
          } else {
            kept.push_back(p);
          }
          previous_match = p.is_match;
        }
        break;
      case Behavior::kMergedWithPrevious:
        for (const Piece& p : pieces) {
          if (p.is_match && !previous_match && !kept.empty()) {
            kept.back().end = p.end;
          } else {
            kept.push_back(p);
          }
          previous_match = p.is_match;
        }
        break;
      case Behavior::kMergedWithNext:
        for (size_t i = pieces.size(); i-- > 0;) {
          const Piece& p = pieces[i];
          if (p.is_match && !previous_match && !kept.empty()) {
            kept.back().begin = p.begin;
          } else {
            kept.push_back(p);
          }
          previous_match = p.is_match;
        }
        std::reverse(kept.begin(), kept.end());
        break;
    }
    for (const Piece& p : kept)
      if (p.end > p.begin) out->push_back(text.substr(p.begin, p.end - p.begin));
  }
}

void PreTokenizer::split(std::string_view text, bool defer_byte_level, std::deque<std::string>* arena,
                         std::vector<std::string_view>* out) const {
  DI_CHECK_INPUT(unsupported_.empty(), "pre_tokenizer type '", unsupported_, "' is not supported for encoding");
  if (text.empty()) return;
  std::vector<std::string_view> current{text}, next;
  for (size_t k = 0; k < steps_.size(); ++k) {
    const Step& step = steps_[k];
    next.clear();
    if (step.kind == Kind::kSplit) {
      apply_split(step, current, &next);
    } else {
      if (step.add_prefix_space) {
        for (std::string_view& piece : current) {
          if (!piece.empty() && piece[0] == ' ') continue;
          arena->push_back(" " + std::string(piece));
          piece = arena->back();
        }
      }
      if (step.regex) {
        Step isolated;
        isolated.regex = step.regex;
        apply_split(isolated, current, &next);
      } else {
        next = current;
      }
      if (!(defer_byte_level && k + 1 == steps_.size())) {
        for (std::string_view& piece : next) {
          arena->push_back(byte_level::encode(piece));
          piece = arena->back();
        }
      }
    }
    current.swap(next);
  }
  for (std::string_view piece : current)
    if (!piece.empty()) out->push_back(piece);
}

}  // namespace deepinfer
