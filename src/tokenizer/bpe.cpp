#include "tokenizer/bpe.h"

#include <atomic>
#include <climits>
#include <cstdio>
#include <queue>

#include "common/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

namespace {

constexpr size_t kMaxCachedWordBytes = 256;
constexpr size_t kMaxCacheEntries = 1 << 16;
// Below this many symbols a linear scan for the best pair beats a heap.
constexpr size_t kShortWord = 48;

std::atomic<uint64_t> next_instance_id{1};

struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

struct ThreadCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, StringHash, std::equal_to<>> words[2];
};

thread_local ThreadCache thread_cache;

size_t utf8_char_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

}  // namespace

struct BpeModel::MergeTable {
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0;
    int32_t new_id = 0;
  };
  static constexpr uint64_t kEmpty = ~uint64_t(0);

  explicit MergeTable(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n + 1) cap *= 2;
    slots.resize(cap);
    mask = cap - 1;
  }
  static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
  static uint64_t mix(uint64_t k) {
    k ^= k >> 31;
    k *= 0x9E3779B97F4A7C15ULL;
    return k ^ (k >> 29);
  }
  // A repeated pair keeps its last rank, as tokenizers' merge map does.
  void insert(int32_t a, int32_t b, int32_t rank, int32_t new_id) {
    const uint64_t k = key(a, b);
    for (size_t i = mix(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == kEmpty || slots[i].key == k) {
        slots[i] = {k, rank, new_id};
        return;
      }
    }
  }
  const Slot* find(int32_t a, int32_t b) const {
    const uint64_t k = key(a, b);
    for (size_t i = mix(k) & mask;; i = (i + 1) & mask) {
      if (slots[i].key == k) return &slots[i];
      if (slots[i].key == kEmpty) return nullptr;
    }
  }

  std::vector<Slot> slots;
  size_t mask;
};

BpeModel::BpeModel(const std::unordered_map<std::string, int64_t>* vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options)
    : vocab_(vocab), options_(std::move(options)), instance_id_(next_instance_id++) {
  merges_ = std::make_unique<MergeTable>(merges.size());
  const size_t prefix = options_.continuing_subword_prefix.size();
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    const int64_t merged = vocab_->at(a + b.substr(prefix));
    merges_->insert(int32_t(vocab_->at(a)), int32_t(vocab_->at(b)), int32_t(rank), int32_t(merged));
  }
  byte_ids_ok_ = options_.continuing_subword_prefix.empty() && options_.end_of_word_suffix.empty() &&
                 !options_.ignore_merges;
  for (int b = 0; b < 256; ++b) {
    const auto it = vocab_->find(byte_level::encode(std::string(1, char(b))));
    byte_ids_[b] = it == vocab_->end() ? -1 : int32_t(it->second);
    if (byte_ids_[b] < 0) byte_ids_ok_ = false;
  }
}

BpeModel::~BpeModel() = default;

