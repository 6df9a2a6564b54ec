// libFuzzer target for the structured-output front ends and matcher. The first byte
// picks the front end (regex, GBNF, JSON Schema); the rest is the constraint text. A
// compiled constraint is then exercised: whole-string matching and a few mask steps on
// a small vocabulary, under a token budget (restrict_to_budget). Any outcome but success
// or InputError is a bug.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/check.h"
#include "structured/matcher.h"
#include "structured/structured.h"

using namespace deepinfer::structured;

namespace {

std::shared_ptr<const VocabIndex> small_vocab() {
  static auto v = [] {
    TokenVocab tv;
    for (int b = 0; b < 256; ++b) tv.token_bytes.push_back(std::string(1, char(b)));
    for (const char* t : {"{\"", "\":", "\",", "\"}", "true", "null", "12", "ab", " ", "\\u00", "é", "\xE4\xB8"})
      tv.token_bytes.push_back(t);
    tv.token_bytes.push_back("");
    tv.eos_id = int64_t(tv.token_bytes.size() - 1);
    return std::make_shared<VocabIndex>(tv);
  }();
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  CompileLimits limits;
  limits.max_seconds = 2.0;
  limits.max_rule_states = 20000;
  limits.max_total_states = 200000;
  limits.max_repeat = 1000;
  std::shared_ptr<const CompiledGrammar> g;
  try {
    switch (data[0] % 3) {
      case 0: g = compile_regex(text, limits); break;
      case 1: g = compile_gbnf(text, limits); break;
      default: g = compile_json_schema(text, {}, limits); break;
    }
  } catch (const deepinfer::InputError&) {
    return 0;
  }
  try {
    matches(*g, text);
    matches(*g, "");
    GrammarMatcher m(std::make_shared<TokenMasker>(g, small_vocab()));
    std::vector<uint32_t> mask(m.mask_words());
    // Generation within a budget of 12 tokens: the filter keeps a subset of the mask
    // (nothing outside it) whenever the shortest completion still fits.
    const int64_t budget = 12;
    for (int step = 0; step < 8 && !m.is_terminated(); ++step) {
      m.fill_next_token_bitmask(mask);
      const std::vector<uint32_t> plain = mask;
      const bool fits = int64_t(m.min_bytes_to_accept()) <= budget - step;
      const bool guaranteed = m.restrict_to_budget(mask, budget - step);
      if (guaranteed != fits || (!guaranteed && mask != plain)) __builtin_trap();
      for (size_t w = 0; w < mask.size(); ++w)
        if (mask[w] & ~plain[w]) __builtin_trap();
      m.jump_forward_bytes(16);
      int64_t pick = -1;
      for (size_t id = (step * 37) % small_vocab()->vocab_size(), k = 0; k < small_vocab()->vocab_size(); ++k) {
        const size_t t = (id + k) % small_vocab()->vocab_size();
        if ((mask[t >> 5] >> (t & 31)) & 1) {
          pick = int64_t(t);
          break;
        }
      }
      if (pick < 0) break;
      if (!m.accept_token(pick)) __builtin_trap();  // the mask allowed it
    }
    if (m.num_steps() > 0) m.rollback(1);
  } catch (const deepinfer::InputError&) {
    // A pathologically ambiguous grammar may exceed the parser's per-position cap.
  }
  return 0;
}
