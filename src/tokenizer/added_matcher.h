// Finds added tokens in text the way tokenizers' AddedVocabulary::find_matches does:
// leftmost-longest matches of the token strings, then each token's flags: single_word
// drops a match touching a word character, lstrip / rstrip widen it over neighbouring
// whitespace, and special tokens can be switched off (tokenizers' encode_special_tokens).
//
// Matching walks a byte trie from each position that can start a token, so its cost is
// bounded by the text length times the longest token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deepinfer {

struct AddedTokenSpec {
  std::string pattern;  // the text to find (the normalized form for normalized tokens)
  int64_t id = 0;
  bool special = false;
  bool single_word = false, lstrip = false, rstrip = false;
};

class AddedTokenMatcher {
 public:
  // When two specs have the same pattern the first one is kept.
  explicit AddedTokenMatcher(const std::vector<AddedTokenSpec>& specs);

  bool empty() const { return specs_.empty(); }

  struct Split {
    size_t begin, end;
    int64_t id;  // -1: text between tokens
  };
  // Cuts `text` into token and non-token pieces covering it in order (a piece may be
  // empty; an rstrip token can make pieces overlap exactly as in tokenizers).
  void split(std::string_view text, bool match_special, std::vector<Split>* out) const;

 private:
  struct Node {
    int32_t spec = -1;                          // index in specs_ of the token ending here
    std::vector<std::pair<uint8_t, int32_t>> children;  // sorted by byte
  };
  int32_t child(int32_t node, uint8_t byte) const;
  // The spec index and length of the longest token starting at `pos`, or -1.
  int32_t longest_at(std::string_view text, size_t pos, size_t* len) const;

  std::vector<AddedTokenSpec> specs_;
  std::vector<Node> nodes_;
  int32_t root_children_[256];
};

}  // namespace deepinfer
