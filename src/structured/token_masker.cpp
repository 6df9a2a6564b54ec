#include "structured/token_masker.h"

#include <algorithm>

#include "common/check.h"
#include "structured/earley.h"

namespace deepinfer::structured {
namespace {

constexpr uint32_t kNone = UINT32_MAX;

}  // namespace

TokenMasker::TokenMasker(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const VocabIndex> vocab,
                         int share_depth)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)) {
  DI_CHECK(grammar_ && vocab_, "TokenMasker needs a grammar and a vocabulary");
  share_depth_ = std::max(1, std::min<int>(share_depth, int(vocab_->max_token_bytes())));
  entries_.reset(new std::atomic<const Entry*>[grammar_->num_states()]);
  for (uint32_t s = 0; s < grammar_->num_states(); ++s) entries_[s].store(nullptr);
}

TokenMasker::~TokenMasker() = default;

namespace {

std::unique_ptr<MaskEntry> make_entry(const VocabIndex& v, const std::vector<uint32_t>& accepted,
                                      std::vector<uint32_t> uncertain) {
  auto e = std::make_unique<MaskEntry>();
  size_t num_ids = 0;
  for (uint32_t r : accepted) num_ids += v.rank_tokens(r).size();
  if (num_ids * 64 >= v.vocab_size()) {
    e->accepted_words.assign(v.mask_words(), 0);
    for (uint32_t r : accepted)
      for (int32_t id : v.rank_tokens(r)) e->accepted_words[id >> 5] |= uint32_t(1) << (id & 31);
  } else {
    for (uint32_t r : accepted)
      for (int32_t id : v.rank_tokens(r)) e->accepted_ids.push_back(id);
  }
  e->uncertain_ranks = std::move(uncertain);
  return e;
}

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
  return h * 0xBF58476D1CE4E5B9ull;
}

}  // namespace

uint64_t TokenMasker::future_signature(uint32_t state, int depth) {
  const CompiledGrammar& g = *grammar_;
  if (!g.is_simple(state)) return mix(0xA5A5, state);  // Earley from here: exact identity
  if (depth == 0) return 0x5A5A;                       // alive; what follows is truncated
  const uint64_t key = (uint64_t(state) << 8) | uint64_t(depth);
  auto it = signatures_.find(key);
  if (it != signatures_.end()) return it->second;
  uint64_t h = mix(g.is_final(state) ? 1 : 2, g.byte_edges(state).size());
  for (const auto& e : g.byte_edges(state)) h = mix(mix(h, (uint64_t(e.lo) << 8) | e.hi), future_signature(e.to, depth - 1));
  signatures_[key] = h;
  return h;
}

const TokenMasker::Entry& TokenMasker::publish(uint32_t state, std::shared_ptr<const Entry> e) {
  std::lock_guard<std::mutex> lock(mu_);
  if (const Entry* have = entries_[state].load(std::memory_order_acquire)) return *have;
  cached_bytes_ += e->bytes();
  ++num_entries_;
  const Entry* raw = e.get();
  owned_.push_back(std::move(e));
  entries_[state].store(raw, std::memory_order_release);
  return *raw;
}

const TokenMasker::Entry& TokenMasker::entry(uint32_t state) {
  const Entry* e = entries_[state].load(std::memory_order_acquire);
  if (e) return *e;
  const CompiledGrammar& g = *grammar_;
  if (g.is_simple(state)) {
    const std::vector<uint32_t> states = fragment(state);
    if (!states.empty()) {
      const std::string key = fragment_key(states);
      FragmentEntryCache& cache = vocab_->fragment_cache();
      std::shared_ptr<const Entry> found = cache.find(key);
      if (found) {
        ++fragment_hits_;
      } else {
        bool redo[256];
        const Entry* ref = fragment_reference(state, redo);
        found = cache.insert(key, std::shared_ptr<const Entry>(compute_fragment(states, ref, redo)));
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        std::vector<uint32_t>& recent = fragment_states_[g.state_rule(state)];
        if (recent.size() >= 8) recent.erase(recent.begin());
        recent.push_back(state);
      }
      return publish(state, std::move(found));
    }
  }
  const bool share = g.rule_shareable(g.state_rule(state)) && g.is_simple(state);
  uint64_t key = 0;
  if (share) {
    std::lock_guard<std::mutex> lock(mu_);
    key = future_signature(state, share_depth_);
    const ByteSet& f = g.rule_follow(g.state_rule(state));
    for (uint64_t w : f.w) key = mix(key, w);
    auto it = shared_.find(key);
    if (it != shared_.end()) {
      entries_[state].store(it->second, std::memory_order_release);
      return *it->second;
    }
  }
  std::shared_ptr<const Entry> computed = compute(state, share ? size_t(share_depth_) : 0);
  if (share) {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, inserted] = shared_.try_emplace(key, computed.get());
    if (!inserted) {  // another thread computed the same entry meanwhile
      entries_[state].store(it->second, std::memory_order_release);
      return *it->second;
    }
  }
  return publish(state, std::move(computed));
}

