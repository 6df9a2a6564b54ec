// Generation within a token budget (structured/budget.h): the shortest-completion length
// min_bytes_to_accept() is exact (known values for regexes, JSON Schemas and recursive
// GBNF grammars, and the Bellman equation "0 iff the match can end, else 1 + the best
// next byte" at every step of random walks, which only the true distance satisfies), the
// budget filter removes exactly the tokens after which a complete match no longer fits
// (against a token-by-token check, so the bound that lets it skip work is sound), and
// adversarial generation under the filter always ends with a complete match within
// max_tokens where the same policy without it does not.
#include <gtest/gtest.h>

#include <random>

#include "structured/budget.h"
#include "structured/structured.h"
#include "structured/token_masker.h"
#include "test_util.h"

namespace deepinfer::structured {
namespace {

using testing::bit;
using testing::synthetic_vocab;

std::shared_ptr<const VocabIndex> shared_vocab() {
  static auto v = std::make_shared<VocabIndex>(synthetic_vocab());
  return v;
}

GrammarMatcher matcher_for(std::shared_ptr<const CompiledGrammar> g) {
  return GrammarMatcher(std::make_shared<TokenMasker>(std::move(g), shared_vocab()));
}

// min_bytes_to_accept after each prefix of `text` (fed byte by byte) equals `expect`.
void expect_distances(std::shared_ptr<const CompiledGrammar> g, const std::string& text,
                      const std::vector<uint32_t>& expect) {
  ASSERT_EQ(expect.size(), text.size() + 1);
  GrammarMatcher m = matcher_for(std::move(g));
  for (size_t i = 0; i <= text.size(); ++i) {
    EXPECT_EQ(m.min_bytes_to_accept(), expect[i]) << "after \"" << text.substr(0, i) << "\"";
    if (i < text.size()) {
      ASSERT_TRUE(m.accept_bytes(text.substr(i, 1))) << text.substr(0, i + 1);
    }
  }
}

JsonSchemaOptions compact() {
  JsonSchemaOptions o;
  o.whitespace = JsonSchemaOptions::Whitespace::kCompact;
  return o;
}

TEST(Budget, DistancesOfRegexes) {
  expect_distances(compile_regex("[a-c]{3,5}x"), "aaaax", {4, 3, 2, 1, 1, 0});
  expect_distances(compile_regex("(abc|d)+"), "abcd", {1, 2, 1, 0, 0});
  expect_distances(compile_regex("\\p{L}+@[0-9]{4}"), "é@12", {6, 6, 5, 4, 3, 2});
}

TEST(Budget, DistancesOfJsonSchemas) {
  // {"a":0} is the shortest instance; a minus sign needs a digit; a key with required
  // properties after it needs them all.
  auto g = compile_json_schema(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],
      "additionalProperties":false})", compact());
  expect_distances(g, "{\"a\":-1}", {7, 6, 5, 4, 3, 2, 2, 1, 0});
  auto s = compile_json_schema(R"({"type":"string","minLength":3})", compact());
  expect_distances(s, "\"ab", {5, 4, 3, 2});
  auto nested = compile_json_schema(R"({"type":"array","items":{"type":"array","items":{"type":"boolean"},
      "minItems":1},"minItems":1})", compact());
  expect_distances(nested, "[[", {8, 7, 6});  // [[true]]
}

TEST(Budget, DistancesOfRecursiveGrammars) {
  // Nested arrays need their closing brackets; left recursion needs its closing tail.
  auto arrays = compile_gbnf("root ::= \"[\" (root (\",\" root)*)? \"]\"\n");
  expect_distances(arrays, "[[[],[", {2, 1, 2, 3, 2, 4, 3});
  auto expr = compile_gbnf("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= \"x\" | \"(\" expr \")\"\n");
  expect_distances(expr, "((x+", {1, 2, 3, 2, 3});
  auto ws = compile_gbnf("root ::= a b\na ::= \"x\"* | \"xy\"\nb ::= \"y\"? \"z\"* ws\nws ::= \" \"*\n");
  expect_distances(ws, "xxy", {0, 0, 0, 0});
}

