#include "tokenizer/added_matcher.h"

#include <algorithm>

#include "tokenizer/onig_tables.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

namespace {

using unicode_tables::CodePointRange;

bool in_ranges(const CodePointRange* ranges, size_t n, char32_t cp) {
  const CodePointRange* end = ranges + n;
  const CodePointRange* it =
      std::upper_bound(ranges, end, cp, [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

// tokenizers tests these with the Rust regex crate's Unicode \w and \s. \s is White_Space
// (onig's set is the same); for \w we use onig's set plus the joiners, which differ from
// Rust's only in a few number characters.
bool is_word_char(char32_t cp) {
  return cp == 0x200C || cp == 0x200D || in_ranges(onig_tables::kWord, onig_tables::kWordSize, cp);
}
bool is_space_char(char32_t cp) { return in_ranges(onig_tables::kSpace, onig_tables::kSpaceSize, cp); }

// The code point starting at `pos` (text is valid UTF-8) and its length.
char32_t char_at(std::string_view text, size_t pos, size_t* len) {
  const auto b = [&](size_t k) { return char32_t(static_cast<unsigned char>(text[pos + k])); };
  const char32_t b0 = b(0);
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  if (b0 < 0xE0) {
    *len = 2;
    return ((b0 & 0x1F) << 6) | (b(1) & 0x3F);
  }
  if (b0 < 0xF0) {
    *len = 3;
    return ((b0 & 0x0F) << 12) | ((b(1) & 0x3F) << 6) | (b(2) & 0x3F);
  }
  *len = 4;
  return ((b0 & 0x07) << 18) | ((b(1) & 0x3F) << 12) | ((b(2) & 0x3F) << 6) | (b(3) & 0x3F);
}

// The start of the code point that ends at `end` (> 0).
size_t char_start_before(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<AddedTokenSpec>& specs) {
  std::fill(std::begin(root_children_), std::end(root_children_), -1);
  nodes_.emplace_back();
  for (const AddedTokenSpec& spec : specs) {
    if (spec.pattern.empty()) continue;
    int32_t node = 0;
    for (unsigned char byte : spec.pattern) {
      int32_t next = child(node, byte);
      if (next < 0) {
        next = int32_t(nodes_.size());
        nodes_.emplace_back();
        auto& kids = nodes_[node].children;
        kids.insert(std::lower_bound(kids.begin(), kids.end(), std::make_pair(byte, int32_t(-1))),
                    {byte, next});
        if (node == 0) root_children_[byte] = next;
      }
      node = next;
    }
    if (nodes_[node].spec < 0) {
      nodes_[node].spec = int32_t(specs_.size());
      specs_.push_back(spec);
    }
  }
}

int32_t AddedTokenMatcher::child(int32_t node, uint8_t byte) const {
  if (node == 0) return root_children_[byte];
  const auto& kids = nodes_[node].children;
  const auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(byte, int32_t(-1)));
  return it != kids.end() && it->first == byte ? it->second : -1;
}

int32_t AddedTokenMatcher::longest_at(std::string_view text, size_t pos, size_t* len) const {
  int32_t best = -1;
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    node = child(node, static_cast<uint8_t>(text[i]));
    if (node < 0) break;
    if (nodes_[node].spec >= 0) {
      best = nodes_[node].spec;
      *len = i + 1 - pos;
    }
  }
  return best;
}

void AddedTokenMatcher::split(std::string_view text, bool match_special, std::vector<Split>* out) const {
  const size_t n = text.size();
  size_t start_offset = 0;
  size_t pos = 0;
  while (pos < n && !specs_.empty()) {
    if (root_children_[static_cast<uint8_t>(text[pos])] < 0) {
      ++pos;
      continue;
    }
    size_t len = 0;
    const int32_t index = longest_at(text, pos, &len);
    if (index < 0) {
      ++pos;
      continue;
    }
    size_t start = pos, stop = pos + len;
    pos = stop;  // the search resumes after the match whatever its flags decide
    const AddedTokenSpec& spec = specs_[index];
    if (spec.special && !match_special) continue;
    if (spec.single_word) {
      size_t l;
      const bool word_before = start > 0 && is_word_char(char_at(text, char_start_before(text, start), &l));
      const bool word_after = stop < n && is_word_char(char_at(text, stop, &l));
      if (word_before || word_after) continue;
    }
    if (spec.lstrip) {
      size_t s = start;
      while (s > 0) {
        const size_t prev = char_start_before(text, s);
        size_t l;
        if (!is_space_char(char_at(text, prev, &l))) break;
        s = prev;
      }
      start = std::max(s, start_offset);
    }
    if (spec.rstrip) {
      size_t l;
      while (stop < n && is_space_char(char_at(text, stop, &l))) stop += l;
    }
    if (start_offset < start) out->push_back({start_offset, start, -1});
    out->push_back({start, stop, spec.id});
    start_offset = stop;
  }
  if (start_offset != n || n == 0) out->push_back({start_offset, n, -1});
}

}  // namespace deepinfer