const TokenMasker::Entry* TokenMasker::fragment_reference(uint32_t state, bool redo[256]) {
  const CompiledGrammar& g = *grammar_;
  const VocabIndex& v = *vocab_;
  std::vector<uint32_t> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = fragment_states_.find(g.state_rule(state));
    if (it != fragment_states_.end()) candidates = it->second;
  }
  auto row = [&](uint32_t s, uint32_t out[256]) {
    std::fill(out, out + 256, kNone);
    for (const auto& e : g.byte_edges(s))
      for (int b = e.lo; b <= e.hi; ++b) out[b] = e.to;
  };
  auto subtree = [&](int b) -> size_t {
    const uint32_t node = v.first_byte_node(uint8_t(b));
    return node ? v.walk_nodes()[node].end - node : 0;
  };
  uint32_t mine[256], theirs[256];
  row(state, mine);
  // The state most of the vocabulary moves to (the loop of a string body, for a state
  // inside a key or after a string's first character) is a natural reference too: its
  // entry is usually cached already, often from another grammar.
  {
    std::unordered_map<uint32_t, size_t> weight;
    for (int b = 0; b < 256; ++b)
      if (mine[b] != kNone) weight[mine[b]] += subtree(b);
    uint32_t heavy = kNone;
    size_t heavy_weight = 0;
    for (const auto& [t, w] : weight)
      if (w > heavy_weight) heavy = t, heavy_weight = w;
    if (heavy != kNone && heavy != state) candidates.push_back(heavy);
  }
  // Worth it only when the walk shrinks to a small part of the trie.
  size_t best_cost = v.walk_nodes().size() / 3;
  uint32_t best = kNone;
  for (uint32_t c : candidates) {
    row(c, theirs);
    size_t cost = 0;
    for (int b = 0; b < 256; ++b)
      if (mine[b] != theirs[b]) cost += subtree(b);
    if (cost < best_cost) {
      best_cost = cost;
      best = c;
      for (int b = 0; b < 256; ++b) redo[b] = mine[b] != theirs[b];
    }
  }
  if (best == kNone) return nullptr;
  // The reference's own entry may need computing (one level: a chain of references
  // would trade one walk for several).
  thread_local int depth = 0;
  if (!entries_[best].load(std::memory_order_acquire) && depth > 0) return nullptr;
  ++depth;
  const Entry* e = &entry(best);
  --depth;
  return e;
}

std::vector<uint32_t> TokenMasker::fragment(uint32_t state) const {
  const CompiledGrammar& g = *grammar_;
  std::vector<uint32_t> order{state};
  std::unordered_map<uint32_t, uint32_t> seen{{state, 0}};
  for (size_t i = 0; i < order.size(); ++i) {
    if (!g.is_simple(order[i])) return {};
    for (const auto& e : g.byte_edges(order[i])) {
      if (seen.try_emplace(e.to, uint32_t(order.size())).second) {
        if (order.size() >= kMaxFragmentStates) return {};
        order.push_back(e.to);
      }
    }
  }
  return order;
}

std::string TokenMasker::fragment_key(const std::vector<uint32_t>& states) const {
  const CompiledGrammar& g = *grammar_;
  std::unordered_map<uint32_t, uint16_t> canon;
  for (size_t i = 0; i < states.size(); ++i) canon[states[i]] = uint16_t(i);
  std::string key = "F1";  // format version
  auto put16 = [&](uint32_t v) {
    key += char(v & 0xFF);
    key += char(v >> 8);
  };
  for (uint32_t s : states) {
    key += char(g.is_final(s) ? 1 : 0);
    put16(uint32_t(g.byte_edges(s).size()));
    for (const auto& e : g.byte_edges(s)) {
      key += char(e.lo);
      key += char(e.hi);
      put16(canon.at(e.to));
    }
  }
  // What may follow the rule decides which finishing tokens are uncertain.
  const ByteSet& f = g.rule_follow(g.state_rule(states[0]));
  for (uint64_t w : f.w)
    for (int k = 0; k < 8; ++k) key += char((w >> (8 * k)) & 0xFF);
  return key;
}

