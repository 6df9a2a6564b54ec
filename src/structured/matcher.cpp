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
      parser_.truncate(base);
      return false;
    }
  }
  steps_.push_back({parser_.num_sets(), false});
  return true;
}

void GrammarMatcher::rollback(size_t n) {
  DI_CHECK(n <= num_steps(), "rollback of ", n, " steps after only ", num_steps());
  steps_.resize(steps_.size() - n);
  parser_.truncate(steps_.back().num_sets);
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
  parser_.truncate(base);
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

}  // namespace deepinfer::structured
