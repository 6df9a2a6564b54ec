// The generation policy on number digits (json_schema.h, NumberDigits): boundary
// lengths accepted and longer ones refused, the bound widened for the schema's own
// numbers, validation unbounded by default, masks equal to brute force, and a walk that
// never chooses EOS forced to end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "common/check.h"
#include "structured/structured.h"
#include "structured/token_masker.h"
#include "test_util.h"

namespace deepinfer::structured {
namespace {

using testing::bit;
using testing::brute_force_mask;

JsonSchemaOptions with_digits(NumberDigits d) {
  JsonSchemaOptions o;
  o.number_digits = d;
  return o;
}

void expect(const std::string& schema, const JsonSchemaOptions& options,
            std::initializer_list<std::pair<std::string, bool>> cases) {
  SCOPED_TRACE(schema);
  auto g = compile_json_schema(schema, options);
  for (const auto& [text, ok] : cases) EXPECT_EQ(matches(*g, text), ok) << text;
}

std::string digits(size_t n, char first = '1') { return std::string(1, first) + std::string(n - 1, '0'); }

TEST(NumberDigits, GenerationBoundariesAcceptedLongerRefused) {
  const JsonSchemaOptions gen = with_digits(kGenerationNumberDigits);
  const std::string i19 = "9223372036854775807", i20 = "18446744073709551615";  // int64 and uint64 max
  // 15 digits with a point, both sides counted, and 16.
  const std::string d15 = "0." + std::string(13, '0') + "1", d16 = "0." + std::string(14, '0') + "1";
  expect(R"({"type":"integer"})", gen,
         {{i19, true}, {"-" + i19, true}, {i20, false}, {"0", true}, {"1." + std::string(14, '0'), true},
          {"1." + std::string(15, '0'), false}, {"12345678901234.0", true}, {"123456789012345.0", false}});
  expect(R"({"type":"number"})", gen,
         {{i19, true}, {i20, false}, {d15, true}, {d16, false}, {"12345678901234.5", true},
          {"123456789012345.6", false}, {"-1.23456789012345e-99", true}, {"1.7976931348623157e308", false},
          {"1e+05", true}, {"1E-05", true}, {"1e005", false}, {"1e100", false}, {"-" + i19 + "e99", true}});
  // Values inside any schema (here array items and free object values) share the bound.
  expect(R"({"type":"array"})", gen, {{"[" + i19 + "," + d15 + "]", true}, {"[" + i20 + "]", false}});
  expect(R"({"type":"object"})", gen, {{"{\"a\":" + d15 + "}", true}, {"{\"a\":" + d16 + "}", false}});
  // 19 digits and a fraction would read as an integer in a double (a suite case the
  // model wrote when the bound was per part); 15 digits cannot.
  expect(R"({"not":{"type":["integer","boolean"]}})", gen,
         {{"2762712830047862789.76", false}, {"276271283004786.5", false}, {"27627128300478.5", true}, {"1", false}});
}

TEST(NumberDigits, ValidationIsUnboundedByDefault) {
  const std::string i40 = digits(40), f40 = "0." + std::string(39, '0') + "1";
  expect(R"({"type":"integer"})", {}, {{i40, true}, {"1." + std::string(40, '0'), true}});
  expect(R"({"type":"number"})", {}, {{f40, true}, {"1e" + std::string(30, '1'), true}});
  expect(R"({"type":"integer","minimum":1})", {}, {{i40, true}});
}

TEST(NumberDigits, CustomAndPartlyUnboundedBounds) {
  expect(R"({"type":"number"})", with_digits({3, 4, 0}),
         {{"999", true}, {"-99.99", true}, {"1000", false}, {"0.001", true}, {"0.0001", false}, {"1e2", false},
          {"123.4", true}, {"123.45", false}});
  expect(R"({"type":"number"})", with_digits({2, 0, 1}),
         {{"12", true}, {"1.5", false}, {"1e9", true}, {"1e10", false}, {"1E-5", true}});
  expect(R"({"type":"number"})", with_digits({-1, 4, 1}),
         {{digits(40), true}, {"12.34", true}, {"123.45", false}, {"1e10", false}});
  expect(R"({"type":"number"})", with_digits({3, -1, -1}),
         {{"100", true}, {"1000", false}, {"1000.5", true}, {"0." + std::string(40, '0') + "1", true},
          {"1e12345", true}});
}

TEST(NumberDigits, RangeKeywordsStayExact) {
  const JsonSchemaOptions gen = with_digits(kGenerationNumberDigits);
  expect(R"({"type":"integer","minimum":-3,"exclusiveMaximum":10})", gen,
         {{"-3", true}, {"-4", false}, {"9", true}, {"10", false}, {"9.0", true}});
  expect(R"({"type":"integer","minimum":1})", gen, {{"0", false}, {digits(19, '9'), true}, {digits(20), false}});
  expect(R"({"type":"number","exclusiveMinimum":0,"maximum":1})", gen,
         {{"0", false}, {"1", true}, {"1.0000000000000001", false}, {"0." + std::string(12, '0') + "1", true},
          {"0." + std::string(13, '0') + "1", true}, {"0." + std::string(14, '0') + "1", false}});
  expect(R"({"type":"number","maximum":-1.5})", gen, {{"-1.5", true}, {"-1.49", false}, {"-" + digits(19), true},
                                                       {"-" + digits(20), false}});
}

TEST(NumberDigits, BoundWidensToTheSchemasOwnNumbers) {
  const JsonSchemaOptions gen = with_digits(kGenerationNumberDigits);
  // Every valid value has 31+ integer digits: the bound becomes 32.
  expect(R"({"type":"integer","minimum":1e30})", gen,
         {{digits(31), true}, {digits(32, '9'), true}, {digits(33), false}, {digits(30, '9'), false}});
  // Between 0 and 1e-20 every value has 21+ fraction digits: the bound becomes 1 + 21.
  const std::string z19 = std::string(19, '0');
  expect(R"({"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1e-20})", gen,
         {{"0." + z19 + "05", true}, {"0." + z19 + "009", false}, {"0." + z19 + "1", false}});
  expect(R"({"type":"number","multipleOf":1e-20})", gen, {{"0." + z19 + "3", true}, {"0." + z19 + "30", false}});
  // A bound too tight for the least common multiple (5 * 7 * 9 = 315: 3 digits, the
  // widened bound 2) is dropped for that number rather than leave no value at all.
  const char* multiples =
      R"({"type":"integer","minimum":1,"allOf":[{"multipleOf":5},{"multipleOf":7},{"multipleOf":9}]})";
  expect(multiples, with_digits({1, 2, 1}), {{"315", true}, {"3150", true}, {"5", false}, {"0", false}});
  // With room for it the bound holds.
  expect(multiples, with_digits({3, 2, 1}), {{"315", true}, {"945", true}, {"1260", false}});
}