size_t TokenMasker::precompute_all() {
  for (uint32_t s = 0; s < grammar_->num_states(); ++s) entry(s);
  return grammar_->num_states();
}

// One depth-first walk over the vocabulary trie from the item (state, outside).
// Along a path the walk runs in "simple" mode (a plain automaton step per byte) while
// the rule has no calls, and in Earley mode below the first byte that needs one.
std::unique_ptr<TokenMasker::Entry> TokenMasker::compute(uint32_t state, size_t truncate_depth) {
  ++parser_walks_;
  const CompiledGrammar& g = *grammar_;
  const VocabIndex& v = *vocab_;
  const std::vector<VocabIndex::Node>& nodes = v.nodes();
  const ByteSet& follow = g.rule_follow(g.state_rule(state));
  EarleyParser parser(&g);

  struct Level {
    uint32_t simple;  // the automaton state in simple mode, else kNone
    uint32_t sets;    // the parser's set count in Earley mode
    bool finished;    // the rule can finish here (only counted after the first byte)
    bool escaped;     // the rule finished earlier on this path with a follow byte next
  };
  std::vector<Level> levels(v.max_token_bytes() + 1);
  if (g.is_simple(state)) {
    levels[0] = {state, 0, false, false};
  } else {
    parser.start_at(state);
    levels[0] = {kNone, 1, false, false};
  }
  std::vector<uint32_t> accepted, uncertain;
  // Dense 256-entry transition rows for the simple states the walk meets (usually a
  // handful), so a step is two loads.
  // A map, not a table over all states: a walk meets a handful of states, and clearing
  // a table as large as a big grammar would cost more than the walk.
  std::unordered_map<uint32_t, uint32_t> row_of;
  std::vector<uint32_t> rows;
  auto row = [&](uint32_t s) -> const uint32_t* {
    auto [it, inserted] = row_of.try_emplace(s, uint32_t(rows.size()));
    if (inserted) {
      rows.resize(rows.size() + 256, kNone);
      for (const auto& e : g.byte_edges(s))
        for (int b = e.lo; b <= e.hi; ++b) rows[it->second + b] = e.to;
    }
    return rows.data() + it->second;
  };
  size_t i = 1;
  while (i < nodes.size()) {
    const VocabIndex::Node& n = nodes[i];
    if (truncate_depth && n.depth > truncate_depth) {
      // The parent is alive at the truncation depth: longer tokens are left to the
      // real parser.
      for (uint32_t r = n.rank_begin; r < n.rank_end; ++r) uncertain.push_back(r);
      i = n.end;
      continue;
    }
    const Level& up = levels[n.depth - 1];
    const bool escaped = up.escaped || (up.finished && follow.test(n.byte));
    Level child{kNone, 0, false, escaped};
    bool alive;
    if (up.simple != kNone) {
      const uint32_t t = row(up.simple)[n.byte];
      alive = t != kNone;
      if (alive && g.is_simple(t)) {
        child.simple = t;
        child.finished = g.is_final(t);
      } else if (alive) {
        parser.start_at(t);
        child.sets = 1;
        child.finished = parser.escaped();
      }
    } else {
      parser.truncate(up.sets);
      alive = parser.push(n.byte);
      if (alive) {
        child.sets = uint32_t(parser.num_sets());
        child.finished = parser.escaped();
      }
    }
    if (alive) {
      levels[n.depth] = child;
      if (n.rank >= 0) accepted.push_back(uint32_t(n.rank));
      ++i;
    } else {
      if (escaped)
        for (uint32_t r = n.rank_begin; r < n.rank_end; ++r) uncertain.push_back(r);
      i = n.end;
    }
  }

  return make_entry(v, accepted, std::move(uncertain));
}

