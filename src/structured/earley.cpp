#include "structured/earley.h"

#include "common/check.h"

namespace deepinfer::structured {
namespace {

constexpr size_t kLinearScanItems = 16;

inline uint64_t key_of(uint32_t state, uint32_t origin) { return (uint64_t(state) << 32) | origin; }

inline size_t hash_key(uint64_t k) { return size_t((k * 0x9E3779B97F4A7C15ull) >> 20); }

}  // namespace

EarleyParser::EarleyParser(const CompiledGrammar* grammar) : g_(grammar) {}

void EarleyParser::begin_set() {
  cur_begin_ = items_.size();
  hashing_ = false;
}

void EarleyParser::rehash(size_t begin) {
  size_t size = 64;
  while (size < 4 * (items_.size() - begin)) size *= 2;
  if (table_.size() < size) {
    table_.assign(size, 0);
    table_gen_.assign(size, 0);
    gen_ = 0;
  }
  if (++gen_ == 0) {  // generation counter wrapped: clear the tags once
    std::fill(table_gen_.begin(), table_gen_.end(), 0);
    gen_ = 1;
  }
  const size_t mask = table_.size() - 1;
  for (size_t i = begin; i < items_.size(); ++i) {
    const uint64_t k = key_of(items_[i].state, items_[i].origin);
    size_t h = hash_key(k) & mask;
    while (table_gen_[h] == gen_) h = (h + 1) & mask;
    table_[h] = k;
    table_gen_[h] = gen_;
  }
}

void EarleyParser::add(uint32_t state, uint32_t origin) {
  const size_t n = items_.size() - cur_begin_;
  if (!hashing_) {
    for (size_t i = cur_begin_; i < items_.size(); ++i)
      if (items_[i].state == state && items_[i].origin == origin) return;
    items_.push_back({state, origin});
    if (n + 1 >= kLinearScanItems) {
      hashing_ = true;
      rehash(cur_begin_);
    }
    return;
  }
  const uint64_t k = key_of(state, origin);
  const size_t mask = table_.size() - 1;
  size_t h = hash_key(k) & mask;
  while (table_gen_[h] == gen_) {
    if (table_[h] == k) return;
    h = (h + 1) & mask;
  }
  DI_CHECK_INPUT(n < kMaxSetItems, "grammar too ambiguous: more than ", kMaxSetItems,
                 " parser items at one input position");
  items_.push_back({state, origin});
  if (4 * (n + 1) > table_.size()) {
    rehash(cur_begin_);
  } else {
    table_[h] = k;
    table_gen_[h] = gen_;
  }
}

void EarleyParser::closure(size_t begin, uint32_t cur) {
  for (size_t i = begin; i < items_.size(); ++i) {
    const Item it = items_[i];
    for (const auto& e : g_->rule_edges(it.state)) {
      add(g_->rule_start(e.rule), cur);
      if (g_->rule_nullable(e.rule)) add(e.to, it.origin);
    }
    if (it.origin != kOutside && it.origin != cur && g_->is_final(it.state)) {
      const uint32_t rule = g_->state_rule(it.state);
      const size_t pb = set_begin_[it.origin];
      const size_t pe = set_begin_[it.origin + 1];
      for (size_t p = pb; p < pe; ++p) {
        const Item parent = items_[p];
        for (const auto& e : g_->rule_edges(parent.state))
          if (e.rule == rule) add(e.to, parent.origin);
      }
    }
  }
}

void EarleyParser::start_root() {
  items_.clear();
  set_begin_.assign(1, 0);
  begin_set();
  if (g_->num_rules() == 0) return;
  add(g_->rule_start(g_->root()), 0);
  closure(0, 0);
}

void EarleyParser::start_at(uint32_t state) {
  items_.clear();
  set_begin_.assign(1, 0);
  begin_set();
  add(state, kOutside);
  closure(0, 0);
}

bool EarleyParser::push(uint8_t b) {
  const size_t last = set_begin_.back();
  const size_t end = items_.size();
  const uint32_t cur = uint32_t(set_begin_.size());
  begin_set();
  for (size_t i = last; i < end; ++i) {
    const Item it = items_[i];
    for (const auto& e : g_->byte_edges(it.state)) {
      if (b < e.lo) break;
      if (b <= e.hi) add(e.to, it.origin);
    }
  }
  if (items_.size() == end) return false;
  set_begin_.push_back(end);
  closure(end, cur);
  return true;
}

void EarleyParser::truncate(size_t num_sets) {
  DI_CHECK(num_sets >= 1 && num_sets <= set_begin_.size(), "truncate out of range");
  items_.resize(num_sets < set_begin_.size() ? set_begin_[num_sets] : items_.size());
  set_begin_.resize(num_sets);
}

bool EarleyParser::can_end() const {
  for (const Item& it : last_set())
    if (it.origin == 0 && g_->is_final(it.state) && g_->state_rule(it.state) == g_->root()) return true;
  return false;
}

bool EarleyParser::escaped() const {
  for (const Item& it : last_set())
    if (it.origin == kOutside && g_->is_final(it.state)) return true;
  return false;
}

ByteSet EarleyParser::next_bytes() const {
  ByteSet s;
  for (const Item& it : last_set())
    for (const auto& e : g_->byte_edges(it.state)) s.set_range(e.lo, e.hi);
  return s;
}

}  // namespace deepinfer::structured
