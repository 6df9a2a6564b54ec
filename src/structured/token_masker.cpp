#include "structured/token_masker.h"

#include <algorithm>
#include <unordered_set>

#include "common/check.h"
#include "structured/earley.h"

namespace deepinfer::structured {
namespace {

constexpr uint32_t kNone = UINT32_MAX;

// Walks two sorted lists of disjoint byte ranges ({lo, hi, to}) together. Returns false at
// the first byte one list covers and the other does not; otherwise calls on_pair(to_a,
// to_b) for each stretch of bytes both cover, in byte order, and returns true. Used to
// find how deep two automaton states read the same bytes into the same successors.
template <class EdgesA, class EdgesB, class OnPair>
bool same_byte_coverage(const EdgesA& ea, const EdgesB& eb, OnPair&& on_pair) {
  size_t ia = 0, ib = 0;
  int lo = 0;
  while (lo < 256) {
    while (ia < ea.size() && ea[ia].hi < lo) ++ia;
    while (ib < eb.size() && eb[ib].hi < lo) ++ib;
    const bool in_a = ia < ea.size() && ea[ia].lo <= lo, in_b = ib < eb.size() && eb[ib].lo <= lo;
    if (in_a != in_b) return false;
    // The next byte where either side's coverage changes.
    int hi = 255;
    if (ia < ea.size()) hi = std::min(hi, in_a ? int(ea[ia].hi) : int(ea[ia].lo) - 1);
    if (ib < eb.size()) hi = std::min(hi, in_b ? int(eb[ib].hi) : int(eb[ib].lo) - 1);
    if (in_a) on_pair(ea[ia].to, eb[ib].to);
    lo = hi + 1;
  }
  return true;
}

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

const BudgetTables& TokenMasker::budget() {
  std::call_once(budget_once_, [&] { budget_ = std::make_unique<const BudgetTables>(*grammar_, *vocab_); });
  return *budget_;
}

const LocalCosts* TokenMasker::budget_local_costs(uint32_t state) {
  const BudgetTables& t = budget();
  {
    std::lock_guard<std::mutex> lk(costly_mu_);
    auto it = local_costs_.find(state);
    if (it != local_costs_.end()) return it->second.get();
  }
  // Walk outside the lock; two threads may both compute it, the first to insert wins.
  auto c = local_costs(*grammar_, *vocab_, t, state);
  std::unique_ptr<const LocalCosts> p;
  if (c) p = std::make_unique<const LocalCosts>(std::move(*c));
  std::lock_guard<std::mutex> lk(costly_mu_);
  auto [it, inserted] = local_costs_.emplace(state, std::move(p));
  return it->second.get();
}

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
        // A neighbour differing in a few first bytes is the cheapest reference; failing
        // that, one agreeing on all short tokens.
        bool redo[256];
        const Entry* ref = fragment_reference(state, redo);
        std::unique_ptr<Entry> derived;
        if (!ref) {
          size_t depth = 0;
          const uint32_t dref = depth_reference(state, 0, &depth);
          if (dref != kNone) {
            derived = derive_by_depth(state, entry(dref), depth, 0);
          } else if (std::shared_ptr<const Entry> anchor = anchor_reference(state, &depth)) {
            derived = derive_by_depth(state, *anchor, depth, 0);
          }
        }
        const bool walked = !derived && !ref;
        std::vector<uint32_t> uncertain_any;
        if (!derived) derived = compute_fragment(states, ref, redo, walked ? &uncertain_any : nullptr);
        // A full walk that accepted much of the vocabulary is a good anchor for others.
        // The anchor keeps the uncertain set of a follow set of all bytes (its key says
        // so), which suits every follow set: its rejected tokens never finished the rule.
        if (walked && !derived->accepted_words.empty()) {
          auto anchor = std::make_shared<Entry>();
          anchor->accepted_words = derived->accepted_words;
          anchor->uncertain_ranks = std::move(uncertain_any);
          std::string anchor_key = key;
          std::fill(anchor_key.end() - 32, anchor_key.end(), char(0xFF));
          cache.insert(anchor_key, std::move(anchor));
          cache.add_anchor(anchor_key);
        }
        found = cache.insert(key, std::shared_ptr<const Entry>(std::move(derived)));
      }
      note_computed(state, 0);
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
  const size_t truncate = share ? size_t(share_depth_) : 0;
  std::shared_ptr<const Entry> computed;
  if (share) {
    size_t depth = 0;
    const uint32_t dref = depth_reference(state, truncate, &depth);
    if (dref != kNone) {
      computed = derive_by_depth(state, entry(dref), depth, truncate);
    } else if (std::shared_ptr<const Entry> anchor = anchor_reference(state, &depth)) {
      computed = derive_by_depth(state, *anchor, depth, truncate);
    }
  }
  if (!computed) computed = compute(state, truncate);
  if (share) note_computed(state, truncate);
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

void TokenMasker::note_computed(uint32_t state, size_t truncate_depth) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& recent = depth_refs_[grammar_->state_rule(state)];
  for (const auto& [s, t] : recent)
    if (s == state) return;
  if (recent.size() >= 8) recent.erase(recent.begin());
  recent.push_back({state, truncate_depth});
  if (recent_simple_.size() >= 16) recent_simple_.erase(recent_simple_.begin());
  recent_simple_.push_back({state, truncate_depth});
}

