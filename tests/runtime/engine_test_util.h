// Helpers shared by the engine tests: deterministic token lists and a driver that runs
// an engine to completion and records every sample's outputs bit for bit.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "deepinfer/engine.h"

namespace deepinfer::testing {

inline std::vector<int64_t> tokens_for(uint32_t seed, size_t n, int64_t vocab) {
  std::vector<int64_t> t(n);
  uint64_t x = seed * 2654435761u + 1;
  for (auto& v : t) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    v = int64_t((x >> 33) % uint64_t(vocab - 3)) + 3;  // avoid BOS/EOS/pad
  }
  return t;
}

inline uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// Everything a sample produced; logprobs as bit patterns so equality is bitwise.
struct SampleRecord {
  std::vector<int64_t> tokens;
  std::vector<uint32_t> logprob_bits;  // sampled token's, then each top entry's (id, bits)
  std::string text, finish_reason;
  int64_t outputs_after_finish = 0;  // must stay 0
  bool operator==(const SampleRecord& o) const {
    return tokens == o.tokens && logprob_bits == o.logprob_bits && text == o.text &&
           finish_reason == o.finish_reason && outputs_after_finish == o.outputs_after_finish;
  }
};

using Records = std::map<std::pair<std::string, int64_t>, SampleRecord>;

// Steps the engine until nothing is unfinished. `on_output` may abort requests (it
// sees the records so far); returns every sample's record.
inline Records drive(Engine& e, const std::function<void(Engine&, const RequestOutput&, const Records&)>& on_output = {}) {
  Records rec;
  while (e.has_unfinished()) {
    for (const RequestOutput& o : e.step()) {
      SampleRecord& r = rec[{o.request_id, o.index}];
      if (!r.finish_reason.empty()) ++r.outputs_after_finish;
      r.tokens.insert(r.tokens.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      for (const TokenLogprob& lp : o.logprobs) {
        r.logprob_bits.push_back(uint32_t(lp.token));
        r.logprob_bits.push_back(bits(lp.logprob));
        for (const auto& [id, v] : lp.top) {
          r.logprob_bits.push_back(uint32_t(id));
          r.logprob_bits.push_back(bits(v));
        }
      }
      r.text += o.text_delta;
      if (o.finished) r.finish_reason = o.finish_reason;
      if (on_output) on_output(e, o, rec);
    }
  }
  return rec;
}

}  // namespace deepinfer::testing
