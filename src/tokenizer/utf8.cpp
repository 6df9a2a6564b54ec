#include "tokenizer/utf8.h"

#include <cstdint>
#include <cstring>

namespace deepinfer {

void append_utf8(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode_utf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_utf8(cp, &out);
  return out;
}

namespace {

// Length of the valid UTF-8 sequence starting at bytes[i], or 0 when the sequence is
// invalid; *valid_prefix gets the length of its longest prefix that could still start
// a valid sequence (at least 1), which is what one U+FFFD replaces.
size_t valid_sequence(std::string_view bytes, size_t i, char32_t* cp, size_t* valid_prefix) {
  const auto at = [&](size_t k) { return static_cast<uint8_t>(bytes[k]); };
  const uint8_t b0 = at(i);
  *valid_prefix = 1;
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  char32_t value = b0 & (0xFF >> (len + 1));
  for (size_t k = 1; k < len; ++k) {
    if (i + k >= bytes.size()) return 0;
    const uint8_t b = at(i + k);
    const uint8_t min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xBF;
    if (b < min || b > max) return 0;
    value = (value << 6) | (b & 0x3F);
    *valid_prefix = k + 1;
  }
  *cp = value;
  return len;
}

}  // namespace

bool decode_utf8(std::string_view bytes, std::u32string* out) {
  size_t i = 0;
  while (i < bytes.size()) {
    char32_t cp;
    size_t prefix;
    const size_t len = valid_sequence(bytes, i, &cp, &prefix);
    if (len == 0) return false;
    out->push_back(cp);
    i += len;
  }
  return true;
}

bool is_valid_utf8(std::string_view bytes) {
  size_t i = 0;
  while (i < bytes.size()) {
    if (i + 8 <= bytes.size()) {
      uint64_t word;
      std::memcpy(&word, bytes.data() + i, 8);
      if ((word & 0x8080808080808080ULL) == 0) {
        i += 8;
        continue;
      }
    }
    char32_t cp;
    size_t prefix;
    const size_t len = valid_sequence(bytes, i, &cp, &prefix);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

size_t complete_utf8_prefix(std::string_view bytes) {
  // Only the last three bytes can start an unfinished sequence.
  const size_t from = bytes.size() > 3 ? bytes.size() - 3 : 0;
  for (size_t i = from; i < bytes.size(); ++i) {
    char32_t cp;
    size_t prefix;
    const uint8_t lead = static_cast<uint8_t>(bytes[i]);
    if (lead < 0xC2 || lead > 0xF4) continue;
    if (valid_sequence(bytes, i, &cp, &prefix) == 0 && i + prefix == bytes.size()) return i;
  }
  return bytes.size();
}

std::string utf8_lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    char32_t cp;
    size_t prefix;
    const size_t len = valid_sequence(bytes, i, &cp, &prefix);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      i += prefix;
    } else {
      out.append(bytes.substr(i, len));
      i += len;
    }
  }
  return out;
}

}  // namespace deepinfer