uint32_t TokenMasker::depth_reference(uint32_t state, size_t truncate_depth, size_t* depth) {
  const CompiledGrammar& g = *grammar_;
  const VocabIndex& v = *vocab_;
  std::vector<std::pair<uint32_t, size_t>> candidates;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = depth_refs_.find(g.state_rule(state));
    if (it != depth_refs_.end()) candidates = it->second;
    // States of other rules with the same follow set qualify too (e.g. the unbounded
    // string body for the first position of a maxLength string).
    const ByteSet& follow = g.rule_follow(g.state_rule(state));
    for (const auto& c : recent_simple_)
      if (g.state_rule(c.first) != g.state_rule(state) && std::equal(follow.w, follow.w + 4, g.rule_follow(g.state_rule(c.first)).w))
        candidates.push_back(c);
  }
  uint32_t best = kNone;
  size_t best_depth = 0;
  for (const auto& [c, t] : candidates) {
    if (c == state || !entries_[c].load(std::memory_order_acquire)) continue;
    // Past kUsefulDepth the tokens left to walk are a sliver of the trie anyway.
    constexpr size_t kUsefulDepth = 24;
    size_t d = agreement_depth(state, c, std::min(v.max_token_bytes(), kUsefulDepth));
    // A truncated entry is exact only up to its truncation depth (the first positions of
    // a long maxLength string are truncated; the last ones, small fragments, are not).
    if (t) d = std::min(d, t);
    if (d > best_depth) best = c, best_depth = d;
  }
  // Worth it only when the tokens left to walk are a small part of the trie (a walk of
  // them also re-steps each subtree root's prefix).
  if (best == kNone || v.nodes_deeper_than(best_depth) * 3 > v.walk_nodes().size()) return kNone;
  // A plain walk costs about as many node visits as the tokens it accepts; deriving
  // costs about the tokens longer than the depth. Short literals die in a few hundred
  // visits and are cheaper to walk.
  const Entry& ref = *entries_[best].load(std::memory_order_acquire);
  size_t accepted = ref.accepted_ids.size();
  for (uint32_t w : ref.accepted_words) accepted += size_t(__builtin_popcount(w));
  if (accepted < 2 * v.nodes_deeper_than(best_depth)) return kNone;
  *depth = best_depth;
  return best;
}

