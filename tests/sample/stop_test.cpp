#include "sample/stop.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace deepinfer::sampling {
namespace {

using Stops = std::vector<std::string>;

// Reference by definition: read the text byte by byte; at the first end where some stop
// string ends, take the longest such string (then the lowest index).
StopResult reference(const std::string& text, const Stops& stops) {
  for (size_t end = 1; end <= text.size(); ++end) {
    int best = -1;
    for (size_t i = 0; i < stops.size(); ++i) {
      const std::string& s = stops[i];
      if (s.size() <= end && text.compare(end - s.size(), s.size(), s) == 0 &&
          (best < 0 || s.size() > stops[best].size())) {
        best = int(i);
      }
    }
    if (best >= 0) return StopResult{true, size_t(best), end - stops[best].size(), 0};
  }
  size_t hold = 0;
  for (const std::string& s : stops) {
    for (size_t len = std::min(s.size() - 1, text.size()); len > hold; --len) {
      if (text.compare(text.size() - len, len, s, 0, len) == 0) {
        hold = len;
        break;
      }
    }
  }
  return StopResult{false, 0, text.size() - hold, hold};
}

void expect_eq(const StopResult& a, const StopResult& b, const std::string& where) {
  EXPECT_EQ(a.stopped, b.stopped) << where;
  EXPECT_EQ(a.output_end, b.output_end) << where;
  if (a.stopped && b.stopped) {
    EXPECT_EQ(a.stop_index, b.stop_index) << where;
  }
  if (!a.stopped && !b.stopped) {
    EXPECT_EQ(a.holdback, b.holdback) << where;
  }
}

// Feeds text in the given chunks the way a server streams it, and checks at every step:
// the matcher agrees with find_stop and with the reference on the text so far, the
// streamed prefix never shrinks, and nothing streamed is ever past the final cut.
void check_chunks(const std::string& text, const std::vector<size_t>& cuts, const Stops& stops) {
  const StopResult whole = reference(text, stops);
  StopMatcher m(stops);
  size_t begin = 0, sent = 0;
  std::vector<size_t> bounds = cuts;
  bounds.push_back(text.size());
  for (size_t end : bounds) {
    const std::string so_far = text.substr(0, end);
    const std::string where = "text \"" + text + "\" cut at " + std::to_string(end);
    StopResult r = m.feed(std::string_view(text).substr(begin, end - begin));
    StopResult f = find_stop(so_far, begin, stops);
    expect_eq(r, f, where);
    expect_eq(r, reference(so_far, stops), where);
    EXPECT_GE(r.output_end, sent) << where;
    sent = r.output_end;
    if (whole.stopped) {
      EXPECT_LE(sent, whole.output_end) << where;
    }
    begin = end;
    if (r.stopped) {
      expect_eq(r, whole, where);
      return;
    }
  }
  expect_eq(m.feed(""), whole, "end of " + text);
}

TEST(Stop, BasicMatchAndTruncation) {
  Stops stops = {"END"};
  StopResult r = find_stop("hello END world", 0, stops);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.output_end, 6u);
  EXPECT_EQ(r.stop_index, 0u);
  r = find_stop("hello EN", 0, stops);
  EXPECT_FALSE(r.stopped);
  EXPECT_EQ(r.holdback, 2u);
  EXPECT_EQ(r.output_end, 6u);
  r = find_stop("hello", 0, stops);
  EXPECT_EQ(r.holdback, 0u);
  EXPECT_EQ(find_stop("anything", 0, {}).output_end, 8u);
}

TEST(Stop, FirstToCompleteWins) {
  // "bcd" completes before "abcdef" even though "abcdef" starts earlier.
  StopResult r = find_stop("xabcdef", 0, Stops{"abcdef", "bcd"});
  EXPECT_EQ(r.stop_index, 1u);
  EXPECT_EQ(r.output_end, 2u);
  // Same end: the longer one starts first.
  r = find_stop("abcd", 0, Stops{"cd", "bcd"});
  EXPECT_EQ(r.stop_index, 1u);
  EXPECT_EQ(r.output_end, 1u);
  // Identical strings: the lower index.
  EXPECT_EQ(find_stop("zz", 0, Stops{"z", "z"}).stop_index, 0u);
}

TEST(Stop, SelfOverlappingPatterns) {
  EXPECT_EQ(find_stop("aaab", 0, Stops{"aab"}).output_end, 1u);
  EXPECT_EQ(find_stop("abababc", 0, Stops{"ababc"}).output_end, 2u);
  StopResult r = find_stop("xaaaa", 0, Stops{"aaaaab"});
  EXPECT_EQ(r.holdback, 4u);
}

TEST(Stop, MatchesBeforeNewBeginAreNotReported) {
  // find_stop only looks for stop strings that end in the new part.
  StopResult r = find_stop("END then", 3, Stops{"END"});
  EXPECT_FALSE(r.stopped);
  r = find_stop("xxEN" "D", 4, Stops{"END"});  // a stop straddling the boundary
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.output_end, 2u);
}

TEST(Stop, EveryTwoAndThreeWaySplit) {
  const std::vector<std::pair<std::string, Stops>> cases = {
      {"Hello world</s> trailing", {"</s>"}},
      {"one\n\ntwo", {"\n\n", "###"}},
      {"aaaaab", {"aab", "aaaaaab"}},
      {"abcabcabd", {"abcabd", "cab"}},
      {"no stop here at all", {"stop!", "zzz"}},
      {"ends with a partial st", {"stop"}},
      {"x" "\xe2\x82\xac" "y" "\xe2\x82\xac\xe2\x82\xac", {"\xe2\x82\xac\xe2\x82\xac"}},  // UTF-8 euro signs
  };
  for (const auto& [text, stops] : cases) {
    check_chunks(text, {}, stops);
    for (size_t i = 0; i <= text.size(); ++i) {
      check_chunks(text, {i}, stops);
      for (size_t j = i; j <= text.size(); ++j) check_chunks(text, {i, j}, stops);
    }
  }
}

TEST(Stop, RandomTextsAndChunkings) {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 400; ++trial) {
    std::string text;
    for (int i = 0, n = 1 + int(rng() % 40); i < n; ++i) text += char('a' + rng() % 3);
    Stops stops;
    for (int i = 0, n = 1 + int(rng() % 3); i < n; ++i) {
      std::string s;
      for (int k = 0, len = 1 + int(rng() % 5); k < len; ++k) s += char('a' + rng() % 3);
      stops.push_back(s);
    }
    std::vector<size_t> cuts;
    for (size_t pos = 0; pos < text.size(); pos += 1 + rng() % 4) cuts.push_back(pos);
    check_chunks(text, cuts, stops);
  }
}

TEST(Stop, FedAfterStopReturnsTheSameResult) {
  StopMatcher m(Stops{"ab"});
  StopResult r = m.feed("xxab");
  EXPECT_TRUE(r.stopped);
  StopResult again = m.feed("more ab");
  EXPECT_TRUE(again.stopped);
  EXPECT_EQ(again.output_end, 2u);
}

}  // namespace
}  // namespace deepinfer::sampling