// tokenizers' BPE::merge_word, character by character (unknown-character handling
// included, in its order: a byte-fallback expansion does not flush a pending unk).
void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>* ids) const {
  int32_t pending_unk = -1;
  const auto unk_id = [&]() -> int32_t {
    const auto it = vocab_->find(*options_.unk_token);
    DI_CHECK_INPUT(it != vocab_->end(), "the BPE unk_token ", *options_.unk_token, " is not in the vocabulary");
    return int32_t(it->second);
  };
  std::string s;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(utf8_char_length(static_cast<unsigned char>(word[i])), word.size() - i);
    s.clear();
    if (i > 0) s = options_.continuing_subword_prefix;
    s.append(word.substr(i, n));
    i += n;
    if (i == word.size()) s += options_.end_of_word_suffix;
    if (const auto it = vocab_->find(s); it != vocab_->end()) {
      if (pending_unk >= 0) ids->push_back(pending_unk);
      pending_unk = -1;
      ids->push_back(int32_t(it->second));
      continue;
    }
    if (options_.byte_fallback) {
      std::vector<int32_t> bytes;
      for (unsigned char b : s) {
        char code[8];
        std::snprintf(code, sizeof(code), "<0x%02X>", b);
        const auto it = vocab_->find(code);
        if (it == vocab_->end()) break;
        bytes.push_back(int32_t(it->second));
      }
      if (bytes.size() == s.size()) {
        ids->insert(ids->end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (options_.unk_token) {
      if (pending_unk >= 0 && !options_.fuse_unk) ids->push_back(pending_unk);
      if (pending_unk < 0 || !options_.fuse_unk) pending_unk = unk_id();
    }
  }
  if (pending_unk >= 0) ids->push_back(pending_unk);
}

void BpeModel::merge(std::vector<int32_t>* ids_ptr) const {
  std::vector<int32_t>& ids = *ids_ptr;
  if (ids.size() > kShortWord) return merge_long(ids_ptr);
  // rank[i] is the rank of the pair (ids[i], ids[i + 1]), INT_MAX when it has no merge.
  int32_t rank[kShortWord], target[kShortWord];
  const auto lookup = [&](size_t i) {
    const MergeTable::Slot* m = merges_->find(ids[i], ids[i + 1]);
    rank[i] = m ? m->rank : INT_MAX;
    target[i] = m ? m->new_id : -1;
  };
  for (size_t i = 0; i + 1 < ids.size(); ++i) lookup(i);
  while (ids.size() > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < ids.size(); ++i)
      if (rank[i] < rank[best]) best = i;
    if (rank[best] == INT_MAX) break;
    ids[best] = target[best];
    ids.erase(ids.begin() + best + 1);
    for (size_t i = best + 1; i + 1 < ids.size(); ++i) {
      rank[i] = rank[i + 1];
      target[i] = target[i + 1];
    }
    if (best + 1 < ids.size()) lookup(best);
    if (best > 0) lookup(best - 1);
  }
}

// The same merge order with a heap over (rank, position) and a linked list of symbols,
// as tokenizers' Word::merge_all does it; entries made stale by earlier merges are
// recognised by the pair at their position no longer producing their target.
void BpeModel::merge_long(std::vector<int32_t>* ids_ptr) const {
  std::vector<int32_t>& ids = *ids_ptr;
  const int64_t n = int64_t(ids.size());
  std::vector<int64_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (int64_t i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Candidate {
    int32_t rank;
    int64_t pos;
    int32_t new_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> queue;
  const auto push = [&](int64_t pos) {
    if (pos < 0 || next[pos] < 0) return;
    if (const MergeTable::Slot* m = merges_->find(ids[pos], ids[next[pos]])) queue.push({m->rank, pos, m->new_id});
  };
  for (int64_t i = 0; i + 1 < n; ++i) push(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    if (!alive[top.pos] || next[top.pos] < 0) continue;
    const int64_t right = next[top.pos];
    const MergeTable::Slot* m = merges_->find(ids[top.pos], ids[right]);
    if (m == nullptr || m->new_id != top.new_id) continue;
    ids[top.pos] = top.new_id;
    alive[right] = false;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    push(prev[top.pos]);
    push(top.pos);
  }
  size_t w = 0;
  for (int64_t i = 0; i < n; ++i)
    if (alive[i]) ids[w++] = ids[i];
  ids.resize(w);
}

template <typename Init>
void BpeModel::cached(std::string_view key, bool bytes, std::vector<int64_t>* out, Init init) const {
  ThreadCache& cache = thread_cache;
  if (cache.owner != instance_id_) {
    cache.words[0].clear();
    cache.words[1].clear();
    cache.owner = instance_id_;
  }
  auto& words = cache.words[bytes ? 1 : 0];
  if (const auto it = words.find(key); it != words.end()) {
    out->insert(out->end(), it->second.begin(), it->second.end());
    return;
  }
  std::vector<int32_t> ids;
  init(&ids);
  merge(&ids);
  out->insert(out->end(), ids.begin(), ids.end());
  if (key.size() <= kMaxCachedWordBytes) {
    if (words.size() >= kMaxCacheEntries) words.clear();
    words.emplace(std::string(key), std::move(ids));
  }
}

void BpeModel::tokenize(std::string_view word, std::vector<int64_t>* out) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const auto it = vocab_->find(std::string(word)); it != vocab_->end()) {
      out->push_back(it->second);
      return;
    }
  }
  cached(word, false, out, [&](std::vector<int32_t>* ids) { initial_symbols(word, ids); });
}

void BpeModel::tokenize_bytes(std::string_view bytes, std::vector<int64_t>* out) const {
  DI_CHECK(byte_ids_ok_);
  if (bytes.empty()) return;
  cached(bytes, true, out, [&](std::vector<int32_t>* ids) {
    ids->reserve(bytes.size());
    for (unsigned char b : bytes) ids->push_back(byte_ids_[b]);
  });
}

}  // namespace deepinfer
