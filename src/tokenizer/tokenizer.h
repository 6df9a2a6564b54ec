// A Hugging Face tokenizer.json loader for byte-level BPE tokenizers (the format
// DeepSeek ships), reproducing the Rust `tokenizers` library (0.23): the ids it assigns
// to added tokens, id_to_token and decode, byte for byte.
//
// tokenizer.json is hostile input: every malformed or unsupported part throws
// InputError naming it; nothing in it can crash the process or make it allocate
// without bound (token ids are limited to kMaxTokenId).
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace deepinfer {

class Encoder;
class HfNormalizer;
struct BpeOptions;

// Thread-safe after loading: every query is const.
class Tokenizer {
 public:
  static constexpr int64_t kMaxTokenId = (int64_t(1) << 24) - 1;

  static std::unique_ptr<Tokenizer> load(const std::string& path);
  // `origin` labels error messages (usually the file path).
  static std::unique_ptr<Tokenizer> from_json(const std::string& json_text, const std::string& origin);
  ~Tokenizer();

  // One past the largest id of the model vocabulary and the added tokens: the range of
  // valid ids. Ids below it that no token has are holes: they decode to "" and
  // id_to_token returns "".
  int64_t size() const { return int64_t(slot_of_id_.size()); }
  // Python's len(tokenizer) (Rust get_vocab_size(with_added_tokens=true)): the number of
  // distinct token strings in the model vocabulary and the added tokens. Equals size()
  // when ids are contiguous, as in released tokenizers; never exceeds it.
  int64_t hf_len() const { return hf_len_; }
  bool has_token(int64_t id) const;

  // The token's string as Rust's Tokenizer::id_to_token returns it: the added token's
  // content (its normalized form when it is `normalized` and the normalizer changes
  // it), else the model vocabulary's string. InputError when id is outside [0, size()).
  std::string id_to_token(int64_t id) const;
  // Added tokens first, then the model vocabulary.
  std::optional<int64_t> token_to_id(const std::string& token) const;
  // Whether the token string of `id` is the content of a special added token.
  bool is_special(int64_t id) const;

  // Rust Tokenizer::decode: holes are dropped, special tokens too when asked, then the
  // decoder (ByteLevel: characters back to bytes, invalid UTF-8 replaced by U+FFFD the
  // way String::from_utf8_lossy does; no decoder: tokens joined by spaces).
  // InputError when an id is outside [0, size()).
  std::string decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const;

  // Python's tokenizer.encode(text, add_special_tokens=False).ids: added tokens first
  // (their lstrip / rstrip / single_word / normalized flags), then the normalizer, the
  // pre-tokenizer and the BPE model. No BOS is added. With allow_special false, special
  // tokens are not recognised and encode as plain text (tokenizers'
  // encode_special_tokens); non-special added tokens still are. InputError on invalid
  // UTF-8 and on tokenizer.json parts that are only unsupported for encoding.
  std::vector<int64_t> encode(std::string_view text, bool allow_special = true) const;

  // How the ByteLevel decoder is configured: the number of ByteLevel steps (a Sequence
  // may repeat it), 0 for a Sequence without one, -1 for no decoder.
  int byte_level_steps() const { return byte_level_steps_; }

 private:
  struct AddedToken {
    std::string content;
    bool special = false;
    bool normalized = true;
    bool single_word = false, lstrip = false, rstrip = false;
    bool operator==(const AddedToken&) const = default;
  };
  struct AddedTokens {
    std::unordered_map<int64_t, AddedToken> by_id;
    std::unordered_map<int64_t, std::string> normalized_form;  // where it differs
    std::set<std::string> special_contents;
  };

  Tokenizer() = default;
  void parse(const std::string& json_text, const std::string& origin);
  // Fills vocab_ and token_of_id (model vocabulary), validates the merges and returns
  // them in rank order with the model's options.
  std::vector<std::pair<std::string, std::string>> parse_model(const nlohmann::json& model, const std::string& origin,
                                                               std::vector<const std::string*>* token_of_id,
                                                               BpeOptions* options);
  void build_encoder(const nlohmann::json& root, const AddedTokens& added, HfNormalizer normalizer,
                     const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
                     const std::string& origin);
  // Fills added_ids_.
  AddedTokens parse_added_tokens(const nlohmann::json& list, const HfNormalizer& normalizer,
                                 const std::string& origin);

  struct Slot {
    std::string token;  // what id_to_token returns and the decoder receives
    bool special = false;
  };
  std::vector<int32_t> slot_of_id_;  // -1 for holes
  int64_t hf_len_ = 0;
  std::vector<Slot> slots_;
  std::unordered_map<std::string, int64_t> vocab_;        // model vocabulary
  std::unordered_map<std::string, int64_t> added_ids_;    // added token content -> id
  // The decoder: the number of ByteLevel steps (a Sequence may repeat it); -1 for none.
  int byte_level_steps_ = -1;
  std::unique_ptr<const Encoder> encoder_;
};

}  // namespace deepinfer
