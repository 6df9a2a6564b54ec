// libFuzzer target for the model files a user points the engine at, and the prompt
// text it encodes. The first byte picks:
//   0  config.json text     -> parse_model_config: a validated config or InputError;
//   1  tokenizer.json text  -> Tokenizer::from_json: a tokenizer or InputError; a loaded
//                              one then encodes a few strings and decodes its ids;
//   2  prompt bytes         -> the fixture DeepSeek-style tokenizer: InputError exactly
//                              when the bytes are not UTF-8, else ids in range whose
//                              decode gives the text back (byte-level BPE is lossless;
//                              not checked when a non-special added token matched: its
//                              content goes through the ByteLevel decoder too, so the
//                              fixture's "ĠpreÃ©" decodes to " preé", as in HF tokenizers).
// Anything else that escapes (another exception, a sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/check.h"
#include "model/config.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "model_files_fuzz: %s\n", why.c_str());
  __builtin_trap();
}

constexpr const char* kFixtureTokenizer = DEEPINFER_FUZZ_FIXTURES "/tokenizer/bpe_tokenizer.json";

const deepinfer::Tokenizer& fixture_tokenizer() {
  static const auto tok = deepinfer::Tokenizer::load(kFixtureTokenizer);
  return *tok;
}

// The ids of the fixture's non-special added tokens (matched in text even with
// allow_special false).
const std::set<int64_t>& plain_added_ids() {
  static const std::set<int64_t> ids = [] {
    std::ifstream f(kFixtureTokenizer);
    std::stringstream text;
    text << f.rdbuf();
    const nlohmann::json root = nlohmann::json::parse(text.str());
    std::set<int64_t> out;
    for (const auto& t : root.at("added_tokens"))
      if (!t.at("special").get<bool>()) out.insert(t.at("id").get<int64_t>());
    return out;
  }();
  return ids;
}

void exercise(const deepinfer::Tokenizer& tok) {
  for (const char* text : {"", "hello world", "  x\n\n\ty", "数字 123 ü", "<｜begin▁of▁sentence｜>hi"}) {
    try {
      const std::vector<int64_t> ids = tok.encode(text);
      for (int64_t id : ids)
        if (id < 0 || id >= tok.size()) fail("encode returned id " + std::to_string(id) + " outside the vocabulary");
      (void)tok.decode(ids, false);
      (void)tok.decode(ids, true);
    } catch (const deepinfer::InputError&) {
      // Parts of a tokenizer.json that are only unsupported for encoding load and refuse here.
    }
  }
  std::vector<int64_t> all;
  for (int64_t id = 0; id < std::min<int64_t>(tok.size(), 512); ++id) {
    all.push_back(id);
    (void)tok.id_to_token(id);
  }
  (void)tok.decode(all, false);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      try {
        (void)deepinfer::parse_model_config(text, "fuzz/config.json");
      } catch (const deepinfer::InputError&) {
      }
      break;
    case 1: {
      std::unique_ptr<deepinfer::Tokenizer> tok;
      try {
        tok = deepinfer::Tokenizer::from_json(text, "fuzz/tokenizer.json");
      } catch (const deepinfer::InputError&) {
        return 0;
      }
      exercise(*tok);
      break;
    }
    default: {
      const deepinfer::Tokenizer& tok = fixture_tokenizer();
      const bool valid = deepinfer::is_valid_utf8(text);
      std::vector<int64_t> ids;
      try {
        ids = tok.encode(text, /*allow_special=*/false);
      } catch (const deepinfer::InputError&) {
        if (valid) fail("valid UTF-8 refused");
        return 0;
      }
      if (!valid) fail("invalid UTF-8 encoded");
      bool plain = true;
      for (int64_t id : ids) {
        if (id < 0 || id >= tok.size()) fail("encode returned id " + std::to_string(id) + " outside the vocabulary");
        plain = plain && !plain_added_ids().count(id);
      }
      if (plain && tok.decode(ids, false) != text) fail("decode(encode(text)) != text");
      break;
    }
  }
  return 0;
}
