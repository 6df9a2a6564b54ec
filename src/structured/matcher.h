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
//
// Generation within a budget (structured/budget.h): min_bytes_to_accept() is the length
// of the shortest continuation that completes a match; restrict_to_budget() removes from
// a filled mask the tokens after which that would exceed the tokens left.
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

  // The fewest bytes that complete a match from here: 0 exactly when can_end() (and
  // after EOS), BudgetTables::kInf for a grammar that matches nothing. Exact: the
  // minimum over the parse's items of the item's shortest way to finish its rule plus
  // the cheapest chain of callers waiting for it (memoized per parse position).
  uint32_t min_bytes_to_accept();
  // `words` holds the mask fill_next_token_bitmask() just produced; `tokens_left` counts
  // the tokens that may still be generated, the next one included. Clears every token
  // after which min_bytes_to_accept() would exceed tokens_left - 1 (EOS stays as it is;
  // with no token left only EOS remains). Returns false, and leaves the mask unchanged,
  // when no guarantee can be given: the parse already needs more than tokens_left bytes
  // (max_tokens below the shortest output), or filtering would leave no token at all
  // (only possible when some single byte is not a token).
  // Cost: a bound check per step (reach() tables); only when the bound says some token
  // might leave the budget are tokens examined: proven wholesale from the mask cache's
  // accepted sets, decided exactly by local costs in plain states (budget.h), and the
  // rest walked with the parser (shared prefixes, subtrees whose bound fits skipped).
  bool restrict_to_budget(std::span<uint32_t> words, int64_t tokens_left);
  // How many restrict_to_budget calls walked tokens (the bound did not settle them).
  size_t budget_walks() const { return budget_walks_; }
  bool is_terminated() const { return steps_.back().terminated; }

 private:
  struct Step {
    size_t num_sets;
    bool terminated;
  };
  // Per Earley set j and rule R called there: the cheapest completion of the callers
  // waiting at j for R, once R is done (min), and `escape`, a bound on the cheapest
  // completion after a path that finishes R and then reads up to horizon() bytes in
  // some caller's frame (reach() of the caller's return state plus the caller's own min,
  // or the caller's escape).
  struct RuleCost {
    uint32_t rule, min, escape;
  };

  const BudgetTables& tables();
  void truncate(size_t num_sets);  // the parser and the per-set costs
  const RuleCost& rule_cost(size_t set, uint32_t rule);
  void compute_costs(size_t set);
  // For the parser's last set: min_bytes_to_accept, and an upper bound on it after any
  // further `horizon` bytes.
  uint32_t min_bytes_last();
  uint32_t bound_last();

  std::shared_ptr<TokenMasker> masker_;
  EarleyParser parser_;
  std::vector<Step> steps_;  // steps_[0] is the start
  std::vector<uint32_t> kernels_, candidates_;
  const BudgetTables* tables_ = nullptr;
  std::vector<std::vector<RuleCost>> costs_;  // sets [0, costs_.size()) of the current parse
  std::vector<uint32_t> saved_, original_, proven_, cand_, risky_, scratch_;
  size_t budget_walks_ = 0;
};

}  // namespace deepinfer::structured
