#include "tokenizer/normalize.h"

#include "common/check.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace deepinfer {

namespace {

constexpr char32_t kSentinel = 0xE000;

bool is_ascii_space_class(char32_t cp) { return cp == U' ' || cp == U'\t' || cp == U'\r' || cp == U'\n'; }

std::u32string collapse_spaces(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (!is_ascii_space_class(text[i])) {
      out.push_back(text[i++]);
      continue;
    }
    out.push_back(U' ');
    while (i < text.size() && is_ascii_space_class(text[i])) ++i;
  }
  return out;
}

}  // namespace

std::string engram_normalize(const std::string& utf8) {
  std::u32string text;
  DI_CHECK_INPUT(decode_utf8(utf8, &text), "engram_normalize: input is not valid UTF-8");
  text = hf_unicode::normalize(text, hf_unicode::NormalForm::kNfkc);
  text = hf_unicode::normalize(text, hf_unicode::NormalForm::kNfd);
  text = hf_unicode::strip_accents(text);
  text = hf_unicode::lowercase(text);
  text = collapse_spaces(text);
  // Oniguruma's ^ and $ are line anchors, but no '\n' survives the collapse above, so
  // "^ $" matches exactly the string " ".
  if (text == U" ") text = std::u32string(1, kSentinel);
  text = hf_unicode::strip(text, true, true);
  for (char32_t& cp : text) {
    if (cp == kSentinel) cp = U' ';
  }
  return encode_utf8(text);
}

}  // namespace deepinfer
