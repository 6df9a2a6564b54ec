#include "structured/matcher.h"

#include <algorithm>
#include <cstring>

#include "common/check.h"

namespace deepinfer::structured {

GrammarMatcher::GrammarMatcher(std::shared_ptr<TokenMasker> masker)
    : masker_(std::move(masker)), parser_(&masker_->grammar()) {
  reset();
}

void GrammarMatcher::reset() {
  costs_.clear();
  parser_.start_root();
  steps_.assign(1, {parser_.num_sets(), false});
}

bool GrammarMatcher::accept_token(int64_t token_id) {
  if (is_terminated()) return false;
  const VocabIndex& v = masker_->vocab();
  if (token_id == v.eos_id() && token_id >= 0) {
    if (!parser_.can_end()) return false;
    steps_.push_back({parser_.num_sets(), true});
    return true;
  }
  const int32_t rank = v.token_rank(token_id);
  if (rank < 0) return false;
  return accept_bytes(v.rank_bytes(uint32_t(rank)));
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (is_terminated()) return false;
  const size_t base = parser_.num_sets();
  for (unsigned char c : bytes) {
    if (!parser_.push(c)) {
      truncate(base);
      return false;
    }
  }
  steps_.push_back({parser_.num_sets(), false});
  return true;
}

void GrammarMatcher::rollback(size_t n) {
  DI_CHECK(n <= num_steps(), "rollback of ", n, " steps after only ", num_steps());
  steps_.resize(steps_.size() - n);
  truncate(steps_.back().num_sets);
}

std::string GrammarMatcher::jump_forward_bytes(size_t max_bytes) {
  std::string out;
  if (is_terminated()) return out;
  const size_t base = parser_.num_sets();
  while (out.size() < max_bytes && !parser_.can_end()) {
    const ByteSet next = parser_.next_bytes();
    if (next.count() != 1) break;
    int b = 0;
    while (!next.test(uint8_t(b))) ++b;
    if (!parser_.push(uint8_t(b))) break;
    out += char(b);
  }
  truncate(base);
  return out;
}

void GrammarMatcher::fill_next_token_bitmask(std::span<uint32_t> words) {
  const VocabIndex& v = masker_->vocab();
  const CompiledGrammar& g = masker_->grammar();
  DI_CHECK(words.size() >= v.mask_words(), "bitmask has ", words.size(), " words, needs ", v.mask_words());
  if (is_terminated()) {
    std::memset(words.data(), 0, v.mask_words() * sizeof(uint32_t));
    return;
  }

  // Kernel items: those that began before the current position. The others were
  // predicted here from them, and their tokens are covered by the kernels' entries.
  const uint32_t cur = uint32_t(parser_.num_sets() - 1);
  kernels_.clear();
  if (cur == 0) {
    kernels_.push_back(g.rule_start(g.root()));
  } else {
    for (const EarleyParser::Item& it : parser_.last_set())
      if (it.origin < cur) kernels_.push_back(it.state);
    std::sort(kernels_.begin(), kernels_.end());
    kernels_.erase(std::unique(kernels_.begin(), kernels_.end()), kernels_.end());
  }

  candidates_.clear();
  // The first dense entry is copied rather than OR-ed into a cleared mask: one pass over
  // the 16 KB instead of two, on the path nearly every step takes.
  bool cleared = false;
  for (uint32_t k : kernels_) {
    const TokenMasker::Entry& e = masker_->entry(k);
    if (!e.accepted_words.empty()) {
      if (!cleared) {
        std::memcpy(words.data(), e.accepted_words.data(), v.mask_words() * sizeof(uint32_t));
        cleared = true;
      } else {
        for (size_t w = 0; w < e.accepted_words.size(); ++w) words[w] |= e.accepted_words[w];
      }
    }
  }
  if (!cleared) std::memset(words.data(), 0, v.mask_words() * sizeof(uint32_t));
  for (uint32_t k : kernels_) {
    const TokenMasker::Entry& e = masker_->entry(k);
    for (int32_t id : e.accepted_ids) words[id >> 5] |= uint32_t(1) << (id & 31);
    candidates_.insert(candidates_.end(), e.uncertain_ranks.begin(), e.uncertain_ranks.end());
  }
  if (kernels_.size() > 1) {
    std::sort(candidates_.begin(), candidates_.end());
    candidates_.erase(std::unique(candidates_.begin(), candidates_.end()), candidates_.end());
  }

  // Check the uncertain ranks with the real parser, sharing prefixes between
  // neighbours and skipping every rank that shares a failed prefix.
  const size_t base = parser_.num_sets();
  std::string_view prev;
  size_t depth = 0;  // bytes of `prev` currently pushed
  for (size_t i = 0; i < candidates_.size();) {
    const uint32_t r = candidates_[i];
    const std::span<const int32_t> ids = v.rank_tokens(r);
    if ((words[ids[0] >> 5] >> (ids[0] & 31)) & 1) {
      ++i;
      continue;
    }
    const std::string_view w = v.rank_bytes(r);
    size_t lcp = 0;
    const size_t limit = std::min(depth, w.size());
    while (lcp < limit && prev[lcp] == w[lcp]) ++lcp;
    parser_.truncate(base + lcp);
    depth = lcp;
    while (depth < w.size() && parser_.push(uint8_t(w[depth]))) ++depth;
    prev = w;
    if (depth == w.size()) {
      for (int32_t id : ids) words[id >> 5] |= uint32_t(1) << (id & 31);
      ++i;
    } else {
      const uint32_t end = v.prefix_rank_end(r, depth + 1);
      i = size_t(std::lower_bound(candidates_.begin() + i + 1, candidates_.end(), end) - candidates_.begin());
    }
  }
  parser_.truncate(base);
  if (v.eos_id() >= 0 && parser_.can_end()) words[v.eos_id() >> 5] |= uint32_t(1) << (v.eos_id() & 31);
}

const BudgetTables& GrammarMatcher::tables() {
  if (!tables_) tables_ = &masker_->budget();
  return *tables_;
}

void GrammarMatcher::truncate(size_t num_sets) {
  parser_.truncate(num_sets);
  if (costs_.size() > num_sets) costs_.resize(num_sets);
}

const GrammarMatcher::RuleCost& GrammarMatcher::rule_cost(size_t set, uint32_t rule) {
  while (costs_.size() <= set) compute_costs(costs_.size());
  const std::vector<RuleCost>& c = costs_[set];
  auto it = std::lower_bound(c.begin(), c.end(), rule, [](const RuleCost& x, uint32_t r) { return x.rule < r; });
  // Every item's rule was called at its origin (or is the root at 0): a missing entry
  // would be a parser bug.
  DI_CHECK(it != c.end() && it->rule == rule, "no caller of rule ", rule, " at parse position ", set);
  return *it;
}

void GrammarMatcher::compute_costs(size_t j) {
  DI_CHECK(costs_.size() == j, "per-set costs out of order");
  const CompiledGrammar& g = masker_->grammar();
  const BudgetTables& bt = tables();
  constexpr uint32_t kInf = BudgetTables::kInf;
  const auto items = parser_.set(j);
  std::vector<RuleCost> c;
  for (const EarleyParser::Item& it : items)
    for (const auto& e : g.rule_edges(it.state)) c.push_back({e.rule, kInf, 0});
  if (j == 0 && g.num_rules() > 0) c.push_back({g.root(), kInf, 0});
  std::sort(c.begin(), c.end(), [](const RuleCost& a, const RuleCost& b) { return a.rule < b.rule; });
  c.erase(std::unique(c.begin(), c.end(), [](const RuleCost& a, const RuleCost& b) { return a.rule == b.rule; }),
          c.end());
  auto find = [&](uint32_t rule) -> RuleCost& {
    return *std::lower_bound(c.begin(), c.end(), rule, [](const RuleCost& x, uint32_t r) { return x.rule < r; });
  };
  // The whole output is the root called at 0 by nobody: nothing follows it.
  if (j == 0 && g.num_rules() > 0) {
    RuleCost& r = find(g.root());
    r.min = r.escape = 0;
  }
  // A caller (p, o) of R with return state t: after R, t must be finished (dist(t)),
  // then p's own callers at o (their cheapest chain). A path that finishes R mid-token
  // continues in the caller's frame at t: at most reach(t) there plus that chain, or it
  // finishes p's rule too and escapes further. Callers that started before j have final
  // costs; callers predicted at j itself depend on this set's own entries, so each
  // quantity is iterated to its fixed point, the minima first (the escape bound reads
  // them): min is a shortest path over at most |c| rules, escape a maximum without
  // weights on the caller-to-callee edges, so both settle within |c| + 1 rounds; the
  // round limit only keeps a bug from looping (escape then becomes unbounded: sound).
  auto each_caller = [&](bool same_set, auto&& relax) {
    bool changed = false;
    for (const EarleyParser::Item& it : items) {
      if ((same_set ? it.origin != j : it.origin >= j) || g.rule_edges(it.state).empty()) continue;
      const RuleCost caller = same_set ? find(g.state_rule(it.state)) : rule_cost(it.origin, g.state_rule(it.state));
      for (const auto& e : g.rule_edges(it.state)) changed |= relax(find(e.rule), e.to, caller);
    }
    return changed;
  };
  auto relax_min = [&](RuleCost& to, uint32_t t, const RuleCost& caller) {
    const uint32_t mn = BudgetTables::add(bt.dist(t), caller.min);
    if (mn >= to.min) return false;
    to.min = mn;
    return true;
  };
  auto relax_escape = [&](RuleCost& to, uint32_t t, const RuleCost& caller) {
    const uint32_t es = std::max(BudgetTables::add(bt.reach(t), caller.min), caller.escape);
    if (es <= to.escape) return false;
    to.escape = es;
    return true;
  };
  each_caller(false, relax_min);
  for (size_t round = 0; round <= c.size() + 1 && each_caller(true, relax_min); ++round) {
  }
  each_caller(false, relax_escape);
  bool changed = true;
  for (size_t round = 0; changed && round <= c.size() + 1; ++round) changed = each_caller(true, relax_escape);
  if (changed)
    for (RuleCost& r : c) r.escape = kInf;
  costs_.push_back(std::move(c));
}

uint32_t GrammarMatcher::min_bytes_last() {
  const CompiledGrammar& g = masker_->grammar();
  const BudgetTables& bt = tables();
  const size_t k = parser_.num_sets() - 1;
  if (g.num_rules() == 0) return BudgetTables::kInf;
  // Items predicted at k cost at least as much as the items that predicted them, so the
  // items that started before k (at 0: the root's start) decide.
  if (k == 0) return bt.dist(g.rule_start(g.root()));
  uint32_t best = BudgetTables::kInf;
  for (const EarleyParser::Item& it : parser_.last_set()) {
    if (it.origin >= k) continue;
    best = std::min(best, BudgetTables::add(bt.dist(it.state), rule_cost(it.origin, g.state_rule(it.state)).min));
  }
  return best;
}

uint32_t GrammarMatcher::bound_last() {
  const CompiledGrammar& g = masker_->grammar();
  const BudgetTables& bt = tables();
  const size_t k = parser_.num_sets() - 1;
  if (g.num_rules() == 0) return BudgetTables::kInf;
  if (k == 0) return bt.reach(g.rule_start(g.root()));
  // A token's path from an item either stays in the item's frame, ending in an item
  // whose cheapest way out is at most reach(state) plus the item's own cheapest callers,
  // or finishes the rule and continues in a caller's frame (escape).
  uint32_t bound = 0;
  for (const EarleyParser::Item& it : parser_.last_set()) {
    if (it.origin >= k) continue;
    const RuleCost& c = rule_cost(it.origin, g.state_rule(it.state));
    bound = std::max({bound, BudgetTables::add(bt.reach(it.state), c.min), c.escape});
  }
  return bound;
}

uint32_t GrammarMatcher::min_bytes_to_accept() {
  if (is_terminated()) return 0;
  return min_bytes_last();
}

bool GrammarMatcher::restrict_to_budget(std::span<uint32_t> words, int64_t tokens_left) {
  const VocabIndex& v = masker_->vocab();
  DI_CHECK(words.size() >= v.mask_words(), "bitmask has ", words.size(), " words, needs ", v.mask_words());
  if (is_terminated()) return true;
  const uint32_t need = min_bytes_last();
  if (tokens_left < 0 || int64_t(need) > tokens_left) return false;
  auto test = [&](int64_t id) { return (words[size_t(id) >> 5] >> (id & 31)) & 1u; };
  auto clear = [&](uint32_t rank) {
    for (int32_t id : v.rank_tokens(rank)) words[size_t(id) >> 5] &= ~(uint32_t(1) << (id & 31));
  };
  const int64_t eos = v.eos_id();
  if (tokens_left == 0) {  // need == 0: the match is complete, only EOS may follow
    const bool eos_on = eos >= 0 && test(eos);
    std::memset(words.data(), 0, v.mask_words() * sizeof(uint32_t));
    if (eos_on) words[size_t(eos) >> 5] |= uint32_t(1) << (eos & 31);
    return true;
  }
  const uint32_t limit = uint32_t(std::min<int64_t>(tokens_left - 1, BudgetTables::kInf - 1));
  if (bound_last() <= limit) return true;  // no token can leave the budget
  original_.assign(words.begin(), words.begin() + ptrdiff_t(v.mask_words()));

  // Tokens some kernel item reads inside its own rule end, along that path, at most
  // reach(state) + the item's cheapest callers away from a match (the mask cache's
  // ACCEPTED sets): where that fits, they are proven. Where it does not but the state's
  // automaton is plain (a string body, a number), each such token's cost is known
  // exactly (local_costs): all but the `above` ones cost at most dist(state) and are
  // proven. The rest are checked by a walk.
  const CompiledGrammar& g = masker_->grammar();
  const BudgetTables& bt = tables();
  const size_t k = parser_.num_sets() - 1;
  proven_.assign(v.mask_words(), 0);
  auto prove = [&](uint32_t state) {
    const TokenMasker::Entry& e = masker_->entry(state);
    for (size_t w = 0; w < e.accepted_words.size(); ++w) proven_[w] |= e.accepted_words[w];
    for (int32_t id : e.accepted_ids) proven_[size_t(id) >> 5] |= uint32_t(1) << (id & 31);
  };
  auto set_rank = [&](std::vector<uint32_t>& bits, uint32_t rank, bool on) {
    for (int32_t id : v.rank_tokens(rank)) {
      if (on) bits[size_t(id) >> 5] |= uint32_t(1) << (id & 31);
      else bits[size_t(id) >> 5] &= ~(uint32_t(1) << (id & 31));
    }
  };
  std::vector<uint32_t> full;  // states whose accepted tokens all fit
  if (k == 0) {
    if (bt.reach(g.rule_start(g.root())) <= limit) full.push_back(g.rule_start(g.root()));
  } else {
    const auto items = parser_.last_set();
    // Every item in a plain state (string bodies, keys, numbers): a token read inside
    // state s reaches exactly one state, so along that path its shortest completion is
    // exactly its local cost plus s's cheapest callers, and the new parse's minimum is
    // the minimum over the states that read it inside -- unless some state could also
    // finish its rule mid-token (`mixed`) or the token reaches a rule call (`calls`):
    // those are left to the walk, as are the tokens no state reads inside (the mask
    // cache's uncertain ones). Every other token is decided here: it stays iff some
    // state's cost for it fits.
    std::vector<std::pair<uint32_t, uint32_t>> states;  // (state, cheapest callers)
    bool plain = true;
    for (const EarleyParser::Item& it : items) {
      if (it.origin >= k || !g.is_simple(it.state)) {
        plain = false;
        break;
      }
      const uint32_t c = rule_cost(it.origin, g.state_rule(it.state)).min;
      auto same = std::find_if(states.begin(), states.end(), [&](const auto& p) { return p.first == it.state; });
      if (same == states.end()) states.push_back({it.state, c});
      else same->second = std::min(same->second, c);
    }
    std::vector<const LocalCosts*> lcs;
    for (size_t i = 0; plain && i < states.size(); ++i) {
      lcs.push_back(masker_->budget_local_costs(states[i].first));
      plain = lcs.back() != nullptr;
    }
    if (plain) {
      std::vector<uint32_t>& inside = saved_;  // scratch
      inside.assign(v.mask_words(), 0);
      risky_.assign(v.mask_words(), 0);
      for (size_t i = 0; i < states.size(); ++i) {
        const auto [state, callers] = states[i];
        const TokenMasker::Entry& e = masker_->entry(state);
        scratch_.assign(v.mask_words(), 0);  // this state's accepted tokens
        for (size_t w = 0; w < e.accepted_words.size(); ++w) scratch_[w] = e.accepted_words[w];
        for (int32_t id : e.accepted_ids) scratch_[size_t(id) >> 5] |= uint32_t(1) << (id & 31);
        for (size_t w = 0; w < v.mask_words(); ++w) inside[w] |= scratch_[w];
        for (uint32_t rank : lcs[i]->mixed) set_rank(risky_, rank, true);
        for (uint32_t rank : lcs[i]->calls) set_rank(risky_, rank, true);
        if (BudgetTables::add(bt.dist(state), callers) <= limit) {
          for (const auto& [cost, rank] : lcs[i]->above) {
            if (BudgetTables::add(cost, callers) <= limit) break;
            set_rank(scratch_, rank, false);
          }
          for (uint32_t rank : lcs[i]->calls) set_rank(scratch_, rank, false);
          for (size_t w = 0; w < v.mask_words(); ++w) proven_[w] |= scratch_[w];
        } else {
          for (const auto& [cost, rank] : lcs[i]->below) {
            if (BudgetTables::add(cost, callers) > limit) break;
            set_rank(proven_, rank, true);
          }
        }
      }
      for (size_t w = 0; w < v.mask_words(); ++w) words[w] &= ~(inside[w] & ~proven_[w] & ~risky_[w]);
    } else {
      for (const EarleyParser::Item& it : items) {
        if (it.origin >= k) continue;
        const uint32_t mine = rule_cost(it.origin, g.state_rule(it.state)).min;
        if (BudgetTables::add(bt.reach(it.state), mine) <= limit) {
          full.push_back(it.state);
        } else if (g.is_simple(it.state) && BudgetTables::add(bt.dist(it.state), mine) <= limit) {
          if (const LocalCosts* own = masker_->budget_local_costs(it.state)) {
            // Partial proofs first: taking a costly token back must not undo another
            // item's full proof (it would only cost a check, but checks are the expense).
            prove(it.state);
            for (const auto& [cost, rank] : own->above) {
              if (BudgetTables::add(cost, mine) <= limit) break;
              set_rank(proven_, rank, false);
            }
            for (uint32_t rank : own->calls) set_rank(proven_, rank, false);
          }
        }
      }
    }
  }
  for (uint32_t s : full) prove(s);
  if (eos >= 0) proven_[size_t(eos) >> 5] |= uint32_t(1) << (eos & 31);
  // The ranks left to check, in trie order.
  cand_.clear();
  for (size_t w = 0; w < v.mask_words(); ++w) {
    for (uint32_t bits = words[w] & ~proven_[w]; bits; bits &= bits - 1) {
      const int32_t rank = v.token_rank(int64_t(w * 32 + size_t(__builtin_ctz(bits))));
      if (rank >= 0) cand_.push_back(uint32_t(rank));
    }
  }
  std::sort(cand_.begin(), cand_.end());
  cand_.erase(std::unique(cand_.begin(), cand_.end()), cand_.end());

  // Walk them sharing prefixes; a prefix after which the bound fits proves its subtree.
  if (!cand_.empty()) ++budget_walks_;
  const size_t base = parser_.num_sets();
  std::string_view prev;
  size_t depth = 0;  // bytes of `prev` currently pushed
  for (size_t i = 0; i < cand_.size();) {
    const uint32_t r = cand_[i];
    const std::string_view w = v.rank_bytes(r);
    size_t lcp = 0;
    const size_t lim = std::min(depth, w.size());
    while (lcp < lim && prev[lcp] == w[lcp]) ++lcp;
    truncate(base + lcp);
    depth = lcp;
    prev = w;
    bool proven = false, dead = false;
    while (depth < w.size()) {
      if (!parser_.push(uint8_t(w[depth]))) {
        dead = true;
        break;
      }
      ++depth;
      if (bound_last() <= limit) {
        proven = true;
        break;
      }
    }
    if (proven) {
      const uint32_t end = v.prefix_rank_end(r, depth);
      i = size_t(std::lower_bound(cand_.begin() + ptrdiff_t(i) + 1, cand_.end(), end) - cand_.begin());
      continue;
    }
    // An allowed token is viable; `dead` is only a guard.
    if (dead || min_bytes_last() > limit) clear(r);
    ++i;
  }
  truncate(base);
  bool any = false;
  for (size_t i = 0; i < v.mask_words() && !any; ++i) any = words[i] != 0;
  if (!any) {
    std::copy(original_.begin(), original_.end(), words.begin());
    return false;
  }
  return true;
}

}  // namespace deepinfer::structured
