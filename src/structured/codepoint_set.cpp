#include "structured/codepoint_set.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <string>

namespace deepinfer::structured {

CodepointSet CodepointSet::range(uint32_t lo, uint32_t hi) {
  CodepointSet s;
  s.add(lo, hi);
  return s;
}

CodepointSet CodepointSet::all_scalars() {
  CodepointSet s;
  s.ranges_ = {{0, kSurrogateLo - 1}, {kSurrogateHi + 1, kMaxCodepoint}};
  return s;
}

void CodepointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  hi = std::min(hi, kMaxCodepoint);
  if (lo > hi) return;
  // Find the first range that could touch [lo, hi] and merge all touching ranges.
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), lo,
                             [](const Range& r, uint32_t v) { return r.second + 1 < v; });
  auto end = it;
  while (end != ranges_.end() && end->first <= hi + 1) {
    lo = std::min(lo, end->first);
    hi = std::max(hi, end->second);
    ++end;
  }
  it = ranges_.erase(it, end);
  ranges_.insert(it, {lo, hi});
}

void CodepointSet::add(const CodepointSet& other) {
  if (ranges_.empty()) {
    ranges_ = other.ranges_;
    return;
  }
  std::vector<Range> merged;
  merged.reserve(ranges_.size() + other.ranges_.size());
  std::merge(ranges_.begin(), ranges_.end(), other.ranges_.begin(), other.ranges_.end(),
             std::back_inserter(merged));
  ranges_.clear();
  for (const Range& r : merged) {
    if (!ranges_.empty() && r.first <= ranges_.back().second + 1) {
      ranges_.back().second = std::max(ranges_.back().second, r.second);
    } else {
      ranges_.push_back(r);
    }
  }
}

CodepointSet CodepointSet::complement() const {
  CodepointSet all = all_scalars();
  return all.subtract(*this);
}

