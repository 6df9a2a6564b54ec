// Unicode data that tokenizers' Rust core uses where it differs from utf8proc (older or
// newer Unicode versions). Generated into unicode_tables.cpp by
// tools/gen_tokenizer_vectors.py; see unicode.h for how each table is used.
#pragma once

#include <cstddef>
#include <cstdint>

namespace deepinfer::unicode_tables {

struct CodePointRange {
  uint32_t first;
  uint32_t last;  // inclusive
};

// Every stride-th code point in [first, last] lowercases to cp + delta.
struct LowercaseRun {
  uint32_t first;
  uint32_t last;
  uint32_t stride;
  int32_t delta;
};

extern const CodePointRange kCombiningMarks[];
extern const size_t kCombiningMarksSize;
extern const CodePointRange kNormalizationKnown[];
extern const size_t kNormalizationKnownSize;
extern const LowercaseRun kLowercaseRuns[];
extern const size_t kLowercaseRunsSize;

}  // namespace deepinfer::unicode_tables