std::shared_ptr<const TokenMasker::Entry> TokenMasker::anchor_reference(uint32_t state, size_t* depth) {
  const CompiledGrammar& g = *grammar_;
  const VocabIndex& v = *vocab_;
  FragmentEntryCache& cache = v.fragment_cache();
  const ByteSet& follow = g.rule_follow(g.state_rule(state));
  constexpr size_t kUsefulDepth = 24;
  std::shared_ptr<const Entry> best;
  size_t best_depth = 0;
  for (const std::string& key : cache.anchors()) {
    // Decode the key (see fragment_key): "F1", per state its finality, edge count and
    // edges (lo, hi, target), then the follow set's 32 bytes.
    struct State {
      bool final;
      std::vector<CompiledGrammar::ByteEdge> edges;
    };
    std::vector<State> b;
    size_t p = 2;
    auto get16 = [&](size_t at) { return uint32_t(uint8_t(key[at])) | (uint32_t(uint8_t(key[at + 1])) << 8); };
    while (p + 32 < key.size()) {
      State st{key[p] != 0, {}};
      const uint32_t n = get16(p + 1);
      p += 3;
      for (uint32_t k = 0; k < n; ++k, p += 4) st.edges.push_back({uint8_t(key[p]), uint8_t(key[p + 1]), get16(p + 2)});
      b.push_back(std::move(st));
    }
    if (b.empty() || p + 32 != key.size()) continue;
    bool covers = true;
    for (int w = 0; w < 4; ++w) {
      uint64_t fw = 0;
      for (int k = 0; k < 8; ++k) fw |= uint64_t(uint8_t(key[p + 8 * w + k])) << (8 * k);
      covers = covers && (follow.w[w] & ~fw) == 0;
    }
    if (!covers) continue;
    // Breadth-first over (grammar state, anchor state) pairs, as agreement_depth.
    struct Pair {
      uint32_t a, b;
      size_t depth;
    };
    std::vector<Pair> queue{{state, 0, 0}};
    std::unordered_set<uint64_t> seen{uint64_t(state) << 32};
    size_t agree = std::min(v.max_token_bytes(), kUsefulDepth);
    for (size_t i = 0; i < queue.size(); ++i) {
      const Pair q = queue[i];
      if (q.depth >= agree) break;
      if (!g.is_simple(q.a) || (q.depth > 0 && g.is_final(q.a) != b[q.b].final)) {
        agree = q.depth;
        break;
      }
      const auto ea = g.byte_edges(q.a);
      const auto& eb = b[q.b].edges;
      // Both edge lists are sorted, disjoint ranges; they must cover the same bytes.
      const bool differs = !same_byte_coverage(ea, eb, [&](uint32_t ta, uint32_t tb) {
        if (seen.insert((uint64_t(ta) << 32) | tb).second) queue.push_back({ta, tb, q.depth + 1});
      });
      if (differs || queue.size() > 2048) {
        agree = q.depth;
        break;
      }
    }
    if (agree > best_depth) {
      std::shared_ptr<const Entry> e = cache.find(key);
      if (e) best = std::move(e), best_depth = agree;
    }
  }
  if (!best || v.nodes_deeper_than(best_depth) * 3 > v.walk_nodes().size()) return nullptr;
  size_t accepted = best->accepted_ids.size();
  for (uint32_t w : best->accepted_words) accepted += size_t(__builtin_popcount(w));
  if (accepted < 2 * v.nodes_deeper_than(best_depth)) return nullptr;
  *depth = best_depth;
  return best;
}

size_t TokenMasker::agreement_depth(uint32_t a, uint32_t b, size_t limit) const {
  const CompiledGrammar& g = *grammar_;
  // Breadth-first over pairs of states reached by the same bytes; the first pair that
  // differs (in finality past depth 0, in the bytes it can read, or in having rule
  // calls) bounds the depth. A pair of one state agrees on everything below it.
  struct Pair {
    uint32_t a, b;
    size_t depth;
  };
  std::vector<Pair> queue{{a, b, 0}};
  std::unordered_set<uint64_t> seen{(uint64_t(a) << 32) | b};
  size_t agree = limit;
  constexpr size_t kMaxPairs = 2048;
  for (size_t i = 0; i < queue.size(); ++i) {
    const Pair p = queue[i];
    if (p.depth >= agree) break;  // breadth-first: every later pair is as deep
    if (p.a == p.b) continue;
    if (!g.is_simple(p.a) || !g.is_simple(p.b) || (p.depth > 0 && g.is_final(p.a) != g.is_final(p.b))) {
      agree = p.depth;
      break;
    }
    const auto ea = g.byte_edges(p.a), eb = g.byte_edges(p.b);
    // Walk both sorted range lists together, byte range by byte range.
    const bool differs = !same_byte_coverage(ea, eb, [&](uint32_t ta, uint32_t tb) {
      if (seen.insert((uint64_t(ta) << 32) | tb).second) queue.push_back({ta, tb, p.depth + 1});
    });
    if (differs || queue.size() > kMaxPairs) {
      agree = p.depth;
      break;
    }
  }
  return agree;
}

