// IncrementalDetokenizer: the streamed pieces concatenate to Tokenizer::decode and never
// split a UTF-8 sequence, for every decoder configuration of the fixtures.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "common/check.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/detokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace deepinfer {
namespace {

std::string fixture(const std::string& name) { return std::string(DEEPINFER_FIXTURES) + "/tokenizer/" + name; }

void check_stream(const Tokenizer& tok, const std::vector<int64_t>& ids, bool skip) {
  IncrementalDetokenizer detok(tok, skip);
  std::string streamed;
  for (int64_t id : ids) {
    const std::string piece = detok.push(id);
    ASSERT_TRUE(is_valid_utf8(piece)) << "after id " << id;
    streamed += piece;
  }
  const std::string tail = detok.finish();
  ASSERT_TRUE(is_valid_utf8(tail));
  streamed += tail;
  EXPECT_EQ(streamed, tok.decode(ids, skip));
}

class DetokenizerTest : public ::testing::TestWithParam<const char*> {};

TEST_P(DetokenizerTest, StreamEqualsDecode) {
  const auto tok = Tokenizer::load(fixture(GetParam()));
  std::mt19937 rng(7);
  for (int round = 0; round < 400; ++round) {
    std::vector<int64_t> ids(rng() % 24);
    for (int64_t& id : ids) id = int64_t(rng() % uint32_t(tok->size()));
    check_stream(*tok, ids, round % 2 == 0);
  }
  // Text whose characters span several byte tokens.
  for (const std::string text : {"日本語😀👨‍👩‍👧 e\u0301", "\xC3\xA9\xE2\x82\xAC", "<｜User｜>Ω</think>x"}) {
    for (bool skip : {false, true}) check_stream(*tok, tok->encode(text), skip);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, DetokenizerTest,
                         ::testing::Values("bpe_tokenizer.json", "handmade_nodecoder.json", "handmade_sequence.json",
                                           "bpe_variant_nobytelevel.json"));

TEST(Detokenizer, DecodersThatCannotStreamOrNeedNoBytes) {
  for (const std::string decoder : {R"({"type": "Sequence", "decoders": []})",
                                    R"({"type": "Sequence", "decoders": [{"type": "ByteLevel"}, {"type": "ByteLevel"}]})"}) {
    const auto tok = Tokenizer::from_json(
        R"({"decoder": )" + decoder +
            R"(, "model": {"vocab": {"a": 0, "Ã": 1, "Ä": 2, "©": 3, "ł": 4, "Ċ": 5, "é": 6}, "merges": []}})",
        "t.json");
    std::mt19937 rng(5);
    for (int round = 0; round < 200; ++round) {
      std::vector<int64_t> ids(rng() % 10);
      for (int64_t& id : ids) id = int64_t(rng() % 7);
      check_stream(*tok, ids, false);
    }
  }
}

TEST(Detokenizer, HoldsBackPartialCharacters) {
  const auto tok = Tokenizer::load(fixture("bpe_tokenizer.json"));
  // The single-byte tokens of "é" (C3 A9) and "€" (E2 82 AC).
  const auto byte = [&](unsigned char b) { return *tok->token_to_id(byte_level::encode(std::string(1, char(b)))); };
  IncrementalDetokenizer detok(*tok, false);
  EXPECT_EQ(detok.push(byte(0xC3)), "");
  EXPECT_EQ(detok.push(byte(0xA9)), "\xC3\xA9");
  EXPECT_EQ(detok.push(byte(0xE2)), "");
  EXPECT_EQ(detok.push(byte(0x82)), "");
  EXPECT_EQ(detok.push(byte(0xAC)), "\xE2\x82\xAC");
  // A byte that cannot continue the sequence ends it: U+FFFD, then the byte's own text.
  EXPECT_EQ(detok.push(byte(0xE2)), "");
  EXPECT_EQ(detok.push(*tok->token_to_id("a")), "\xEF\xBF\xBD" "a");
  // A dangling lead byte at the end becomes U+FFFD, as decode gives.
  EXPECT_EQ(detok.push(byte(0xF0)), "");
  EXPECT_EQ(detok.finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(detok.finish(), "");
  EXPECT_THROW(detok.push(tok->size()), InputError);
  EXPECT_THROW(detok.push(-1), InputError);
}

}  // namespace
}  // namespace deepinfer
