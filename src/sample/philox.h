// Counter-based random numbers for sampling (FEATURES.md §7).
//
// Every random number the sampler uses is a pure function of a key: (seed, absolute
// position of the sampled token, purpose, vocabulary index). There is no generator
// object, so nothing has to be carried across batches, ranks, replays or failover:
// recomputing a draw anywhere gives the same bits.
//
// The block function is Philox4x32-10 (Salmon et al., "Parallel random numbers: as
// easy as 1, 2, 3", SC'11), checked against the Random123 known-answer vectors.
//
// Key layout (our design choice, fixed: changing it changes every sampled token):
//   Philox key     = (seed low 32 bits, seed high 32 bits)
//   Philox counter = (index / 4, position low 32, position high 32, purpose)
//   output lane    = index % 4
// One Philox call therefore serves four consecutive vocabulary entries. Distinct
// (seed, position, purpose, index) tuples map to distinct (key, counter, lane) triples,
// so the streams of different purposes never overlap (vLLM instead salts the position
// of draft draws by 2^30; a separate counter word makes the split explicit).
#pragma once

#include <array>
#include <cstdint>

namespace deepinfer::sampling {

using PhiloxCounter = std::array<uint32_t, 4>;
using PhiloxKey = std::array<uint32_t, 2>;

// Philox4x32 with `rounds` rounds (10 is the standard variant; other counts exist only
// so the test can check every published known-answer vector).
PhiloxCounter philox4x32(PhiloxCounter counter, PhiloxKey key, int rounds = 10);

// Why a number is drawn. Each purpose is an independent stream for the same
// (seed, position), which is what speculative verification needs (§2): the draft
// sample, the acceptance test and the residual sample must not share noise with the
// target sample or with each other.
enum class Purpose : uint32_t {
  kTarget = 0,    // the target model's sample at this position (Gumbel noise per token)
  kDraft = 1,     // a draft model's sample at this position
  kAccept = 2,    // the acceptance uniform of rejection sampling (index 0)
  kResidual = 3,  // the sample from the residual distribution after a rejection
};

// Largest vocabulary index a key can address (the counter holds index / 4 in 32 bits).
inline constexpr int64_t kMaxRandomIndex = (int64_t{1} << 34) - 1;

// Maps one 32-bit Philox word to a float in (0, 1): the top 23 bits m give
// (2m + 1) / 2^24, which is exact in FP32, symmetric about 1/2, and lies in
// [2^-24, 1 - 2^-24]. Never 0 (so log u is finite) and never 1 (so -log u > 0).
float uniform_from_bits(uint32_t bits);

// Smallest and largest values uniform() can return.
inline constexpr float kUniformMin = 0x1p-24f;
inline constexpr float kUniformMax = 1.0f - 0x1p-24f;

// The keyed uniform in (0, 1). Pure: same arguments, same bits, on any thread.
// position >= 0 and 0 <= index <= kMaxRandomIndex (checked).
float uniform(uint64_t seed, int64_t position, Purpose purpose, int64_t index);

// The four uniforms for indices [4 * block, 4 * block + 4), from one Philox call;
// element i equals uniform(seed, position, purpose, 4 * block + i).
std::array<float, 4> uniform_block(uint64_t seed, int64_t position, Purpose purpose, int64_t block);

// Standard Gumbel noise -log(-log u), computed in double so the tails are not lost to
// FP32 rounding. For u in [kUniformMin, kUniformMax] the result lies in about
// [-2.81, 16.64].
double gumbel(float u);

// Derives an independent seed for stream `stream` of a request, e.g. the i-th of the
// n choices of one request, which would otherwise draw identical noise at identical
// positions. Stream 0 returns `seed` unchanged, so n = 1 behaves like a plain seed.
uint64_t derive_seed(uint64_t seed, uint64_t stream);

}  // namespace deepinfer::sampling
