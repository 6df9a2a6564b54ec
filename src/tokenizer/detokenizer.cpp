#include "tokenizer/detokenizer.h"

#include "common/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string IncrementalDetokenizer::push(int64_t id) {
  DI_CHECK_INPUT(id >= 0 && id < tokenizer_.size(), "token id ", id, " is outside the tokenizer's range [0, ",
                 tokenizer_.size(), ")");
  const int steps = tokenizer_.byte_level_steps();
  if (steps > 1) {
    // Each further ByteLevel step re-reads the previous one's whole output; no prefix
    // of it is final before the end.
    ids_.push_back(id);
    return {};
  }
  if (!tokenizer_.has_token(id) || (skip_special_ && tokenizer_.is_special(id))) return {};
  const std::string token = tokenizer_.id_to_token(id);
  if (steps < 0) {
    std::string out = emitted_token_ ? " " + token : token;
    emitted_token_ = true;
    return out;
  }
  if (steps == 0) return token;
  pending_ += byte_level::decode_token(token);
  const size_t cut = complete_utf8_prefix(pending_);
  std::string out = utf8_lossy(std::string_view(pending_).substr(0, cut));
  pending_.erase(0, cut);
  return out;
}

std::string IncrementalDetokenizer::finish() {
  std::string out;
  if (!ids_.empty()) {
    out = tokenizer_.decode(ids_, skip_special_);
  } else {
    out = utf8_lossy(pending_);
  }
  ids_.clear();
  pending_.clear();
  emitted_token_ = false;
  return out;
}

}  // namespace deepinfer