TEST(NumberDigits, LiteralsKeepTheirDigitsAndBoundTheirPadding) {
  const JsonSchemaOptions gen = with_digits(kGenerationNumberDigits);
  expect(R"({"const":1e30})", gen, {{digits(31), true}, {"1e30", true}, {"1e+30", true}, {"1e030", false}});
  expect(R"({"const":1e300})", gen, {{"1e300", true}, {"1E+300", true}, {"1e0300", false}});
  // 1e-17 has 18 digits of its own in plain form.
  const std::string f18 = "0." + std::string(16, '0') + "1";
  expect(R"({"enum":[1, 1e-17]})", gen,
         {{"1", true}, {"1." + std::string(14, '0'), true}, {"1." + std::string(15, '0'), false}, {f18, true},
          {f18 + "0", false}, {"1e-17", true}, {"1.000e-17", true}, {"1." + std::string(14, '0') + "e-17", true},
          {"1." + std::string(15, '0') + "e-17", false}});
  expect(R"({"const":2.5})", with_digits({19, 4, 0}), {{"2.500", true}, {"2.5000", false}, {"2.5e0", false}});
}

TEST(NumberDigits, InvalidBoundsAreInputErrors) {
  for (NumberDigits d : {NumberDigits{0, 2, 1}, NumberDigits{-2, -1, -1}, NumberDigits{1, 1, 1},
                         NumberDigits{1, -5, 1}, NumberDigits{1, 2, kMaxNumberDigits + 1}}) {
    EXPECT_THROW(compile_json_schema(R"({"type":"number"})", with_digits(d)), InputError);
  }
  EXPECT_NO_THROW(compile_json_schema(R"({"type":"number"})", with_digits({1, 0, 0})));
}

