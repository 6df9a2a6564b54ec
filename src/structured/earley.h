// An Earley parser over a CompiledGrammar's rule automata, one byte at a time.
//
// Items are (automaton state, origin): "inside the rule owning `state`, which started at
// input position `origin`". Set k holds the items alive after k bytes. Rule edges predict
// the callee at the current position; a final state completes its rule and advances the
// callers waiting in the origin set. Nullable rules are stepped over at prediction time
// (Aycock and Horspool), so completions at the current position are never needed.
// Every grammar is handled (ambiguous, left-recursive), in time polynomial in the input.
//
// push()/pop() move the position by one byte and back; they are the primitive of the
// token-mask walk and of rollback. A parser can also start "inside" a rule with an
// unknown caller (start_at); then the rule finishing is reported by escaped() instead of
// completing anything. The mask cache uses that to classify tokens without a stack.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "structured/compiled_grammar.h"

namespace deepinfer::structured {

class EarleyParser {
 public:
  static constexpr uint32_t kOutside = UINT32_MAX;
  struct Item {
    uint32_t state;
    uint32_t origin;
  };

  explicit EarleyParser(const CompiledGrammar* grammar);

  // Resets to one set: the root rule's start item and its closure.
  void start_root();
  // Resets to one set: the item (state, kOutside) and its closure.
  void start_at(uint32_t state);

  // Reads one byte into a new set. Returns false, and changes nothing, when no item can
  // read it. InputError if one set would exceed kMaxSetItems (a pathologically
  // ambiguous grammar).
  bool push(uint8_t b);
  void pop() { truncate(num_sets() - 1); }
  void truncate(size_t num_sets);
  size_t num_sets() const { return set_begin_.size(); }

  // The root rule, started at position 0, is complete at the current position.
  bool can_end() const;
  // An outside item (from start_at) is in a final state at the current position.
  bool escaped() const;
  // The bytes some item of the current set can read next.
  ByteSet next_bytes() const;

  std::span<const Item> set(size_t k) const {
    const size_t end = k + 1 < set_begin_.size() ? set_begin_[k + 1] : items_.size();
    return {items_.data() + set_begin_[k], items_.data() + end};
  }
  std::span<const Item> last_set() const { return set(num_sets() - 1); }

  static constexpr size_t kMaxSetItems = size_t(1) << 20;

 private:
  void begin_set();
  void add(uint32_t state, uint32_t origin);
  void closure(size_t begin, uint32_t cur);
  void rehash(size_t begin);

  const CompiledGrammar* g_;
  std::vector<Item> items_;
  std::vector<size_t> set_begin_;
  // Duplicate detection for the set being built: a linear scan while it is small, then
  // an open-addressing table of (state, origin) keys tagged with a generation.
  size_t cur_begin_ = 0;
  bool hashing_ = false;
  std::vector<uint64_t> table_;
  std::vector<uint32_t> table_gen_;
  uint32_t gen_ = 0;
};

}  // namespace deepinfer::structured