// At every step of random walks: 0 exactly when the match can end, otherwise one more
// than the best byte's. The only function that satisfies this is the shortest distance.
void check_bellman(std::shared_ptr<const CompiledGrammar> g, uint32_t seed, int steps) {
  GrammarMatcher m = matcher_for(g);
  std::vector<uint32_t> mask(m.mask_words());
  auto vocab = shared_vocab();
  std::mt19937 rng(seed);
  std::string out;
  for (int step = 0; step < steps; ++step) {
    const uint32_t d = m.min_bytes_to_accept();
    if (m.can_end()) {
      ASSERT_EQ(d, 0u) << "after \"" << out << "\"";
    } else {
      uint32_t best = BudgetTables::kInf;
      for (int b = 0; b < 256; ++b) {
        GrammarMatcher c = m;
        if (c.accept_bytes(std::string(1, char(b)))) best = std::min(best, c.min_bytes_to_accept());
      }
      ASSERT_EQ(d, best + 1) << "after \"" << out << "\"";
    }
    m.fill_next_token_bitmask(mask);
    std::vector<int64_t> allowed;
    for (size_t id = 0; id < vocab->vocab_size(); ++id)
      if (bit(mask, int64_t(id)) && int64_t(id) != vocab->eos_id()) allowed.push_back(int64_t(id));
    if (allowed.empty()) break;
    const int64_t pick = allowed[rng() % allowed.size()];
    ASSERT_TRUE(m.accept_token(pick));
    out += vocab->rank_bytes(uint32_t(vocab->token_rank(pick)));
  }
}

const char* kSchemas[] = {
    R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},"age":{"type":"integer","minimum":0,
        "maximum":120},"tags":{"type":"array","items":{"enum":["a","bc","xyz"]},"maxItems":3}},
        "required":["name","age"],"additionalProperties":false})",
    R"({"$defs":{"t":{"type":"object","properties":{"v":{"type":"number"},"kids":{"type":"array",
        "items":{"$ref":"#/$defs/t"}}},"required":["v"]}},"$ref":"#/$defs/t"})",
    R"({"type":"object","properties":{"id":{"type":"string","format":"uuid"},"when":{"type":"string",
        "format":"date"},"s":{"type":"string","minLength":12}},"required":["id","when","s"]})",
    R"({})",
};

TEST(Budget, DistancesSatisfyTheBellmanEquation) {
  for (const char* text : testing::kGrammarCorpus) {
    SCOPED_TRACE(text);
    for (uint32_t seed = 1; seed <= 3; ++seed) check_bellman(compile_gbnf(text), seed, 25);
  }
  for (const char* schema : kSchemas) {
    SCOPED_TRACE(schema);
    for (uint32_t seed = 1; seed <= 3; ++seed) check_bellman(compile_json_schema(schema), seed, 25);
  }
  for (const char* re : {"[a-c]{3,5}x", "(ab|a)*b?c{2,4}", "\"[a-z ]{2,12}\""}) {
    SCOPED_TRACE(re);
    for (uint32_t seed = 1; seed <= 3; ++seed) check_bellman(compile_regex(re), seed, 20);
  }
}

