// The character classes of tokenizers' Oniguruma where they differ from PCRE2's (see
// tools/gen_onig_tables.py, which generates onig_tables.cpp by running tokenizers).
#pragma once

#include <cstddef>

#include "tokenizer/unicode_tables.h"

namespace deepinfer::onig_tables {

// Code points Oniguruma puts in a general category that Unicode 14.0 (PCRE2 10.42) does
// not: code points assigned since. Adding them to PCRE2's \p{..} reproduces onig.
struct CategoryExtra {
  const char* name;  // "L", "Lu", ...
  const unicode_tables::CodePointRange* ranges;
  size_t size;
};
extern const CategoryExtra kCategoryExtras[];
extern const size_t kCategoryExtrasSize;

// The full sets of onig's \w and \s (Ruby syntax, UTF-8).
extern const unicode_tables::CodePointRange kWord[];
extern const size_t kWordSize;
extern const unicode_tables::CodePointRange kSpace[];
extern const size_t kSpaceSize;

}  // namespace deepinfer::onig_tables
