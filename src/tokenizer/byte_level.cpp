#include "tokenizer/byte_level.h"

#include <array>

#include "tokenizer/utf8.h"

namespace deepinfer::byte_level {

namespace {

constexpr size_t kAlphabetEnd = 0x144;  // every alphabet character is below U+0144

struct Tables {
  std::array<char32_t, 256> to_char{};
  std::array<int16_t, kAlphabetEnd> to_byte{};
  Tables() {
    to_byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      to_char[b] = printable ? char32_t(b) : next++;
      to_byte[to_char[b]] = int16_t(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

char32_t byte_to_char(uint8_t byte) { return tables().to_char[byte]; }

int char_to_byte(char32_t cp) { return cp < kAlphabetEnd ? tables().to_byte[cp] : -1; }

std::string encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(byte_to_char(uint8_t(c)), &out);
  return out;
}

std::string decode_token(std::string_view token) {
  std::u32string chars;
  if (!decode_utf8(token, &chars)) return std::string(token);
  std::string out;
  out.reserve(chars.size());
  for (char32_t cp : chars) {
    const int b = char_to_byte(cp);
    if (b < 0) return std::string(token);
    out.push_back(char(b));
  }
  return out;
}

}  // namespace deepinfer::byte_level
