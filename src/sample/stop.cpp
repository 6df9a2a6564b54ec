#include "sample/stop.h"

#include <algorithm>

#include "common/check.h"

namespace deepinfer::sampling {

StopMatcher::StopMatcher(std::span<const std::string> stops) {
  for (const std::string& s : stops) {
    DI_CHECK(!s.empty(), "empty stop string");
    Pattern p{s, std::vector<uint32_t>(s.size(), 0)};
    // fail[i]: length of the longest proper prefix of s[0..i] that is also its suffix.
    for (size_t i = 1, k = 0; i < s.size(); ++i) {
      while (k > 0 && s[i] != s[k]) k = p.fail[k - 1];
      if (s[i] == s[k]) ++k;
      p.fail[i] = uint32_t(k);
    }
    patterns_.push_back(std::move(p));
  }
  matched_.assign(patterns_.size(), 0);
}

StopResult StopMatcher::advance(std::string_view chunk, bool report) {
  for (char c : chunk) {
    ++fed_;
    bool any = false;
    size_t best = 0;
    for (size_t i = 0; i < patterns_.size(); ++i) {
      const Pattern& p = patterns_[i];
      uint32_t k = matched_[i];
      if (k == p.text.size()) k = p.fail[k - 1];  // only when report is off: keep scanning
      while (k > 0 && p.text[k] != c) k = p.fail[k - 1];
      if (p.text[k] == c) ++k;
      matched_[i] = k;
      // All matches end at this byte; the longest starts first, ties keep the lower index.
      if (k == p.text.size() && (!any || p.text.size() > patterns_[best].text.size())) {
        any = true;
        best = i;
      }
    }
    if (any && report) {
      stopped_ = true;
      result_ = StopResult{true, best, fed_ - patterns_[best].text.size(), 0};
      return result_;
    }
  }
  size_t hold = 0;
  for (size_t i = 0; i < patterns_.size(); ++i) {
    if (matched_[i] < patterns_[i].text.size()) hold = std::max<size_t>(hold, matched_[i]);
  }
  return StopResult{false, 0, fed_ - hold, hold};
}

StopResult StopMatcher::feed(std::string_view chunk) {
  if (stopped_) return result_;
  return advance(chunk, /*report=*/true);
}

StopResult find_stop(std::string_view text, size_t new_begin, std::span<const std::string> stops) {
  DI_CHECK(new_begin <= text.size(), "new_begin ", new_begin, " past the text (", text.size(), " bytes)");
  size_t longest = 0;
  for (const std::string& s : stops) longest = std::max(longest, s.size());
  // A match ending in the new part, and any suffix that is a stop's proper prefix, starts
  // at most longest - 1 bytes before new_begin.
  const size_t begin = new_begin - std::min(new_begin, longest > 0 ? longest - 1 : 0);
  StopMatcher m(stops);
  m.fed_ = begin;
  m.advance(text.substr(begin, new_begin - begin), /*report=*/false);
  return m.feed(text.substr(new_begin));
}

}  // namespace deepinfer::sampling
