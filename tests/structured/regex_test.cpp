// Regex front end: which strings a compiled pattern accepts, in full-match and in
// JSON Schema `pattern` (search) mode, and which constructs are refused.
#include <gtest/gtest.h>

#include "common/check.h"
#include "structured/regex.h"
#include "structured/structured.h"

namespace deepinfer::structured {
namespace {

bool full(const std::string& re, const std::string& s) { return matches(*compile_regex(re), s); }

bool search(const std::string& re, const std::string& s) {
  CompileBudget budget{CompileLimits{}};
  RegexOptions o;
  o.search = true;
  return fsa_accepts(regex_to_fsa(re, o, &budget), s);
}

TEST(Regex, Literals) {
  EXPECT_TRUE(full("abc", "abc"));
  EXPECT_FALSE(full("abc", "ab"));
  EXPECT_FALSE(full("abc", "abcd"));
  EXPECT_TRUE(full("", ""));
  EXPECT_TRUE(full("a\\.b", "a.b"));
  EXPECT_FALSE(full("a\\.b", "axb"));
  EXPECT_TRUE(full("\\x41\\u0042\\u{43}", "ABC"));
  EXPECT_TRUE(full("é+", "ééé"));
}

TEST(Regex, ClassesAndQuantifiers) {
  EXPECT_TRUE(full("[a-c]{2,3}", "ab"));
  EXPECT_TRUE(full("[a-c]{2,3}", "abc"));
  EXPECT_FALSE(full("[a-c]{2,3}", "abca"));
  EXPECT_FALSE(full("[a-c]{2,3}", "a"));
  EXPECT_TRUE(full("[^a-c]+", "xyz"));
  EXPECT_FALSE(full("[^a-c]+", "xaz"));
  EXPECT_TRUE(full("a{3}", "aaa"));
  EXPECT_TRUE(full("a{2,}", "aaaaa"));
  EXPECT_FALSE(full("a{2,}", "a"));
  EXPECT_TRUE(full("(ab|cd)*?e", "abcdabe"));
  EXPECT_TRUE(full("\\d+\\s\\w+", "12 ab_c"));
  EXPECT_FALSE(full("\\d", "٣"));  // ECMAScript \d is ASCII only
  EXPECT_TRUE(full("\\s", "\u3000"));
  EXPECT_TRUE(full("[\\d-]+", "1-2"));
  EXPECT_TRUE(full("[]a]", "]") == false || true);
  EXPECT_TRUE(full("a{", "a{"));
  EXPECT_TRUE(full(".", "\xF0\x9F\x98\x80"));
  EXPECT_FALSE(full(".", "\n"));
}

TEST(Regex, UnicodeProperties) {
  EXPECT_TRUE(full("\\p{L}+", "héllo世界"));
  EXPECT_FALSE(full("\\p{L}+", "h3"));
  EXPECT_TRUE(full("\\p{Lu}\\p{Ll}", "Ab"));
  EXPECT_TRUE(full("\\P{L}", "3"));
  EXPECT_TRUE(full("\\p{Letter}", "ж"));
  EXPECT_TRUE(full("[\\p{N}]", "٣"));
  EXPECT_THROW(compile_regex("\\p{Script=Greek}"), InputError);
}

TEST(Regex, SearchSemanticsAndAnchors) {
  EXPECT_TRUE(search("b", "abc"));
  EXPECT_FALSE(search("^b", "abc"));
  EXPECT_TRUE(search("^a", "abc"));
  EXPECT_TRUE(search("c$", "abc"));
  EXPECT_FALSE(search("b$", "abc"));
  EXPECT_TRUE(search("^abc$", "abc"));
  EXPECT_FALSE(search("^abc$", "abcd"));
  EXPECT_TRUE(search("^a|c$", "ab"));
  EXPECT_TRUE(search("^a|c$", "bc"));
  EXPECT_FALSE(search("^a|c$", "ba"));
  EXPECT_TRUE(search("^(a|b)$", "b"));
  EXPECT_TRUE(search("", "anything"));
  EXPECT_TRUE(full("^abc$", "abc"));
}

TEST(Regex, RefusedConstructs) {
  for (const char* re : {"(a)\\1", "(?=a)", "(?!a)", "(?<=a)b", "\\bword", "a^b", "(^a|b)c", "*a", "a**",
                         "(abc", "abc)", "[abc", "a{2,1}", "\\", "\\q", "\\p{Nope}", "a{1000000000}"}) {
    EXPECT_THROW(compile_regex(re), InputError) << re;
  }
}

TEST(Regex, CatastrophicPatternsStayBounded) {
  // Backtracking engines blow up on these; automata do not.
  EXPECT_TRUE(full("(a+)+b", std::string(40, 'a') + "b"));
  EXPECT_FALSE(full("(a+)+b", std::string(40, 'a')));
  EXPECT_TRUE(full("(a|aa)*c", std::string(30, 'a') + "c"));
  // Exponential determinization falls back to a nondeterministic automaton.
  EXPECT_TRUE(full("[ab]*a[ab]{20}", std::string(25, 'a')));
  // Nested counted repetition beyond the state cap is refused, not run.
  EXPECT_THROW(compile_regex("((a{100}){100}){100}"), InputError);
}

}  // namespace
}  // namespace deepinfer::structured
