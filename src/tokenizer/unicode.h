// Character operations with the exact behaviour of the Hugging Face tokenizers core
// (Rust). It mixes three Unicode versions, and we follow each:
//   * NFC/NFD/NFKC/NFKD come from the unicode-normalization-alignments crate, whose
//     tables are Unicode 9.0. Code points assigned later are left untouched (no
//     decomposition, combining class 0, no composition). We run utf8proc on the runs of
//     code points the crate knows and pass the others through, which reproduces that.
//   * StripAccents removes the crate's Unicode 9.0 combining marks (a generated table).
//   * Lowercase is Rust's char::to_lowercase (the Unicode version of the Rust compiler
//     the wheel was built with; a generated table), applied one character at a time, so
//     no final-sigma context and U+0130 becomes "i\u0307".
//   * Strip uses char::is_whitespace (the White_Space property).
#pragma once

#include <string>

namespace deepinfer::hf_unicode {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

std::u32string normalize(const std::u32string& text, NormalForm form);

bool is_combining_mark(char32_t cp);
bool is_whitespace(char32_t cp);
// Appends char::to_lowercase(cp) (one or two characters).
void append_lowercase(char32_t cp, std::u32string* out);

std::u32string strip_accents(const std::u32string& text);
std::u32string lowercase(const std::u32string& text);
std::u32string strip(const std::u32string& text, bool left, bool right);

}  // namespace deepinfer::hf_unicode
