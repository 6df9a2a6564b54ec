// tokenizer.json "pre_tokenizer": the types byte-level BPE tokenizers use, with the
// exact splitting of tokenizers 0.23: Sequence, Split (String or Regex pattern; behavior
// Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous; invert), ByteLevel
// (add_prefix_space, use_regex with GPT-2's word regex) and Digits. DeepSeek's is a
// Sequence of three Isolated regex Splits and a ByteLevel without regex.
//
// Another type is remembered, and splitting with it throws InputError, so that a
// tokenizer used only for decoding still loads.
#pragma once

#include <deque>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

class OnigRegex;

class PreTokenizer {
 public:
  // `spec` is the JSON value of "pre_tokenizer" (null: none).
  static PreTokenizer parse(const nlohmann::json& spec, const std::string& origin);
  PreTokenizer();
  ~PreTokenizer();
  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;

  // Whether the last step is a ByteLevel mapping with nothing else to do (no prefix
  // space, no regex). When `defer` is true in split(), that mapping is left out and the
  // pre-tokens come back as raw bytes, for the model to map on the fly.
  bool ends_with_plain_byte_level() const;

  // Appends the pre-tokens of `text` (non-empty ones only). Text the steps create lives
  // in `arena`, which must outlive the views.
  void split(std::string_view text, bool defer_byte_level, std::deque<std::string>* arena,
             std::vector<std::string_view>* out) const;

 private:
  enum class Kind { kSplit, kByteLevel };
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    Kind kind = Kind::kSplit;
    std::shared_ptr<const OnigRegex> regex;  // Split, Digits; ByteLevel with use_regex
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
  };
  void add(const nlohmann::json& spec, const std::string& origin, int depth);
  void apply_split(const Step& step, const std::vector<std::string_view>& in, std::vector<std::string_view>* out) const;

  std::vector<Step> steps_;
  std::string unsupported_;
};

}  // namespace deepinfer
