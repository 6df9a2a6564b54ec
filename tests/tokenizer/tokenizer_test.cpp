// Checks the tokenizer against expectations computed by the Python tokenizers library
// (tools/gen_tokenizer_vectors.py vectors): every id's decode and id_to_token, the
// engram compressed vocabulary, and random multi-id decodes with and without special
// tokens.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/check.h"
#include "tokenizer/engram_vocab.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

std::string fixture(const std::string& name) { return std::string(DEEPINFER_FIXTURES) + "/tokenizer/" + name; }

std::string unhex(const std::string& hex) {
  if (hex == "-") return "";
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(char(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<int64_t> parse_ids(const std::string& list) {
  std::vector<int64_t> ids;
  if (list == "-") return ids;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) ids.push_back(std::stoll(item));
  return ids;
}

// Runs every expectation line of `<name>.expect` against `<name>.json`.
void check_against_python(const std::string& name) {
  SCOPED_TRACE(name);
  const auto tok = Tokenizer::load(fixture(name + ".json"));
  const CompressedVocab vocab = build_compressed_vocab(*tok);
  std::ifstream in(fixture(name + ".expect"));
  ASSERT_TRUE(in.good());
  std::string line;
  int tokens = 0, decodes = 0;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string kind;
    ls >> kind;
    if (kind == "size") {
      int64_t n;
      ls >> n;
      EXPECT_EQ(tok->size(), n);
    } else if (kind == "hf_len") {
      int64_t n;
      ls >> n;
      EXPECT_EQ(tok->hf_len(), n);
      ASSERT_EQ(int64_t(vocab.token_map.size()), n);
    } else if (kind == "compressed_size") {
      int64_t n;
      ls >> n;
      EXPECT_EQ(vocab.size, n);
    } else if (kind == "token") {
      int64_t id, cid;
      std::string text, token, text_skip;
      ls >> id >> text >> token >> cid >> text_skip;
      EXPECT_EQ(tok->decode({id}, false), unhex(text)) << "id " << id;
      EXPECT_EQ(tok->decode({id}, true), unhex(text_skip)) << "id " << id;
      EXPECT_EQ(tok->has_token(id), token != "none") << "id " << id;
      EXPECT_EQ(tok->id_to_token(id), token == "none" ? "" : unhex(token)) << "id " << id;
      if (cid >= 0) {
        EXPECT_EQ(vocab.token_map[size_t(id)], cid) << "id " << id;
      } else {
        EXPECT_GE(id, int64_t(vocab.token_map.size()));
      }
      ++tokens;
    } else if (kind == "decode") {
      int skip;
      std::string ids, text;
      ls >> skip >> ids >> text;
      EXPECT_EQ(tok->decode(parse_ids(ids), skip != 0), unhex(text)) << "ids " << ids << " skip " << skip;
      ++decodes;
    } else {
      FAIL() << "unknown line: " << line;
    }
  }
  EXPECT_EQ(tokens, tok->size());
  EXPECT_GT(decodes, 100);
}

TEST(TokenizerTest, TrainedByteLevelBpeMatchesPython) { check_against_python("bpe_tokenizer"); }
TEST(TokenizerTest, HandmadeWithoutDecoderMatchesPython) { check_against_python("handmade_nodecoder"); }
TEST(TokenizerTest, HandmadeSequenceDecoderMatchesPython) { check_against_python("handmade_sequence"); }

TEST(TokenizerTest, AddedTokenIdsAndSpecialFlags) {
  const auto tok = Tokenizer::load(fixture("bpe_tokenizer.json"));
  EXPECT_EQ(tok->size(), 458);
  EXPECT_EQ(tok->token_to_id("<｜begin▁of▁sentence｜>"), 0);
  EXPECT_EQ(tok->token_to_id("<｜User｜>"), 450);
  EXPECT_TRUE(tok->is_special(450));
  EXPECT_FALSE(tok->is_special(455));  // "hello world", added but not special
  EXPECT_EQ(tok->decode({0, 455, 1}, false), "<｜begin▁of▁sentence｜>hello world<｜end▁of▁sentence｜>");
  EXPECT_EQ(tok->decode({0, 455, 1}, true), "hello world");
  EXPECT_FALSE(tok->token_to_id("no such token").has_value());

  // The ids written in the file are ignored: "<s>" (file id 99) follows the vocabulary.
  const auto hand = Tokenizer::load(fixture("handmade_nodecoder.json"));
  EXPECT_EQ(hand->token_to_id("<s>"), 6);
  EXPECT_EQ(hand->id_to_token(7), "▁ab_ç");  // normalized added token: its normalized form
  EXPECT_FALSE(hand->has_token(1));
  EXPECT_EQ(hand->size(), 11);
  EXPECT_EQ(hand->hf_len(), 9);  // "ab" is both a vocabulary and an added token
}

TEST(TokenizerTest, OutOfRangeIdsThrow) {
  const auto tok = Tokenizer::load(fixture("bpe_tokenizer.json"));
  EXPECT_THROW(tok->decode({458}, false), InputError);
  EXPECT_THROW(tok->decode({5, -1}, false), InputError);
  EXPECT_THROW(tok->id_to_token(-3), InputError);
  EXPECT_THROW(tok->id_to_token(tok->size()), InputError);
  EXPECT_EQ(tok->decode({}, false), "");
}

TEST(TokenizerTest, ByteLevelDecodeReplacesInvalidUtf8) {
  const auto tok = Tokenizer::load(fixture("bpe_tokenizer.json"));
  const int64_t c3 = *tok->token_to_id("Ã"), a9 = *tok->token_to_id("©");
  EXPECT_EQ(tok->decode({c3, a9}, false), "é");
  EXPECT_EQ(tok->decode({c3}, false), "\xEF\xBF\xBD");
  EXPECT_EQ(tok->decode({a9, c3}, false), "\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace deepinfer