std::unique_ptr<TokenMasker::Entry> TokenMasker::derive_by_depth(uint32_t state, const Entry& ref, size_t depth,
                                                                 size_t truncate_depth) {
  const CompiledGrammar& g = *grammar_;
  const VocabIndex& v = *vocab_;
  const std::vector<VocabIndex::Node>& nodes = v.nodes();
  const ByteSet& follow = g.rule_follow(g.state_rule(state));
  // A truncated entry may be shared by states agreeing only up to the truncation depth,
  // so past it tokens stay uncertain (the walk below does that).
  if (truncate_depth) depth = std::min(depth, truncate_depth);
  // Tokens of at most `depth` bytes: the reference's classes.
  std::vector<uint32_t> words(v.mask_words(), 0);
  if (!ref.accepted_words.empty()) {
    words = ref.accepted_words;
  } else {
    for (int32_t id : ref.accepted_ids) words[id >> 5] |= uint32_t(1) << (id & 31);
  }
  // The reference's uncertain short tokens die after its rule could finish; whether they
  // are uncertain here depends on this rule's follow set (the reference's may be larger,
  // e.g. an anchor's of all bytes), so each is stepped once: a few hundred short paths.
  std::vector<uint32_t> uncertain;
  for (uint32_t r : ref.uncertain_ranks) {
    const std::string_view w = v.rank_bytes(r);
    if (w.size() > depth) continue;
    uint32_t s = state;
    bool finished = false, esc = false, alive = true;
    for (unsigned char c : w) {
      esc = esc || (finished && follow.test(c));
      if (!g.is_simple(s)) return nullptr;
      const uint32_t t = g.step_simple(s, c);
      if (t == kNone) {
        alive = false;
        break;
      }
      s = t;
      finished = g.is_final(t);
    }
    if (!alive && esc) uncertain.push_back(r);
    if (alive)  // (cannot happen: it agrees with the reference, where it died)
      for (int32_t id : v.rank_tokens(r)) words[id >> 5] |= uint32_t(1) << (id & 31);
  }
  const std::span<const uint32_t> roots = v.nodes_at_depth(depth + 1);
  for (uint32_t root : roots)
    for (uint32_t r = nodes[root].rank_begin; r < nodes[root].rank_end; ++r)
      for (int32_t id : v.rank_tokens(r)) words[id >> 5] &= ~(uint32_t(1) << (id & 31));

  // Longer tokens: re-step each root's prefix (sharing the common part with the previous
  // root's), then walk its subtree as compute() does in simple mode.
  struct Level {
    uint32_t state;  // kNone: dead
    bool finished, escaped;
  };
  std::vector<Level> levels(v.max_token_bytes() + 1);
  levels[0] = {state, false, false};
  std::unordered_map<uint32_t, uint32_t> row_of;
  std::vector<uint32_t> rows;
  bool calls = false;
  auto row = [&](uint32_t s) -> const uint32_t* {
    auto [it, inserted] = row_of.try_emplace(s, uint32_t(rows.size()));
    if (inserted) {
      rows.resize(rows.size() + 256, kNone);
      for (const auto& e : g.byte_edges(s))
        for (int b = e.lo; b <= e.hi; ++b) rows[it->second + b] = e.to;
    }
    return rows.data() + it->second;
  };
  // One byte from level d-1 to d; false when the path dies (child escaped flag in `esc`).
  auto step = [&](size_t d, uint8_t byte, bool* esc) {
    const Level& up = levels[d - 1];
    *esc = up.escaped || (up.finished && follow.test(byte));
    if (up.state == kNone) return false;
    const uint32_t t = row(up.state)[byte];
    if (t == kNone) return false;
    if (!g.is_simple(t)) calls = true;
    levels[d] = {t, g.is_final(t), *esc};
    return true;
  };
  std::string_view prev;
  size_t valid = 0;  // levels[0..valid] hold the prefix of `prev`
  std::vector<uint32_t> accepted;
  for (size_t ri = 0; ri < roots.size(); ++ri) {
    const uint32_t root = roots[ri];
    const std::string_view w = v.rank_bytes(nodes[root].rank_begin);
    size_t lcp = 0;
    while (lcp < valid && lcp < depth && prev[lcp] == w[lcp]) ++lcp;
    size_t d = lcp;
    bool esc = false, alive = true, truncated = false;
    while (d < depth) {
      if (truncate_depth && d + 1 > truncate_depth) {
        truncated = true;  // alive at the truncation depth: left to the real parser
        break;
      }
      if (!step(d + 1, uint8_t(w[d]), &esc)) {
        alive = false;
        break;
      }
      ++d;
    }
    if (calls) return nullptr;
    prev = w;
    valid = d;
    if (truncated) {
      for (uint32_t r = nodes[root].rank_begin; r < nodes[root].rank_end; ++r) uncertain.push_back(r);
      continue;
    }
    if (!alive) {
      // Every token under the root dies at byte d + 1 (<= depth), and so does every
      // later root with the same d + 1 first bytes: skip them together.
      const uint32_t dead_end = v.prefix_rank_end(nodes[root].rank_begin, d + 1);
      for (;;) {
        if (esc)
          for (uint32_t r = nodes[roots[ri]].rank_begin; r < nodes[roots[ri]].rank_end; ++r) uncertain.push_back(r);
        if (ri + 1 < roots.size() && nodes[roots[ri + 1]].rank_begin < dead_end) ++ri;
        else break;
      }
      continue;
    }
    for (size_t i = root; i < nodes[root].end;) {
      const VocabIndex::Node& n = nodes[i];
      if (truncate_depth && n.depth > truncate_depth) {
        for (uint32_t r = n.rank_begin; r < n.rank_end; ++r) uncertain.push_back(r);
        i = n.end;
        continue;
      }
      if (step(n.depth, n.byte, &esc)) {
        if (calls) return nullptr;
        if (n.rank >= 0) accepted.push_back(uint32_t(n.rank));
        ++i;
      } else {
        if (esc)
          for (uint32_t r = n.rank_begin; r < n.rank_end; ++r) uncertain.push_back(r);
        i = n.end;
      }
    }
  }
  ++depth_derived_;
  for (uint32_t r : accepted)
    for (int32_t id : v.rank_tokens(r)) words[id >> 5] |= uint32_t(1) << (id & 31);
  std::sort(uncertain.begin(), uncertain.end());
  size_t num_ids = 0;
  for (uint32_t w : words) num_ids += size_t(__builtin_popcount(w));
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

  // Earley mode runs on configurations: an Earley set with each item's origin replaced
  // by the configuration of its origin set (hash-consed, so equal ids mean equal parser
  // futures). The walk meets few distinct ones (after "1" and after "7" the sets are
  // the same; so are those after " " and "\n"), so each configuration gets a dense
  // 256-entry transition row filled on first use by a real push, and most trie nodes
  // cost one load. The parser is only brought along a path (by replaying its bytes)
  // when a transition is not known yet.
  constexpr uint32_t kUnknown = kNone - 1;
  struct Level {
    uint32_t simple;  // the automaton state in simple mode, else kNone
    uint32_t config;  // the configuration in Earley mode
    uint32_t sets;    // the parser's set count when the parser holds this level, else 0
    bool finished;    // the rule can finish here (only counted after the first byte)
    bool escaped;     // the rule finished earlier on this path with a follow byte next
    uint8_t byte;     // the byte that led here
  };
  std::vector<Level> levels(v.max_token_bytes() + 1);
  std::vector<uint32_t> set_config;  // by parser set index, along the parser's path
  std::unordered_map<std::string, uint32_t> config_ids;
  std::vector<uint8_t> config_finished;
  std::vector<uint32_t> config_rows;
  std::string key;
  std::vector<uint64_t> items;
  // The configuration of the parser's last set (interned).
  auto intern = [&]() -> uint32_t {
    const uint32_t cur = uint32_t(parser.num_sets() - 1);
    items.clear();
    for (const EarleyParser::Item& it : parser.last_set()) {
      const uint32_t o = it.origin == EarleyParser::kOutside ? kNone : it.origin == cur ? kNone - 1 : set_config[it.origin];
      items.push_back((uint64_t(it.state) << 32) | o);
    }
    std::sort(items.begin(), items.end());
    key.assign(reinterpret_cast<const char*>(items.data()), items.size() * sizeof(uint64_t));
    auto [it, inserted] = config_ids.try_emplace(key, uint32_t(config_finished.size()));
    if (inserted) {
      config_finished.push_back(parser.escaped() ? 1 : 0);
      // Bytes no item can read are dead transitions from the start: most children of a
      // busy node then cost neither a replay nor a failed push.
      const size_t base = config_rows.size();
      config_rows.resize(base + 256, kNone);
      for (const EarleyParser::Item& it : parser.last_set())
        for (const auto& e : g.byte_edges(it.state))
          std::fill(config_rows.begin() + base + e.lo, config_rows.begin() + base + e.hi + 1, kUnknown);
    }
    if (set_config.size() <= cur) set_config.resize(cur + 1);
    set_config[cur] = it->second;
    return it->second;
  };
  // Brings the parser to level d of the current path, replaying bytes from the deepest
  // level it still holds (the level where Earley mode began always is held).
  auto materialize = [&](size_t d) {
    size_t j = d;
    while (levels[j].sets == 0) --j;
    parser.truncate(levels[j].sets);
    for (size_t k = j + 1; k <= d; ++k) {
      const bool ok = parser.push(levels[k].byte);
      DI_CHECK(ok, "replayed path died");
      levels[k].sets = uint32_t(parser.num_sets());
      intern();
    }
  };

  if (g.is_simple(state)) {
    levels[0] = {state, 0, 0, false, false, 0};
  } else {
    parser.start_at(state);
    levels[0] = {kNone, intern(), 1, false, false, 0};
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
    Level child{kNone, 0, 0, false, escaped, n.byte};
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
        child.config = intern();
        child.finished = config_finished[child.config];
      }
    } else {
      uint32_t t = config_rows[size_t(up.config) * 256 + n.byte];
      if (t == kUnknown) {
        materialize(n.depth - 1);
        if (parser.push(n.byte)) {
          t = intern();
          child.sets = uint32_t(parser.num_sets());
        } else {
          t = kNone;
        }
        config_rows[size_t(up.config) * 256 + n.byte] = t;
      }
      alive = t != kNone;
      if (alive) {
        child.config = t;
        child.finished = config_finished[t];
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
                                                                  const Entry* ref, const bool* redo,
                                                                  std::vector<uint32_t>* uncertain_any) {
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
      // Bit 2: finished earlier on this path, whatever byte came next.
      const uint8_t escaped_any = (up & 4) | uint8_t((up & 1) << 2);
      const uint16_t t = next[size_t(at[n.depth - 1]) * 256 + n.byte];
      if (t != kDead) {
        at[n.depth] = t;
        flags[n.depth] = uint8_t(final[t] | escaped | escaped_any);
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
        if (escaped_any && uncertain_any) {
          const VocabIndex::Node& full = v.nodes()[i];
          for (uint32_t r = full.rank_begin; r < full.rank_end; ++r) uncertain_any->push_back(r);
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
