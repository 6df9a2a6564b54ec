#include "model/v41/engram_layout.h"

#include <array>
#include <limits>
#include <set>

#include "common/check.h"

namespace deepinfer::v41 {

namespace {

// numpy.random.SeedSequence with an integer entropy, no spawn key, pool_size 4
// (numpy/random/bit_generator.pyx).
class SeedSequence {
 public:
  explicit SeedSequence(uint64_t entropy) {
    // The entropy integer as little-endian 32-bit words (a single 0 word for 0).
    std::vector<uint32_t> words;
    do {
      words.push_back(static_cast<uint32_t>(entropy));
      entropy >>= 32;
    } while (entropy != 0);
    uint32_t hash_const = kInitA;
    for (size_t i = 0; i < kPoolSize; ++i) {
      pool_[i] = hashmix(i < words.size() ? words[i] : 0, &hash_const);
    }
    for (size_t src = 0; src < kPoolSize; ++src) {
      for (size_t dst = 0; dst < kPoolSize; ++dst) {
        if (src != dst) pool_[dst] = mix(pool_[dst], hashmix(pool_[src], &hash_const));
      }
    }
    for (size_t src = kPoolSize; src < words.size(); ++src) {
      for (size_t dst = 0; dst < kPoolSize; ++dst) pool_[dst] = mix(pool_[dst], hashmix(words[src], &hash_const));
    }
  }

  // generate_state(n, np.uint64): 2n 32-bit words, paired little-endian.
  std::vector<uint64_t> generate_state_u64(size_t n) const {
    std::vector<uint32_t> words(2 * n);
    uint32_t hash_const = kInitB;
    for (size_t i = 0; i < words.size(); ++i) {
      uint32_t v = pool_[i % kPoolSize];
      v ^= hash_const;
      hash_const *= kMultB;
      v *= hash_const;
      v ^= v >> kXShift;
      words[i] = v;
    }
    std::vector<uint64_t> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = uint64_t(words[2 * i]) | (uint64_t(words[2 * i + 1]) << 32);
    return out;
  }

 private:
  static constexpr size_t kPoolSize = 4;
  static constexpr uint32_t kInitA = 0x43b0d7e5, kMultA = 0x931e8875;
  static constexpr uint32_t kInitB = 0x8b51f9dd, kMultB = 0x58f38ded;
  static constexpr uint32_t kMixMultL = 0xca01f9dd, kMixMultR = 0x4973f715;
  static constexpr int kXShift = 16;

  static uint32_t hashmix(uint32_t value, uint32_t* hash_const) {
    value ^= *hash_const;
    *hash_const *= kMultA;
    value *= *hash_const;
    value ^= value >> kXShift;
    return value;
  }
  static uint32_t mix(uint32_t x, uint32_t y) {
    uint32_t result = kMixMultL * x - kMixMultR * y;
    result ^= result >> kXShift;
    return result;
  }

  std::array<uint32_t, kPoolSize> pool_{};
};

// numpy's PCG64 (PCG XSL-RR 128/64), including its buffered 32-bit output.
class Pcg64 {
 public:
  explicit Pcg64(const SeedSequence& seq) {
    const std::vector<uint64_t> s = seq.generate_state_u64(4);
    const __uint128_t initstate = (__uint128_t(s[0]) << 64) | s[1];
    const __uint128_t initseq = (__uint128_t(s[2]) << 64) | s[3];
    state_ = 0;
    inc_ = (initseq << 1) | 1;
    step();
    state_ += initstate;
    step();
  }

  uint64_t next64() {
    step();
    const uint64_t hi = uint64_t(state_ >> 64), lo = uint64_t(state_);
    const unsigned rot = unsigned(state_ >> 122);
    const uint64_t x = hi ^ lo;
    return (x >> rot) | (x << ((64 - rot) & 63));
  }

