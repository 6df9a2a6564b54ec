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

const TokenMasker::Entry& TokenMasker::entry(uint32_t state) {
  const Entry* e = entries_[state].load(std::memory_order_acquire);
  if (e) return *e;
  const CompiledGrammar& g = *grammar_;
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
  std::unique_ptr<Entry> computed = compute(state, share ? size_t(share_depth_) : 0);
  std::lock_guard<std::mutex> lock(mu_);
  e = entries_[state].load(std::memory_order_acquire);
  if (e) return *e;
  if (share) {
    auto [it, inserted] = shared_.try_emplace(key, computed.get());
    if (!inserted) {  // another thread computed the same entry meanwhile
      entries_[state].store(it->second, std::memory_order_release);
      return *it->second;
    }
  }
  cached_bytes_ += computed->bytes();
  ++num_entries_;
  e = computed.get();
  owned_.push_back(std::move(computed));
  entries_[state].store(e, std::memory_order_release);
  return *e;
}

size_t TokenMasker::precompute_all() {
  for (uint32_t s = 0; s < grammar_->num_states(); ++s) entry(s);
  return grammar_->num_states();
}

// One depth-first walk over the vocabulary trie from the item (state, outside).
// Along a path the walk runs in "simple" mode (a plain automaton step per byte) while
// the rule has no calls, and in Earley mode below the first byte that needs one.
std::unique_ptr<TokenMasker::Entry> TokenMasker::compute(uint32_t state, size_t truncate_depth) const {
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
  std::vector<uint32_t> row_of(g.num_states(), kNone);
  std::vector<uint32_t> rows;
  auto row = [&](uint32_t s) -> const uint32_t* {
    if (row_of[s] == kNone) {
      row_of[s] = uint32_t(rows.size());
      rows.resize(rows.size() + 256, kNone);
      for (const auto& e : g.byte_edges(s))
        for (int b = e.lo; b <= e.hi; ++b) rows[row_of[s] + b] = e.to;
    }
    return rows.data() + row_of[s];
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

  auto e = std::make_unique<Entry>();
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

}  // namespace deepinfer::structured
