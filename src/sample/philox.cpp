#include "sample/philox.h"

#include <cmath>

#include "common/check.h"

namespace deepinfer::sampling {
namespace {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
// Weyl increments (golden ratio and sqrt(3) - 1, as 32-bit fractions).
constexpr uint32_t kBump0 = 0x9E3779B9u;
constexpr uint32_t kBump1 = 0xBB67AE85u;

inline void mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  uint64_t p = uint64_t{a} * uint64_t{b};
  *hi = uint32_t(p >> 32);
  *lo = uint32_t(p);
}

PhiloxCounter counter_for(int64_t position, Purpose purpose, int64_t block) {
  DI_CHECK(position >= 0, "sampling position must be >= 0, got ", position);
  DI_CHECK(block >= 0 && block <= (kMaxRandomIndex >> 2), "random index block out of range: ", block);
  auto pos = uint64_t(position);
  return {uint32_t(block), uint32_t(pos), uint32_t(pos >> 32), uint32_t(purpose)};
}

PhiloxKey key_for(uint64_t seed) { return {uint32_t(seed), uint32_t(seed >> 32)}; }

}  // namespace

PhiloxCounter philox4x32(PhiloxCounter c, PhiloxKey k, int rounds) {
  for (int r = 0; r < rounds; ++r) {
    if (r > 0) {
      k[0] += kBump0;
      k[1] += kBump1;
    }
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(kMul0, c[0], &hi0, &lo0);
    mulhilo(kMul1, c[2], &hi1, &lo1);
    c = {hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0};
  }
  return c;
}

float uniform_from_bits(uint32_t bits) {
  uint32_t m = bits >> 9;  // 23 bits: 2m + 1 < 2^24 fits the FP32 significand exactly
  return float(2 * m + 1) * 0x1p-24f;
}

float uniform(uint64_t seed, int64_t position, Purpose purpose, int64_t index) {
  DI_CHECK(index >= 0 && index <= kMaxRandomIndex, "random index out of range: ", index);
  PhiloxCounter out = philox4x32(counter_for(position, purpose, index >> 2), key_for(seed));
  return uniform_from_bits(out[index & 3]);
}

std::array<float, 4> uniform_block(uint64_t seed, int64_t position, Purpose purpose, int64_t block) {
  PhiloxCounter out = philox4x32(counter_for(position, purpose, block), key_for(seed));
  return {uniform_from_bits(out[0]), uniform_from_bits(out[1]), uniform_from_bits(out[2]),
          uniform_from_bits(out[3])};
}

double gumbel(float u) { return -std::log(-std::log(double(u))); }

uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  if (stream == 0) return seed;
  // SplitMix64 finalizer over seed + stream * golden: both steps are bijections, so
  // streams >= 1 of one seed get pairwise distinct seeds.
  uint64_t z = seed + stream * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace deepinfer::sampling
