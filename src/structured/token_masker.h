// A compiled grammar bound to a vocabulary, with the adaptive token-mask cache.
//
// For an Earley item in automaton state s, most tokens can be classified without knowing
// who called s's rule: a token is ACCEPTED if its bytes can be read entirely inside the
// rule (and the rules it calls), REJECTED if every path dies inside the rule, and
// UNCERTAIN only if some path finishes the rule mid-token, so that the rest of the
// token depends on the caller. A finish counts only when the next byte of the token is
// in the rule's follow set. The cache stores, per state, the accepted tokens and the
// uncertain ranks; it is filled lazily, the first time a matcher meets the state, and
// shared by every matcher of the grammar.
//
// Per step, the mask is the union of the accepted sets of the current set's "kernel"
// items (those that started before the current position; everything else in the set
// was predicted from them), plus the uncertain ranks that survive a check with the real
// parser. Tokens ending exactly where the rule finishes are accepted: every state of a
// compiled grammar can still reach a final state.
//
// States of a shareable rule (Grammar::Rule::shareable: maxLength strings, where every
// character position is a state) share one entry among all states whose next
// `share_depth` bytes behave alike (same transitions, finality and calls up to that
// depth, same follow set). Such an entry leaves tokens longer than share_depth
// uncertain, so sharing never changes a mask; it only saves walks.
//
// Thread-safe: many matchers on many threads may share one TokenMasker.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "structured/compiled_grammar.h"
#include "structured/vocab.h"

namespace deepinfer::structured {

class TokenMasker {
 public:
  struct Entry {
    // Accepted token ids, either as a full bitmask (dense) or as a sorted id list.
    std::vector<uint32_t> accepted_words;
    std::vector<int32_t> accepted_ids;
    std::vector<uint32_t> uncertain_ranks;  // sorted
    size_t bytes() const {
      return accepted_words.size() * 4 + accepted_ids.size() * 4 + uncertain_ranks.size() * 4;
    }
  };

  static constexpr int kDefaultShareDepth = 32;
  TokenMasker(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const VocabIndex> vocab,
              int share_depth = kDefaultShareDepth);
  ~TokenMasker();

  const CompiledGrammar& grammar() const { return *grammar_; }
  const VocabIndex& vocab() const { return *vocab_; }
  const std::shared_ptr<const CompiledGrammar>& grammar_ptr() const { return grammar_; }

  // The cache entry of a state, computed on first use.
  const Entry& entry(uint32_t state);
  // Computes every state's entry now (for benchmarks and to move work out of the first
  // steps). Returns the number of entries.
  size_t precompute_all();

  size_t cached_entries() const { return num_entries_.load(); }
  size_t cached_bytes() const { return cached_bytes_.load(); }

 private:
  // truncate_depth: tokens longer than this are left uncertain (0: none are).
  std::unique_ptr<Entry> compute(uint32_t state, size_t truncate_depth) const;
  // A hash of what the next `depth` bytes from `state` can do (callers hold mu_).
  uint64_t future_signature(uint32_t state, int depth);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const VocabIndex> vocab_;
  int share_depth_;
  std::unique_ptr<std::atomic<const Entry*>[]> entries_;  // not owning
  std::mutex mu_;
  std::vector<std::unique_ptr<Entry>> owned_;
  std::unordered_map<uint64_t, const Entry*> shared_;  // by future signature
  std::unordered_map<uint64_t, uint64_t> signatures_;  // (state, depth) -> signature
  std::atomic<size_t> num_entries_{0}, cached_bytes_{0};
};

}  // namespace deepinfer::structured