// Generates under the budget filter, checking every filtered mask against a token-by-
// token check of the unfiltered one. `adversarial`: prefer long tokens that open
// structures and never choose EOS while another token is allowed. Returns whether the
// output completed (EOS accepted, or only EOS left) within max_tokens.
bool generate(std::shared_ptr<const CompiledGrammar> g, int64_t max_tokens, bool budget, uint32_t seed,
              std::string* out) {
  auto vocab = shared_vocab();
  GrammarMatcher m = matcher_for(g);
  std::vector<uint32_t> mask(m.mask_words()), plain(m.mask_words());
  std::mt19937 rng(seed);
  for (int64_t i = 0; i < max_tokens; ++i) {
    m.fill_next_token_bitmask(mask);
    plain = mask;
    if (budget) {
      EXPECT_TRUE(m.restrict_to_budget(mask, max_tokens - i)) << "after \"" << *out << "\"";
      for (size_t id = 0; id < vocab->vocab_size(); ++id) {
        if (!bit(plain, int64_t(id)) || int64_t(id) == vocab->eos_id()) {
          EXPECT_EQ(bit(mask, int64_t(id)), bit(plain, int64_t(id))) << id;
          continue;
        }
        GrammarMatcher c = m;
        EXPECT_TRUE(c.accept_token(int64_t(id)));
        const bool fits = int64_t(c.min_bytes_to_accept()) <= max_tokens - i - 1;
        if (bit(mask, int64_t(id)) != fits) {
          ADD_FAILURE() << "after \"" << *out << "\" with " << max_tokens - i << " tokens left: token \""
                        << vocab->rank_bytes(uint32_t(vocab->token_rank(int64_t(id)))) << "\" filtered "
                        << !bit(mask, int64_t(id)) << ", needs " << c.min_bytes_to_accept();
          return false;
        }
      }
    }
    std::vector<int64_t> allowed, opening;
    for (size_t id = 0; id < vocab->vocab_size(); ++id) {
      if (!bit(mask, int64_t(id)) || int64_t(id) == vocab->eos_id()) continue;
      allowed.push_back(int64_t(id));
      const std::string_view b = vocab->rank_bytes(uint32_t(vocab->token_rank(int64_t(id))));
      if (b.find_first_of("{[\"(") != std::string_view::npos || b.size() >= 4) opening.push_back(int64_t(id));
    }
    if (allowed.empty()) {
      if (!bit(mask, vocab->eos_id())) return false;
      EXPECT_TRUE(m.accept_token(vocab->eos_id()));
      EXPECT_TRUE(matches(*g, *out)) << *out;
      return true;
    }
    const int64_t pick = !opening.empty() && rng() % 4 != 0 ? opening[rng() % opening.size()]
                                                             : allowed[rng() % allowed.size()];
    EXPECT_TRUE(m.accept_token(pick));
    *out += vocab->rank_bytes(uint32_t(vocab->token_rank(pick)));
  }
  // The budget is spent: complete only if the match can end here.
  if (budget) {
    m.fill_next_token_bitmask(mask);
    EXPECT_TRUE(m.restrict_to_budget(mask, 0));
    for (size_t id = 0; id < vocab->vocab_size(); ++id)
      if (int64_t(id) != vocab->eos_id()) {
        EXPECT_FALSE(bit(mask, int64_t(id))) << id;
      }
  }
  return m.can_end();
}

TEST(Budget, FilteredGenerationAlwaysCompletes) {
  int truncated_without = 0;
  auto run = [&](std::shared_ptr<const CompiledGrammar> g, int64_t max_tokens) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      std::string out;
      EXPECT_TRUE(generate(g, max_tokens, true, seed, &out)) << "max_tokens " << max_tokens << ": " << out;
      std::string free;
      if (!generate(g, max_tokens, false, seed, &free)) ++truncated_without;
    }
  };
  for (const char* text : testing::kGrammarCorpus) {
    SCOPED_TRACE(text);
    run(compile_gbnf(text), 6);
    run(compile_gbnf(text), 15);
  }
  for (const char* schema : kSchemas) {
    SCOPED_TRACE(schema);
    auto g = compile_json_schema(schema);
    GrammarMatcher m = matcher_for(g);
    const int64_t shortest = m.min_bytes_to_accept();
    run(g, shortest);  // every token must then be a shortest step
    run(g, shortest + 8);
  }
  // The adversarial policy runs past max_tokens without the filter.
  EXPECT_GT(truncated_without, 10);
}