  // Each 64-bit draw serves two 32-bit draws, low half first.
  uint32_t next32() {
    if (has_uint32_) {
      has_uint32_ = false;
      return uinteger_;
    }
    const uint64_t next = next64();
    has_uint32_ = true;
    uinteger_ = uint32_t(next >> 32);
    return uint32_t(next);
  }

 private:
  static constexpr __uint128_t kMult =
      (__uint128_t(2549297995355413924ULL) << 64) | __uint128_t(4865540595714422341ULL);
  void step() { state_ = state_ * kMult + inc_; }

  __uint128_t state_ = 0, inc_ = 0;
  bool has_uint32_ = false;
  uint32_t uinteger_ = 0;
};

// numpy's random_bounded_uint64_fill with use_masked=false: a value in [0, rng]
// (rng = high - low - 1), drawn with Lemire's method; ranges that fit in 32 bits use the
// 32-bit generator.
uint64_t bounded_u64(Pcg64& g, uint64_t rng) {
  if (rng == 0) return 0;
  if (rng <= 0xFFFFFFFFULL) {
    if (rng == 0xFFFFFFFFULL) return g.next32();
    const uint32_t rng32 = uint32_t(rng), excl = rng32 + 1;
    uint64_t m = uint64_t(g.next32()) * excl;
    uint32_t leftover = uint32_t(m);
    if (leftover < excl) {
      const uint32_t threshold = (std::numeric_limits<uint32_t>::max() - rng32) % excl;
      while (leftover < threshold) {
        m = uint64_t(g.next32()) * excl;
        leftover = uint32_t(m);
      }
    }
    return m >> 32;
  }
  if (rng == std::numeric_limits<uint64_t>::max()) return g.next64();
  const uint64_t excl = rng + 1;
  __uint128_t m = __uint128_t(g.next64()) * excl;
  uint64_t leftover = uint64_t(m);
  if (leftover < excl) {
    const uint64_t threshold = (std::numeric_limits<uint64_t>::max() - rng) % excl;
    while (leftover < threshold) {
      m = __uint128_t(g.next64()) * excl;
      leftover = uint64_t(m);
    }
  }
  return uint64_t(m >> 64);
}

uint64_t mul_mod(uint64_t a, uint64_t b, uint64_t m) { return uint64_t(__uint128_t(a) * b % m); }

uint64_t pow_mod(uint64_t base, uint64_t exp, uint64_t m) {
  uint64_t result = 1;
  for (base %= m; exp > 0; exp >>= 1) {
    if (exp & 1) result = mul_mod(result, base, m);
    base = mul_mod(base, base, m);
  }
  return result;
}

// Deterministic Miller-Rabin: these bases decide primality for every 64-bit n.
bool is_prime(int64_t value) {
  if (value < 2) return false;
  const uint64_t n = uint64_t(value);
  for (uint64_t p : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37}) {
    if (n % p == 0) return n == p;
  }
  uint64_t d = n - 1;
  int r = 0;
  while ((d & 1) == 0) {
    d >>= 1;
    ++r;
  }
  for (uint64_t a : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37}) {
    uint64_t x = pow_mod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < r && composite; ++i) {
      x = mul_mod(x, x, n);
      composite = x != n - 1;
    }
    if (composite) return false;
  }
  return true;
}

// The reference's prime search starts below the vocab size, so a prime equal to it is
// allowed. The bound keeps the search (and the tables it implies) reasonable.
constexpr int64_t kMaxEngramVocabSize = int64_t(1) << 40;
constexpr int64_t kMaxNgramSize = 64;
constexpr int64_t kMaxHeads = 1024;
constexpr int64_t kMaxLayers = 1024;

}  // namespace

std::vector<int64_t> numpy_rng_integers(uint64_t seed, int64_t high, int64_t count) {
  DI_CHECK(high >= 1 && count >= 0, "numpy_rng_integers: high ", high, " count ", count);
  Pcg64 g{SeedSequence(seed)};
  std::vector<int64_t> out(static_cast<size_t>(count));
  for (auto& v : out) v = int64_t(bounded_u64(g, uint64_t(high) - 1));
  return out;
}

