// The feeding plans of a golden fixture (tools/make_fixtures.py wrote them into
// reference.safetensors): its token ids and the three ways the reference fed them —
// all at once, in chunks of metadata "chunk", and a prefill of metadata "prefill" tokens
// followed by one token per step. Shared by the CPU golden test and the GPU model test,
// with feed_cpu, which runs such a plan through the CPU model.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "io/safetensors.h"
#include "model/v41/model.h"

namespace deepinfer {

struct GoldenFeeds {
  std::vector<int64_t> tokens;
  std::vector<size_t> whole, chunks, decode;  // step sizes of the three feeding modes

  // The modes by the names of the reference's logits_<name> tensors, with their steps.
  std::array<std::pair<const char*, const std::vector<size_t>*>, 3> modes() const {
    return {{{"full", &whole}, {"chunked", &chunks}, {"decode", &decode}}};
  }
};

// tokens: the fixture's I64 "tokens" tensor (the caller asserts it exists).
inline GoldenFeeds golden_feeds(const TensorView& tokens, const std::map<std::string, std::string>& metadata) {
  GoldenFeeds f;
  f.tokens.resize(tokens.numel());
  std::memcpy(f.tokens.data(), tokens.data, f.tokens.size() * sizeof(int64_t));
  const size_t t_len = f.tokens.size();
  const size_t chunk = std::stoul(metadata.at("chunk"));
  const size_t prefill = std::stoul(metadata.at("prefill"));
  f.whole = {t_len};
  for (size_t i = 0; i < t_len; i += chunk) f.chunks.push_back(std::min(chunk, t_len - i));
  f.decode = {prefill};
  for (size_t i = prefill; i < t_len; ++i) f.decode.push_back(1);
  return f;
}

// Feeds tokens through one new sequence of the CPU model in calls of the given sizes
// (which must add up to tokens.size()); every position's logits, in order.
inline std::vector<float> feed_cpu(const v41::Model& m, const std::vector<int64_t>& tokens,
                                   const std::vector<size_t>& sizes) {
  v41::SequenceState seq = m.new_sequence();
  std::vector<float> out;
  size_t i = 0;
  for (size_t s : sizes) {
    auto l = m.forward(seq, std::vector<int64_t>(tokens.begin() + i, tokens.begin() + i + s));
    out.insert(out.end(), l.begin(), l.end());
    i += s;
  }
  return out;
}

}  // namespace deepinfer