TEST(Budget, FiltersTokensThatOpenTooMuch) {
  // "a" completes at once; "b" commits to six more digits.
  auto g = compile_regex("a|b[0-9]{6}");
  auto vocab = shared_vocab();
  const int64_t a = 2 + 'a', b = 2 + 'b';  // synthetic_vocab: single bytes from id 2
  ASSERT_EQ(vocab->rank_bytes(uint32_t(vocab->token_rank(b))), "b");
  GrammarMatcher m = matcher_for(g);
  std::vector<uint32_t> mask(m.mask_words()), before;
  m.fill_next_token_bitmask(mask);
  before = mask;
  EXPECT_FALSE(m.restrict_to_budget(mask, 0));  // needs a byte: no guarantee, unchanged
  EXPECT_EQ(mask, before);
  EXPECT_TRUE(m.restrict_to_budget(mask, 6));
  EXPECT_TRUE(bit(mask, a));
  EXPECT_FALSE(bit(mask, b));
  mask = before;
  EXPECT_TRUE(m.restrict_to_budget(mask, 7));
  EXPECT_EQ(mask, before);
  // After "b", six digits: a multi-digit token is fine (it makes progress), but five
  // tokens cannot be guaranteed.
  ASSERT_TRUE(m.accept_token(b));
  EXPECT_EQ(m.min_bytes_to_accept(), 6u);
  m.fill_next_token_bitmask(mask);
  before = mask;
  EXPECT_FALSE(m.restrict_to_budget(mask, 5));
  EXPECT_EQ(mask, before);
  EXPECT_TRUE(m.restrict_to_budget(mask, 6));
  EXPECT_EQ(mask, before);
}

TEST(Budget, TokensThatCanFinishTheRuleMidwayKeepThatPath) {
  // After "y", the token "yx" read inside `a` commits to "zzzzz", but it can also end
  // `a` after its first byte and let the caller read the "x": the match is then complete.
  auto g = compile_gbnf("root ::= a \"x\"\na ::= \"yy\" | \"yyxzzzzz\"\n");
  TokenVocab tv;
  for (int b = 0; b < 256; ++b) tv.token_bytes.push_back(std::string(1, char(b)));
  tv.token_bytes.push_back("yx");
  tv.token_bytes.push_back("yxz");
  tv.token_bytes.push_back("</s>");
  tv.eos_id = 258;
  GrammarMatcher m(std::make_shared<TokenMasker>(g, std::make_shared<VocabIndex>(tv)));
  ASSERT_TRUE(m.accept_bytes("y"));
  EXPECT_EQ(m.min_bytes_to_accept(), 2u);
  std::vector<uint32_t> mask(m.mask_words());
  m.fill_next_token_bitmask(mask);
  ASSERT_TRUE(bit(mask, 256) && bit(mask, 257) && bit(mask, 'y'));
  EXPECT_TRUE(m.restrict_to_budget(mask, 3));
  EXPECT_TRUE(bit(mask, 256));   // "yx": complete at once
  EXPECT_FALSE(bit(mask, 257));  // "yxz": needs "zzzz"
  EXPECT_TRUE(bit(mask, 'y'));
}

TEST(Budget, RollbackKeepsDistancesExact) {
  auto g = compile_gbnf("root ::= \"[\" (root (\",\" root)*)? \"]\"\n");
  GrammarMatcher m = matcher_for(g);
  ASSERT_TRUE(m.accept_bytes("[[["));
  EXPECT_EQ(m.min_bytes_to_accept(), 3u);
  ASSERT_TRUE(m.accept_bytes("],[["));
  EXPECT_EQ(m.min_bytes_to_accept(), 4u);
  m.rollback(1);
  EXPECT_EQ(m.min_bytes_to_accept(), 3u);
  ASSERT_TRUE(m.accept_bytes("]]"));
  EXPECT_EQ(m.min_bytes_to_accept(), 1u);
}

TEST(Budget, TablesReportSingleByteTokens) {
  auto g = compile_regex("a+");
  TokenMasker full(g, shared_vocab());
  EXPECT_TRUE(full.budget().all_single_bytes());
  TokenVocab v;
  v.token_bytes = {"a", "aa", "b"};
  TokenMasker partial(g, std::make_shared<VocabIndex>(v));
  EXPECT_FALSE(partial.budget().all_single_bytes());
  EXPECT_EQ(partial.budget().horizon(), 2u);
}

}  // namespace
}  // namespace deepinfer::structured