EngramLayout build_engram_layout(const ModelConfig& cfg, int64_t compressed_vocab_size) {
  const size_t num_layers = cfg.engram_layer_ids.size();
  DI_CHECK_INPUT(num_layers <= size_t(kMaxLayers), "config field 'engram_layer_ids' has too many entries");
  DI_CHECK_INPUT(cfg.engram_num_embeddings.size() == num_layers, "config field 'engram_num_embeddings' has ",
                 cfg.engram_num_embeddings.size(), " entries but 'engram_layer_ids' has ", num_layers);
  DI_CHECK_INPUT(cfg.engram_max_ngram_size >= 2 && cfg.engram_max_ngram_size <= kMaxNgramSize,
                 "config field 'engram_max_ngram_size' must be in [2, ", kMaxNgramSize, "], got ",
                 cfg.engram_max_ngram_size);
  DI_CHECK_INPUT(cfg.engram_n_heads >= 1 && cfg.engram_n_heads <= kMaxHeads,
                 "config field 'engram_n_heads' must be in [1, ", kMaxHeads, "], got ", cfg.engram_n_heads);
  DI_CHECK_INPUT(cfg.engram_vocab_size >= 1 && cfg.engram_vocab_size <= kMaxEngramVocabSize,
                 "config field 'engram_vocab_size' must be in [1, 2^40], got ", cfg.engram_vocab_size);
  DI_CHECK_INPUT(compressed_vocab_size >= 1, "engram compressed vocabulary size must be positive, got ",
                 compressed_vocab_size);
  for (int64_t id : cfg.engram_layer_ids) {
    DI_CHECK_INPUT(id >= 0 && id <= std::numeric_limits<int64_t>::max() / 10007,
                   "config field 'engram_layer_ids' has an invalid layer id ", id);
  }

  EngramLayout layout;
  layout.layer_ids = cfg.engram_layer_ids;
  layout.max_ngram_size = cfg.engram_max_ngram_size;
  layout.n_heads = cfg.engram_n_heads;
  layout.head_dim = cfg.engram_head_dim;
  const int64_t columns = (cfg.engram_max_ngram_size - 1) * cfg.engram_n_heads;

  // One search for all layers: each prime is the next one not used before.
  int64_t candidate = cfg.engram_vocab_size - 1;
  std::set<int64_t> used;
  const int64_t max_int = std::numeric_limits<int64_t>::max();
  const int64_t bound = std::max<int64_t>(1, (max_int / compressed_vocab_size) / 2);
  for (size_t l = 0; l < num_layers; ++l) {
    std::vector<int64_t> primes, offsets;
    int64_t sum = 0;
    for (int64_t c = 0; c < columns; ++c) {
      do {
        ++candidate;
      } while (!is_prime(candidate) || used.count(candidate));
      used.insert(candidate);
      offsets.push_back(sum);
      primes.push_back(candidate);
      sum += candidate;
    }
    DI_CHECK_INPUT(sum == cfg.engram_num_embeddings[l], "config field 'engram_num_embeddings' for engram layer ",
                   cfg.engram_layer_ids[l], " is ", cfg.engram_num_embeddings[l],
                   " but the hash primes of that layer sum to ", sum);
    std::vector<int64_t> mult = numpy_rng_integers(uint64_t(10007 * cfg.engram_layer_ids[l]), bound,
                                                   cfg.engram_max_ngram_size);
    for (auto& m : mult) m = m * 2 + 1;
    layout.primes.push_back(std::move(primes));
    layout.offsets.push_back(std::move(offsets));
    layout.multipliers.push_back(std::move(mult));
    layout.num_embeddings.push_back(sum);
  }
  return layout;
}

}  // namespace deepinfer::v41