// A random walk over a synthetic vocabulary that checks every mask against brute force.
// Where EOS is allowed the walk takes it with probability 1/eos_one_in; with 0 only when
// nothing else is allowed. Returns the bytes.
std::string walk(const std::string& schema, const JsonSchemaOptions& options, uint32_t seed, int steps,
                 uint32_t eos_one_in) {
  SCOPED_TRACE(schema + " seed " + std::to_string(seed));
  static auto vocab = std::make_shared<VocabIndex>(testing::synthetic_vocab());
  auto g = compile_json_schema(schema, options);
  GrammarMatcher m(std::make_shared<TokenMasker>(g, vocab));
  std::vector<uint32_t> mask(m.mask_words());
  std::mt19937 rng(seed);
  std::string out;
  for (int step = 0; step < steps && !m.is_terminated(); ++step) {
    m.fill_next_token_bitmask(mask);
    EXPECT_EQ(mask, brute_force_mask(m, vocab->vocab_size())) << "after \"" << out << "\"";
    std::vector<int64_t> allowed;
    for (size_t id = 0; id < vocab->vocab_size(); ++id)
      if (bit(mask, int64_t(id)) && int64_t(id) != vocab->eos_id()) allowed.push_back(int64_t(id));
    int64_t pick = vocab->eos_id();
    const bool eos_ok = bit(mask, vocab->eos_id());
    if (!allowed.empty() && !(eos_ok && eos_one_in != 0 && rng() % eos_one_in == 0)) pick = allowed[rng() % allowed.size()];
    if (pick == vocab->eos_id() && !eos_ok) {
      ADD_FAILURE() << "no token allowed after \"" << out << "\"";
      break;
    }
    EXPECT_TRUE(m.accept_token(pick));
    if (pick != vocab->eos_id()) out += vocab->rank_bytes(uint32_t(vocab->token_rank(pick)));
  }
  if (m.is_terminated()) EXPECT_TRUE(matches(*g, out)) << out;
  if (std::getenv("WALK_DEBUG")) std::fprintf(stderr, "%s: %s\n", schema.c_str(), out.c_str());
  return out;
}

TEST(NumberDigits, MasksMatchBruteForce) {
  const char* schemas[] = {R"({"type":"number"})", R"({"type":"integer","minimum":5})",
                           R"({"type":"array","items":{"type":"number","exclusiveMinimum":0,"maximum":1}})",
                           R"({"enum":[1.5, 20, -3]})", R"({})"};
  for (const NumberDigits d : {kGenerationNumberDigits, NumberDigits{3, 4, 1}, NumberDigits{-1, 4, 1},
                               NumberDigits{3, -1, -1}})
    for (const char* schema : schemas)
      for (uint32_t seed = 1; seed <= 3; ++seed) walk(schema, with_digits(d), seed, 40, 30);
}

TEST(NumberDigits, AWalkThatNeverChoosesEosIsForcedToEnd) {
  // Every non-EOS token is taken while one is allowed: the number must still end within
  // its longest spelling, -D{19}e-DD = 24 bytes.
  const JsonSchemaOptions gen = with_digits(kGenerationNumberDigits);
  for (const char* schema : {R"({"type":"number"})", R"({"type":"integer"})", R"({"type":"integer","minimum":0})",
                             R"({"type":"number","not":{"type":"integer"}})"}) {
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      const std::string out = walk(schema, gen, seed, 100, 0);
      EXPECT_LE(out.size(), 24u) << out;
      EXPECT_TRUE(matches(*compile_json_schema(schema, gen), out)) << out;
      // Read as a double, the value keeps what the grammar checked.
      const double v = std::strtod(out.c_str(), nullptr);
      EXPECT_TRUE(std::isfinite(v)) << out;
      if (std::string(schema).find("not") != std::string::npos) EXPECT_NE(v, std::floor(v)) << out;
    }
  }
  // Without the bound such a walk runs on to the step limit.
  EXPECT_GT(walk(R"({"type":"integer"})", {}, 1, 100, 0).size(), 24u);
}

}  // namespace
}  // namespace deepinfer::structured
