// The GPT-2 byte-level alphabet shared by the ByteLevel pre-tokenizer, normalizer and
// decoder: every byte maps to one printable character. Bytes 33-126, 161-172 and
// 174-255 map to the character of the same value; the other 68 bytes map, in byte
// order, to U+0100, U+0101, ... (so ' ' is 'Ġ' U+0120 and '\n' is 'Ċ' U+010A).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::byte_level {

char32_t byte_to_char(uint8_t byte);
// The byte a character stands for, or -1 when it is outside the alphabet.
int char_to_byte(char32_t cp);

// Each byte of `bytes` as its alphabet character, UTF-8 encoded.
std::string encode(std::string_view bytes);

// The ByteLevel decoder applied to one token: its characters' bytes when every
// character is in the alphabet, otherwise the token's own UTF-8 bytes unchanged.
std::string decode_token(std::string_view token);

}  // namespace deepinfer::byte_level
