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
// Fragments. When everything reachable from a state is a plain automaton (no rule calls:
// string bodies, keys, numbers, whitespace, small literals) the entry depends only on that
// automaton and the rule's follow set, not on the grammar around it. Such states are
// keyed by an exact canonical encoding of the reachable automaton (states renumbered in
// breadth-first order) and their entries live in the vocabulary's FragmentEntryCache, so
// the second grammar with a JSON string reuses the first one's walk. Their walk is also
// the fast one: dense transition rows, no parser.
//
// Thread-safe: many matchers on many threads may share one TokenMasker.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "structured/budget.h"
#include "structured/compiled_grammar.h"
#include "structured/vocab.h"

namespace deepinfer::structured {

class TokenMasker {
 public:
  using Entry = MaskEntry;

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
  // Entries this masker took from the vocabulary's fragment cache instead of computing.
  size_t fragment_hits() const { return fragment_hits_.load(); }
  // Vocabulary walks this masker made: for fragments, and for other states.
  size_t fragment_walks() const { return fragment_walks_.load(); }
  size_t parser_walks() const { return parser_walks_.load(); }
  // Fragment walks that reused a reference entry for most first bytes.
  size_t derived_walks() const { return derived_walks_.load(); }
  // Entries built from a depth reference (see depth_reference) with a walk of long tokens.
  size_t depth_derived() const { return depth_derived_.load(); }

  // The shortest-completion tables (structured/budget.h), computed on first use: only
  // requests that generate within a token budget need them.
  const BudgetTables& budget();
  // local_costs(state) (budget.h), computed on first use; null where it is nullopt.
  const LocalCosts* budget_local_costs(uint32_t state);

  // Fragments larger than this many states are not keyed (the key costs a walk of them).
  static constexpr size_t kMaxFragmentStates = 512;

 private:
  // truncate_depth: tokens longer than this are left uncertain (0: none are).
  std::unique_ptr<Entry> compute(uint32_t state, size_t truncate_depth);
  // The fragment reachable from `state` in breadth-first order, when it is all simple
  // and at most kMaxFragmentStates states; else empty.
  std::vector<uint32_t> fragment(uint32_t state) const;
  // The canonical key of a fragment (see above).
  std::string fragment_key(const std::vector<uint32_t>& states) const;
  // The exact entry of a fragment's first state: one walk with dense rows. With `ref`,
  // a computed entry of another state of the same rule, only the tokens whose first
  // byte `redo` marks are walked; the others are classified as in `ref` (a token whose
  // first byte leads both states to the same state has the same fate from either).
  // With `uncertain_any` (full walks only), also collects the tokens that die after the
  // rule could have finished whatever the next byte: the uncertain set for a follow set
  // of all bytes, which is what an anchor stores (it suits every follow set).
  std::unique_ptr<Entry> compute_fragment(const std::vector<uint32_t>& states, const Entry* ref = nullptr,
                                          const bool* redo = nullptr, std::vector<uint32_t>* uncertain_any = nullptr);
  // Picks a reference for compute_fragment among this rule's states with fragment
  // entries: the one whose differing first bytes cover the fewest trie nodes, if few.
  const Entry* fragment_reference(uint32_t state, bool redo[256]);
  // Depth references. Two simple states whose automata agree on every path shorter than
  // D bytes (same byte domains, same finality; pairs of one state agree forever) give
  // the same class to every token of at most D bytes, when their rule (hence follow set)
  // is the same. The positions of a counted string (maxLength) are such neighbours: the
  // state k characters in and the one j characters in differ only where one of them
  // must stop. An entry is then the reference's for short tokens plus a walk of the
  // subtrees of the tokens longer than D, which are few when D is large.
  // Looks among this rule's recent states with entries (and those of rules with the same
  // follow set) for the one agreeing longest; a truncated entry counts only up to its
  // truncation depth. Returns it (or UINT32_MAX) and its depth.
  uint32_t depth_reference(uint32_t state, size_t truncate_depth, size_t* depth);
  // The depth below which the automata from a and b agree (at most `limit`).
  size_t agreement_depth(uint32_t a, uint32_t b, size_t limit) const;
  // The entry of `state` from the reference entry `ref` and agreement depth D; null if
  // the walk meets a state with rule calls (then the caller computes it plainly).
  std::unique_ptr<Entry> derive_by_depth(uint32_t state, const Entry& ref, size_t depth, size_t truncate_depth);
  void note_computed(uint32_t state, size_t truncate_depth);
  // The same against the vocabulary's anchors (fragments of other grammars, decoded from
  // their keys): an anchor whose follow set contains this rule's (extra uncertain
  // tokens are checked by the parser, so a larger follow set is safe) and agrees deepest.
  std::shared_ptr<const Entry> anchor_reference(uint32_t state, size_t* depth);
  const Entry& publish(uint32_t state, std::shared_ptr<const Entry> e);
  // A hash of what the next `depth` bytes from `state` can do (callers hold mu_).
  uint64_t future_signature(uint32_t state, int depth);

  std::shared_ptr<const CompiledGrammar> grammar_;
  std::shared_ptr<const VocabIndex> vocab_;
  int share_depth_;
  std::once_flag budget_once_;
  std::unique_ptr<const BudgetTables> budget_;
  std::mutex costly_mu_;
  std::unordered_map<uint32_t, std::unique_ptr<const LocalCosts>> local_costs_;
  std::unique_ptr<std::atomic<const Entry*>[]> entries_;  // not owning
  std::mutex mu_;
  std::vector<std::shared_ptr<const Entry>> owned_;
  std::unordered_map<uint64_t, const Entry*> shared_;  // by future signature
  std::unordered_map<uint64_t, uint64_t> signatures_;  // (state, depth) -> signature
  // Per rule, the last few states with fragment entries: references for new states.
  std::unordered_map<uint32_t, std::vector<uint32_t>> fragment_states_;
  // Per rule, the last few simple states with entries, and their truncation depth.
  std::unordered_map<uint32_t, std::vector<std::pair<uint32_t, size_t>>> depth_refs_;
  std::vector<std::pair<uint32_t, size_t>> recent_simple_;  // the same, over all rules
  std::atomic<size_t> num_entries_{0}, cached_bytes_{0}, fragment_hits_{0}, fragment_walks_{0}, parser_walks_{0}, derived_walks_{0},
      depth_derived_{0};
};

}  // namespace deepinfer::structured
