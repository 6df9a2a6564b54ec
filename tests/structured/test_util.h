// Shared helpers for the structured-output tests: a synthetic vocabulary and a
// brute-force mask (advance a copy of the matcher by each token's bytes).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "structured/matcher.h"
#include "structured/vocab.h"

namespace deepinfer::structured::testing {

// GBNF grammars that stress the matcher's parser: JSON-ish values with nesting and
// whitespace, left recursion, ambiguity with nullable rules, right recursion through a
// nullable tail. Shared by the mask (matcher_test) and budget (budget_test) tests.
inline const char* const kGrammarCorpus[] = {
    // JSON-ish values with nesting and whitespace.
    "root ::= value\n"
    "value ::= obj | arr | str | num | \"true\" | \"null\"\n"
    "obj ::= \"{\" ws (str ws \":\" ws value (ws \",\" ws str ws \":\" ws value)*)? ws \"}\"\n"
    "arr ::= \"[\" ws (value (ws \",\" ws value)*)? ws \"]\"\n"
    "str ::= \"\\\"\" [a-z ]* \"\\\"\"\n"
    "num ::= \"-\"? [0-9]+\n"
    "ws ::= [ \\n]{0,3}\n",
    // Left recursion.
    "root ::= expr\nexpr ::= expr [-+] term | term\nterm ::= [0-9]+ | \"(\" expr \")\"\n",
    // Ambiguity and nullable rules.
    "root ::= a b\na ::= \"x\"* | \"xy\"\nb ::= \"y\"? \"z\"* ws\nws ::= \" \"*\n",
    // Right recursion through a nullable tail.
    "root ::= list\nlist ::= item (\",\" list)?\nitem ::= [a-c]+ | \"[\" list? \"]\"\n",
};

// A few thousand byte strings that look like a BPE vocabulary for JSON-ish text: every
// single byte, JSON punctuation runs, words with and without a leading space, numbers,
// whitespace runs, escapes, multi-byte UTF-8 characters and pieces of them, random
// strings; duplicates, empty (special) ids and an EOS id.
inline TokenVocab synthetic_vocab(uint32_t seed = 1, size_t random_tokens = 2000) {
  TokenVocab v;
  v.token_bytes.push_back("");  // a special token
  v.eos_id = 1;
  v.token_bytes.push_back("</s>");
  for (int b = 0; b < 256; ++b) v.token_bytes.push_back(std::string(1, char(b)));
  for (const char* t : {"{\"", "\":", "\",", "\"}", "\"]", "\":\"", "\", \"", "\": ", ", \"", "{}", "[]",
                        "[{", "}]", "},", "}}", "]]", "\":[", "\":{", "\":\"", ": ", ", ", " {", " [",
                        "\\n", "\\\"", "\\\\", "\\u", "\\u00", "\\ud83d", "\\/", "true", "false", "null",
                        " true", " false", " null", "tru", "nul", "0.", ".5", "e+", "E-", "-1", "1e",
                        "name", " name", "\"name", "\"name\"", "\"name\":", "age", "\"age\":", "id", "\"id\"",
                        "type", "\"type\": \"", "object", "string", "number", "items", "hello", " world",
                        "foo", "bar", "baz", "abc", "xyz", "http", "://", "www", ".com", "2024", "-01-",
                        "T12", ":00", "Z\"", "@", "example", ".org", "uuid", "é", "世界", "😀", " 世",
                        "\xE4\xB8", "\x96", "\xF0\x9F", "\x98\x80"})
    v.token_bytes.push_back(t);
  for (int n = 1; n <= 24; ++n) {
    v.token_bytes.push_back(std::string(n, ' '));
    v.token_bytes.push_back("\n" + std::string(n, ' '));
  }
  for (int i = 0; i < 120; ++i) v.token_bytes.push_back(std::to_string(i * 7 % 1000));
  v.token_bytes.push_back("name");  // a duplicate
  std::mt19937 rng(seed);
  const std::string alphabet = "abcdefxyz0123456789 \"{}[],:.-+eE\\ntu/_@";
  for (size_t i = 0; i < random_tokens; ++i) {
    std::string t;
    const int len = 1 + int(rng() % 6);
    for (int k = 0; k < len; ++k) t += alphabet[rng() % alphabet.size()];
    v.token_bytes.push_back(t);
  }
  v.token_bytes.push_back("");  // padding ids at the end, as in a model's logits
  v.token_bytes.push_back("");
  return v;
}

inline bool bit(const std::vector<uint32_t>& words, int64_t id) { return (words[id >> 5] >> (id & 31)) & 1; }

// The mask computed one token at a time on copies of the matcher.
inline std::vector<uint32_t> brute_force_mask(const GrammarMatcher& m, size_t vocab_size) {
  std::vector<uint32_t> words((vocab_size + 31) / 32, 0);
  for (size_t id = 0; id < vocab_size; ++id) {
    GrammarMatcher copy = m;
    if (copy.accept_token(int64_t(id))) words[id >> 5] |= uint32_t(1) << (id & 31);
  }
  return words;
}

}  // namespace deepinfer::structured::testing
