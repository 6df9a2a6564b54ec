// UTF-8 helpers with the exact semantics of the Rust standard library, which the
// Hugging Face tokenizers core is written against.
#pragma once

#include <string>
#include <string_view>

namespace deepinfer {

// Appends the UTF-8 encoding of a Unicode scalar value.
void append_utf8(char32_t cp, std::string* out);

// Strict decoding: returns false (and leaves *out partially filled) on any invalid
// sequence, overlong form, surrogate or value above U+10FFFF.
bool decode_utf8(std::string_view bytes, std::u32string* out);

std::string encode_utf8(std::u32string_view text);

// Whether decode_utf8 would succeed, without decoding.
bool is_valid_utf8(std::string_view bytes);

// The length of the longest prefix of `bytes` that does not end inside a UTF-8 sequence
// that could still be completed by more bytes (used to hold back partial characters).
size_t complete_utf8_prefix(std::string_view bytes);

// Rust's String::from_utf8_lossy: each maximal prefix of a would-be-valid sequence that
// is cut short (or each stray byte) becomes one U+FFFD ("substitution of maximal
// subparts", the practice the Unicode standard recommends).
std::string utf8_lossy(std::string_view bytes);

}  // namespace deepinfer
