#include "tokenizer/unicode.h"

#include <utf8proc.h>

#include <algorithm>
#include <cstdlib>

#include "common/check.h"
#include "tokenizer/unicode_tables.h"
#include "tokenizer/utf8.h"

namespace deepinfer::hf_unicode {

namespace {

using unicode_tables::CodePointRange;

bool in_ranges(const CodePointRange* ranges, size_t n, char32_t cp) {
  const CodePointRange* end = ranges + n;
  const CodePointRange* it = std::upper_bound(
      ranges, end, cp, [](char32_t c, const CodePointRange& r) { return c < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

bool known_to_crate(char32_t cp) {
  return in_ranges(unicode_tables::kNormalizationKnown, unicode_tables::kNormalizationKnownSize, cp);
}

int utf8proc_options(NormalForm form) {
  switch (form) {
    case NormalForm::kNfc:
      return UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    case NormalForm::kNfd:
      return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    case NormalForm::kNfkc:
      return UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    case NormalForm::kNfkd:
      return UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
  }
  return 0;
}

void normalize_run(std::u32string_view run, NormalForm form, std::u32string* out) {
  if (run.empty()) return;
  const std::string utf8 = encode_utf8(run);
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(utf8.data()),
                                          static_cast<utf8proc_ssize_t>(utf8.size()), &mapped,
                                          static_cast<utf8proc_option_t>(utf8proc_options(form)));
  DI_CHECK(n >= 0, "utf8proc_map failed: ", utf8proc_errmsg(n));
  const bool ok = decode_utf8(std::string_view(reinterpret_cast<const char*>(mapped), n), out);
  std::free(mapped);
  DI_CHECK(ok, "utf8proc produced invalid UTF-8");
}

}  // namespace

std::u32string normalize(const std::u32string& text, NormalForm form) {
  std::u32string out;
  out.reserve(text.size());
  size_t run_start = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (known_to_crate(text[i])) continue;
    // An unknown code point is a starter that composes with nothing, so normalizing the
    // runs on either side separately is exact.
    normalize_run(std::u32string_view(text).substr(run_start, i - run_start), form, &out);
    out.push_back(text[i]);
    run_start = i + 1;
  }
  normalize_run(std::u32string_view(text).substr(run_start), form, &out);
  return out;
}

bool is_combining_mark(char32_t cp) {
  return in_ranges(unicode_tables::kCombiningMarks, unicode_tables::kCombiningMarksSize, cp);
}

bool is_whitespace(char32_t cp) {
  switch (cp) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0:
    case 0x1680: case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

void append_lowercase(char32_t cp, std::u32string* out) {
  if (cp == 0x130) {
    out->push_back(U'i');
    out->push_back(0x307);
    return;
  }
  const auto* runs = unicode_tables::kLowercaseRuns;
  const auto* end = runs + unicode_tables::kLowercaseRunsSize;
  const auto* it = std::upper_bound(
      runs, end, cp, [](char32_t c, const unicode_tables::LowercaseRun& r) { return c < r.first; });
  if (it != runs) {
    const auto& run = *(it - 1);
    if (cp <= run.last && (cp - run.first) % run.stride == 0) {
      out->push_back(static_cast<char32_t>(static_cast<int64_t>(cp) + run.delta));
      return;
    }
  }
  out->push_back(cp);
}

std::u32string strip_accents(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t cp : text) {
    if (!is_combining_mark(cp)) out.push_back(cp);
  }
  return out;
}

std::u32string lowercase(const std::u32string& text) {
  std::u32string out;
  out.reserve(text.size());
  for (char32_t cp : text) append_lowercase(cp, &out);
  return out;
}

std::u32string strip(const std::u32string& text, bool left, bool right) {
  size_t begin = 0, end = text.size();
  if (left) {
    while (begin < end && is_whitespace(text[begin])) ++begin;
  }
  if (right) {
    while (end > begin && is_whitespace(text[end - 1])) --end;
  }
  return text.substr(begin, end - begin);
}

}  // namespace deepinfer::hf_unicode
