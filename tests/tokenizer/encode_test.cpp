// Tokenizer::encode against ids computed by the Python tokenizers library
// (tools/gen_encode_vectors.py), and the Oniguruma-to-PCRE2 regex translation against
// the character classes tokenizers' own regex engine uses (tools/gen_onig_tables.py).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/check.h"
#include "encode_expectations.h"
#include "tokenizer/onig_regex.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

std::string fixture(const std::string& name) { return std::string(DEEPINFER_FIXTURES) + "/tokenizer/" + name; }

using test::unhex;

void check_encode(const std::string& name) {
  SCOPED_TRACE(name);
  const auto tok = Tokenizer::load(fixture(name + ".json"));
  EXPECT_GT(test::expect_encodes_like_python(*tok, fixture(name + ".encode")), 400);
}

TEST(Encode, TrainedByteLevelTokenizer) { check_encode("bpe_tokenizer"); }
TEST(Encode, NormalizerPrefixSpaceRegexAndFlaggedAddedTokens) { check_encode("bpe_variant_bytelevel"); }
TEST(Encode, EverySplitBehaviourAndInvert) { check_encode("bpe_variant_splits"); }
TEST(Encode, WithoutByteLevelPreTokenizer) { check_encode("bpe_variant_nobytelevel"); }
TEST(Encode, HandmadeWithNormalizerAndNoPreTokenizer) {
  check_encode("handmade_sequence");
  check_encode("handmade_nodecoder");
}

TEST(Encode, InvalidUtf8IsAnInputError) {
  const auto tok = Tokenizer::load(fixture("bpe_tokenizer.json"));
  for (const std::string bad : {"\xff", "ab\xc3", "\xed\xa0\x80", "\xc0\x80", "ok\xf4\x90\x80\x80"}) {
    EXPECT_THROW(tok->encode(bad), InputError);
  }
  EXPECT_TRUE(tok->encode("").empty());
}

TEST(Encode, RoundTripsThroughDecode) {
  const auto tok = Tokenizer::load(fixture("bpe_tokenizer.json"));
  for (const std::string text : {"Hello world", "日本語 😀 e\u0301", "  spaces\r\n\ttabs  ", "<｜User｜>x"}) {
    EXPECT_EQ(tok->decode(tok->encode(text), false), text);
  }
}

TEST(Encode, UnsupportedPreTokenizerOnlyFailsEncoding) {
  std::ifstream in(fixture("bpe_tokenizer.json"));
  std::stringstream ss;
  ss << in.rdbuf();
  std::string json = ss.str();
  const std::string key = "\"pre_tokenizer\": ";
  const size_t at = json.find(key);
  ASSERT_NE(at, std::string::npos);
  json.insert(at + key.size(), "{\"type\": \"Metaspace\"}, \"unused_pre_tokenizer\": ");
  const auto tok = Tokenizer::from_json(json, "metaspace");
  EXPECT_EQ(tok->decode({40, 41}, false), Tokenizer::load(fixture("bpe_tokenizer.json"))->decode({40, 41}, false));
  EXPECT_THROW(tok->encode("x"), InputError);
}

TEST(OnigRegex, ClassesMatchTokenizersCodePointByCodePoint) {
  std::ifstream in(fixture("onig_classes.expect"));
  ASSERT_TRUE(in.good());
  std::string line;
  int patterns = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string hex, range;
    ls >> hex;
    const std::string pattern = unhex(hex);
    SCOPED_TRACE(pattern);
    std::vector<bool> expected(0x110000, false);
    while (ls >> range) {
      const size_t dash = range.find('-');
      const uint32_t a = std::stoul(range.substr(0, dash), nullptr, 16);
      const uint32_t b = std::stoul(range.substr(dash + 1), nullptr, 16);
      for (uint32_t cp = a; cp <= b; ++cp) expected[cp] = true;
    }
    // One subject of every code point; the pattern matches single code points (or runs
    // of them), so the matched set is the union of the matches.
    std::string subject;
    std::vector<size_t> start_of;
    for (char32_t cp = 0; cp < 0x110000; ++cp) {
      if (cp >= 0xD800 && cp < 0xE000) continue;
      start_of.push_back(subject.size());
      append_utf8(cp, &subject);
    }
    const OnigRegex regex(pattern);
    std::vector<std::pair<size_t, size_t>> matches;
    regex.find_all(subject, &matches);
    std::vector<bool> got(0x110000, false);
    std::u32string decoded;
    for (const auto& [s, e] : matches) {
      decoded.clear();
      ASSERT_TRUE(decode_utf8(std::string_view(subject).substr(s, e - s), &decoded));
      for (char32_t cp : decoded) got[cp] = true;
    }
    int mismatches = 0;
    for (uint32_t cp = 0; cp < 0x110000; ++cp) {
      if (got[cp] != expected[cp] && ++mismatches <= 5) ADD_FAILURE() << std::hex << "U+" << cp;
    }
    EXPECT_EQ(mismatches, 0);
    ++patterns;
  }
  EXPECT_GE(patterns, 20);
}

TEST(OnigRegex, TranslatesRubySyntax) {
  EXPECT_EQ(onig_to_pcre2("\\h+"), "[\\x{30}-\\x{39}\\x{41}-\\x{46}\\x{61}-\\x{66}]+");
  EXPECT_EQ(onig_to_pcre2("a\\vb"), "a\\x0Bb");
  EXPECT_EQ(onig_to_pcre2("\\u00e9x{,3}"), "\\x{00e9}x{0,3}");
  EXPECT_EQ(onig_to_pcre2("(?m:.)"), "(?s:.)");
  EXPECT_EQ(onig_to_pcre2("[[:alpha:]]"), "[[:alpha:]]");
  for (const std::string bad : {"[a[b]]", "[a&&b]", "abc\\", "[abc", "\\p{L", "(", "\xff"}) {
    EXPECT_THROW(OnigRegex{bad}, InputError) << bad;
  }
}

TEST(OnigRegex, EmptyMatchesFollowOnigIteration) {
  const auto spans = [](const std::string& pattern, const std::string& text) {
    std::vector<std::pair<size_t, size_t>> m;
    OnigRegex(pattern).find_all(text, &m);
    std::string out;
    for (const auto& [s, e] : m) out += str_cat("(", s, ",", e, ")");
    return out;
  };
  EXPECT_EQ(spans("a*", "baab"), "(0,0)(1,3)(4,4)");
  EXPECT_EQ(spans("x*", "é"), "(0,0)(2,2)");
  EXPECT_EQ(spans("^a|a$", "a\na"), "(0,1)(2,3)");
}

}  // namespace
}  // namespace deepinfer
