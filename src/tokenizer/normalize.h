// The V4.1 Engram's key normalizer (MODEL_V41.md §5.1), byte-identical to the Hugging
// Face tokenizers chain the reference builds:
//   Sequence([NFKC(), NFD(), StripAccents(), Lowercase(),
//             Replace(Regex("[ \t\r\n]+"), " "), Replace(Regex("^ $"), "\uE000"),
//             Strip(), Replace("\uE000", " ")])
// See unicode.h for the Unicode versions each step follows.
#pragma once

#include <string>

namespace deepinfer {

// `utf8` must be valid UTF-8 (InputError otherwise). May return "" (the caller then
// keeps the unnormalized text, as the reference does).
std::string engram_normalize(const std::string& utf8);

}  // namespace deepinfer
