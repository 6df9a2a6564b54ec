// The per-request state of a constraint: which tokens may come next, advancing token by
// token, rolling back, and the forced continuation.
//
//   auto masker = std::make_shared<TokenMasker>(compile_json_schema(schema), vocab_index);
//   GrammarMatcher m(masker);                        // one per request
//   std::vector<uint32_t> mask(m.mask_words());
//   while (!m.is_terminated()) {
//     m.fill_next_token_bitmask(mask);               // bit id%32 of word id/32
//     int64_t id = sample(logits, mask);
//     m.accept_token(id);                            // EOS ends the match
//   }
//
// Speculative decoding: accept the draft tokens one by one (filling a mask before each),
// then rollback(k) to drop the k rejected ones. Rollback reaches back to the start.
// Not thread-safe; the TokenMasker it shares is.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "structured/earley.h"
#include "structured/token_masker.h"

namespace deepinfer::structured {

class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<TokenMasker> masker);

  // Words of the bitmask: ceil(vocab_size / 32), exactly as wide as the logits.
  size_t mask_words() const { return masker_->vocab().mask_words(); }
  // Sets bit `id` for every token allowed next and clears all others (ids whose bytes are
  // empty stay clear). EOS is allowed exactly when the constraint can end here; after
  // EOS was accepted nothing is. words.size() must be at least mask_words().
  void fill_next_token_bitmask(std::span<uint32_t> words);

  // Advances by one token if it is allowed; otherwise returns false and changes nothing.
  bool accept_token(int64_t token_id);
  // Advances by raw bytes as one step (for forced continuations and tests).
  bool accept_bytes(std::string_view bytes);
  // Undoes the last n steps (tokens or byte strings). n must be <= num_steps().
  void rollback(size_t n);
  size_t num_steps() const { return steps_.size() - 1; }
  void reset();

  // The longest byte string every valid continuation starts with (up to max_bytes),
  // stopping where the constraint could end. Does not advance.
  std::string jump_forward_bytes(size_t max_bytes = 1024);

  bool can_end() const { return !is_terminated() && parser_.can_end(); }
  bool is_terminated() const { return steps_.back().terminated; }

 private:
  struct Step {
    size_t num_sets;
    bool terminated;
  };

  std::shared_ptr<TokenMasker> masker_;
  EarleyParser parser_;
  std::vector<Step> steps_;  // steps_[0] is the start
  std::vector<uint32_t> kernels_, candidates_;
};

}  // namespace deepinfer::structured