CodepointSet CodepointSet::intersect(const CodepointSet& other) const {
  CodepointSet out;
  size_t i = 0, j = 0;
  while (i < ranges_.size() && j < other.ranges_.size()) {
    const uint32_t lo = std::max(ranges_[i].first, other.ranges_[j].first);
    const uint32_t hi = std::min(ranges_[i].second, other.ranges_[j].second);
    if (lo <= hi) out.ranges_.push_back({lo, hi});
    if (ranges_[i].second < other.ranges_[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return out;
}

CodepointSet CodepointSet::subtract(const CodepointSet& other) const {
  CodepointSet out;
  size_t j = 0;
  for (Range r : ranges_) {
    uint32_t lo = r.first;
    while (j < other.ranges_.size() && other.ranges_[j].second < lo) ++j;
    size_t k = j;
    bool done = false;
    while (k < other.ranges_.size() && other.ranges_[k].first <= r.second) {
      if (other.ranges_[k].first > lo) out.ranges_.push_back({lo, other.ranges_[k].first - 1});
      if (other.ranges_[k].second >= r.second) {
        done = true;
        break;
      }
      lo = other.ranges_[k].second + 1;
      ++k;
    }
    if (!done && lo <= r.second) out.ranges_.push_back({lo, r.second});
  }
  return out;
}

bool CodepointSet::contains(uint32_t cp) const {
  auto it = std::upper_bound(ranges_.begin(), ranges_.end(), cp,
                             [](uint32_t v, const Range& r) { return v < r.first; });
  return it != ranges_.begin() && std::prev(it)->second >= cp;
}

uint64_t CodepointSet::size() const {
  uint64_t n = 0;
  for (const Range& r : ranges_) n += uint64_t(r.second) - r.first + 1;
  return n;
}

CodepointSet ecma_digit() { return CodepointSet::range('0', '9'); }

CodepointSet ecma_word() {
  CodepointSet s = CodepointSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_');
  return s;
}

CodepointSet ecma_space() {
  CodepointSet s;
  for (uint32_t cp : {0x09u, 0x0Au, 0x0Bu, 0x0Cu, 0x0Du, 0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu,
                      0x205Fu, 0x3000u, 0xFEFFu})
    s.add(cp);
  s.add(0x2000, 0x200A);
  return s;
}

CodepointSet ecma_line_terminators() {
  CodepointSet s;
  for (uint32_t cp : {0x0Au, 0x0Du, 0x2028u, 0x2029u}) s.add(cp);
  return s;
}

namespace {

constexpr int kNumCategories = 30;  // UTF8PROC_CATEGORY_CN .. UTF8PROC_CATEGORY_CO

// One scan of the code space, done once; about 10 ms.
const std::array<CodepointSet, kNumCategories>& category_sets() {
  static const std::array<CodepointSet, kNumCategories> sets = [] {
    std::array<std::vector<CodepointSet::Range>, kNumCategories> ranges;
    int prev = -1;
    for (uint32_t cp = 0; cp <= kMaxCodepoint; ++cp) {
      const int cat = utf8proc_category(int32_t(cp));
      if (cat == prev) {
        ranges[cat].back().second = cp;
      } else {
        ranges[cat].push_back({cp, cp});
        prev = cat;
      }
    }
    std::array<CodepointSet, kNumCategories> out;
    for (int c = 0; c < kNumCategories; ++c)
      for (auto [lo, hi] : ranges[c]) out[c].add(lo, hi);
    return out;
  }();
  return sets;
}

struct CategoryName {
  const char* short_name;
  const char* long_name;
  std::vector<int> cats;
};

const std::vector<CategoryName>& category_names() {
  static const std::vector<CategoryName> names = {
      {"L", "Letter", {1, 2, 3, 4, 5}},
      {"LC", "Cased_Letter", {1, 2, 3}},
      {"Lu", "Uppercase_Letter", {1}},
      {"Ll", "Lowercase_Letter", {2}},
      {"Lt", "Titlecase_Letter", {3}},
      {"Lm", "Modifier_Letter", {4}},
      {"Lo", "Other_Letter", {5}},
      {"M", "Mark", {6, 7, 8}},
      {"Mn", "Nonspacing_Mark", {6}},
      {"Mc", "Spacing_Mark", {7}},
      {"Me", "Enclosing_Mark", {8}},
      {"N", "Number", {9, 10, 11}},
      {"Nd", "Decimal_Number", {9}},
      {"Nl", "Letter_Number", {10}},
      {"No", "Other_Number", {11}},
      {"P", "Punctuation", {12, 13, 14, 15, 16, 17, 18}},
      {"Pc", "Connector_Punctuation", {12}},
      {"Pd", "Dash_Punctuation", {13}},
      {"Ps", "Open_Punctuation", {14}},
      {"Pe", "Close_Punctuation", {15}},
      {"Pi", "Initial_Punctuation", {16}},
      {"Pf", "Final_Punctuation", {17}},
      {"Po", "Other_Punctuation", {18}},
      {"S", "Symbol", {19, 20, 21, 22}},
      {"Sm", "Math_Symbol", {19}},
      {"Sc", "Currency_Symbol", {20}},
      {"Sk", "Modifier_Symbol", {21}},
      {"So", "Other_Symbol", {22}},
      {"Z", "Separator", {23, 24, 25}},
      {"Zs", "Space_Separator", {23}},
      {"Zl", "Line_Separator", {24}},
      {"Zp", "Paragraph_Separator", {25}},
      {"C", "Other", {26, 27, 28, 29, 0}},
      {"Cc", "Control", {26}},
      {"Cf", "Format", {27}},
      {"Cs", "Surrogate", {28}},
      {"Co", "Private_Use", {29}},
      {"Cn", "Unassigned", {0}},
  };
  return names;
}

}  // namespace

bool unicode_property(std::string_view name, CodepointSet* out) {
  for (std::string_view prefix : {"General_Category=", "gc="}) {
    if (name.substr(0, prefix.size()) == prefix) {
      name.remove_prefix(prefix.size());
      break;
    }
  }
  if (name == "Any") {
    *out = CodepointSet::all_scalars();
    return true;
  }
  if (name == "ASCII") {
    *out = CodepointSet::range(0, 0x7F);
    return true;
  }
  // ECMAScript aliases that are not in the table's two columns.
  if (name == "digit") name = "Nd";
  if (name == "punct") name = "P";
  if (name == "Combining_Mark") name = "M";
  for (const CategoryName& c : category_names()) {
    if (name == c.short_name || name == c.long_name) {
      CodepointSet s;
      for (int cat : c.cats) s.add(category_sets()[cat]);
      *out = std::move(s);
      return true;
    }
  }
  return false;
}

const char* read_hex_digits(std::string_view text, size_t* pos, int n, uint32_t* value) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) {
    if (*pos >= text.size()) return "truncated escape";
    const char c = text[*pos];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return "bad hex digit";
    v = v * 16 + uint32_t(d);
    ++*pos;
  }
  *value = v;
  return nullptr;
}

}  // namespace deepinfer::structured
