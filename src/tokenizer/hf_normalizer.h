// The subset of Hugging Face tokenizers normalizers that byte-level BPE tokenizer.json
// files use, with the library's exact semantics (see unicode.h). Parsed from the
// "normalizer" field; a type we do not implement is remembered, and normalizing with it
// throws InputError (so a tokenizer that never needs it still loads).
#pragma once

#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace deepinfer {

class HfNormalizer {
 public:
  // `spec` is the JSON value of "normalizer" (null means none).
  static HfNormalizer parse(const nlohmann::json& spec);

  bool is_identity() const { return steps_.empty() && unsupported_.empty(); }
  // Throws InputError naming the unsupported normalizer type, if there is one.
  std::string normalize(const std::string& utf8) const;

 private:
  enum class Kind { kNfc, kNfd, kNfkc, kNfkd, kLowercase, kStripAccents, kStrip, kPrepend, kReplace, kByteLevel };
  struct Step {
    Step(Kind k, bool l = true, bool r = true, std::string t = {}, std::string c = {})
        : kind(k), left(l), right(r), text(std::move(t)), content(std::move(c)) {}
    Kind kind;
    bool left = true, right = true;  // Strip
    std::string text;                // Prepend: prefix; Replace: pattern
    std::string content;             // Replace: replacement
  };
  void add(const nlohmann::json& spec, int depth);

  std::vector<Step> steps_;
  std::string unsupported_;  // the first unsupported type, if any
};

}  // namespace deepinfer