// The fast walk for a fragment: every state a plain automaton state, so a step is one
// load from a dense row and the walk never starts a parser. Same classification as
// compute(): alive at a token's end = accepted; dead after the rule could have finished
// with a follow byte next = uncertain (the whole subtree); dead otherwise = rejected.
std::unique_ptr<TokenMasker::Entry> TokenMasker::compute_fragment(const std::vector<uint32_t>& states,
                                                                  const Entry* ref, const bool* redo) {
  ++fragment_walks_;
  if (ref) ++derived_walks_;
  const CompiledGrammar& g = *grammar_;
  const VocabIndex& v = *vocab_;
  const VocabIndex::WalkNode* nodes = v.walk_nodes().data();
  const size_t n_nodes = v.walk_nodes().size();
  constexpr uint16_t kDead = UINT16_MAX;
  std::unordered_map<uint32_t, uint16_t> canon;
  for (size_t i = 0; i < states.size(); ++i) canon[states[i]] = uint16_t(i);
  std::vector<uint16_t> next(states.size() * 256, kDead);
  std::vector<uint8_t> final(states.size());
  for (size_t i = 0; i < states.size(); ++i) {
    final[i] = g.is_final(states[i]) ? 1 : 0;
    for (const auto& e : g.byte_edges(states[i]))
      for (int b = e.lo; b <= e.hi; ++b) next[i * 256 + b] = canon.at(e.to);
  }
  uint8_t follow[256];
  const ByteSet& f = g.rule_follow(g.state_rule(states[0]));
  for (int b = 0; b < 256; ++b) follow[b] = f.test(uint8_t(b)) ? 1 : 0;

  // Per depth: the automaton state, and (bit 0) the rule can finish here, (bit 1) it
  // finished earlier on this path with a follow byte next. Depth 0's finality is the
  // caller's business (see compute()).
  const size_t levels = v.max_token_bytes() + 1;
  std::vector<uint16_t> at(levels);
  std::vector<uint8_t> flags(levels);
  at[0] = 0;
  flags[0] = 0;
  // Accepted tokens go straight into a bitmask; duplicates of a rank are rare.
  std::vector<uint32_t> words(v.mask_words(), 0);
  std::vector<uint32_t> dup_ranks, uncertain;
  // The node ranges to walk: the whole trie, or with a reference the subtrees of the
  // first bytes to redo, after taking the reference's classes for all other tokens.
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  if (!ref) {
    ranges.push_back({1, uint32_t(n_nodes)});
  } else {
    if (!ref->accepted_words.empty()) {
      words = ref->accepted_words;
    } else {
      for (int32_t id : ref->accepted_ids) words[id >> 5] |= uint32_t(1) << (id & 31);
    }
    for (int b = 0; b < 256; ++b) {
      const uint32_t node = v.first_byte_node(uint8_t(b));
      if (!node || !redo[b]) continue;
      ranges.push_back({node, nodes[node].end});
      const VocabIndex::Node& full = v.nodes()[node];
      for (uint32_t r = full.rank_begin; r < full.rank_end; ++r)
        for (int32_t id : v.rank_tokens(r)) words[id >> 5] &= ~(uint32_t(1) << (id & 31));
    }
    for (uint32_t r : ref->uncertain_ranks) {
      const uint8_t first = uint8_t(v.rank_bytes(r)[0]);
      if (!redo[first]) uncertain.push_back(r);
    }
  }
  for (const auto& [begin, end] : ranges) {
    for (size_t i = begin; i < end;) {
      const VocabIndex::WalkNode n = nodes[i];
      const uint8_t up = flags[n.depth - 1];
      const uint8_t escaped = (up & 2) | uint8_t((up & follow[n.byte]) << 1);
      const uint16_t t = next[size_t(at[n.depth - 1]) * 256 + n.byte];
      if (t != kDead) {
        at[n.depth] = t;
        flags[n.depth] = uint8_t(final[t] | escaped);
        if (n.rank >= 0) {
          const int32_t id = v.rank_first_token(uint32_t(n.rank));
          words[id >> 5] |= uint32_t(1) << (id & 31);
          if (v.rank_has_duplicates(uint32_t(n.rank))) dup_ranks.push_back(uint32_t(n.rank));
        }
        ++i;
      } else {
        if (escaped) {
          const VocabIndex::Node& full = v.nodes()[i];
          for (uint32_t r = full.rank_begin; r < full.rank_end; ++r) uncertain.push_back(r);
        }
        i = n.end;
      }
    }
  }
  for (uint32_t r : dup_ranks)
    for (int32_t id : v.rank_tokens(r)) words[id >> 5] |= uint32_t(1) << (id & 31);
  size_t num_ids = 0;
  for (uint32_t w : words) num_ids += size_t(__builtin_popcount(w));
  if (ref) std::sort(uncertain.begin(), uncertain.end());
  auto e = std::make_unique<Entry>();
  if (num_ids * 64 >= v.vocab_size()) {
    e->accepted_words = std::move(words);
  } else {
    for (size_t w = 0; w < words.size(); ++w)
      for (uint32_t bits = words[w]; bits; bits &= bits - 1)
        e->accepted_ids.push_back(int32_t(w * 32 + size_t(__builtin_ctz(bits))));
  }
  e->uncertain_ranks = std::move(uncertain);
  return e;
}

}  // namespace deepinfer::structured
