#include "structured/fsa_builder.h"

#include <algorithm>
#include <array>
#include <vector>

#include "common/check.h"
#include "structured/limits.h"

namespace deepinfer::structured {
namespace {

using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode_fixed(uint32_t cp, int n, uint8_t* out) {
  if (n == 1) {
    out[0] = uint8_t(cp);
    return;
  }
  static const uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = uint8_t(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = uint8_t(kLead[n] | cp);
}

// Splits [lo, hi] (no surrogates) into runs whose UTF-8 forms are products of byte ranges.
void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteRanges>* out) {
  static const uint32_t kMax[4] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (uint32_t m : kMax) {
    if (lo <= m && hi > m) {
      utf8_sequences(lo, m, out);
      utf8_sequences(m + 1, hi, out);
      return;
    }
  }
  const int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode_fixed(lo, n, a);
  encode_fixed(hi, n, b);
  ByteRanges seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out->push_back(std::move(seq));
}

}  // namespace

bool decode_utf8(std::string_view text, size_t* pos, uint32_t* cp) {
  const size_t i = *pos;
  const unsigned char c = text[i];
  int n;
  uint32_t v;
  if (c < 0x80) {
    *cp = c;
    *pos = i + 1;
    return true;
  } else if (c >= 0xC2 && c <= 0xDF) {
    n = 2, v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, v = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, v = c & 0x07;
  } else {
    return false;
  }
  if (i + n > text.size()) return false;
  for (int k = 1; k < n; ++k) {
    const unsigned char d = text[i + k];
    if ((d & 0xC0) != 0x80) return false;
    v = (v << 6) | (d & 0x3F);
  }
  if (utf8_length(v) != n || (v >= kSurrogateLo && v <= kSurrogateHi) || v > kMaxCodepoint) return false;
  *cp = v;
  *pos = i + n;
  return true;
}

void append_utf8(uint32_t cp, std::string* out) {
  uint8_t buf[4];
  const int n = utf8_length(cp);
  encode_fixed(cp, n, buf);
  out->append(reinterpret_cast<const char*>(buf), n);
}

FsaBuilder::FsaBuilder(CompileBudget* budget, size_t max_states) : budget_(budget), max_states_(max_states) {}

uint32_t FsaBuilder::new_state() {
  DI_CHECK_INPUT(fsa_.states.size() < max_states_, "constraint too large: one rule needs more than ", max_states_,
                 " automaton states");
  if (budget_) budget_->add_states(1, "automaton construction");
  return fsa_.add_state();
}

void FsaBuilder::eps(uint32_t from, uint32_t to) { fsa_.states[from].eps.push_back(to); }

FsaBuilder::Frag FsaBuilder::empty() {
  const uint32_t s = new_state();
  return {s, s};
}

FsaBuilder::Frag FsaBuilder::nothing() { return {new_state(), new_state()}; }

FsaBuilder::Frag FsaBuilder::byte_range(uint8_t lo, uint8_t hi) {
  const uint32_t a = new_state(), b = new_state();
  fsa_.states[a].bytes.push_back({lo, hi, b});
  return {a, b};
}

FsaBuilder::Frag FsaBuilder::byte_set(const ByteSet& set) {
  const uint32_t a = new_state(), b = new_state();
  for (int lo = 0; lo < 256;) {
    if (!set.test(uint8_t(lo))) {
      ++lo;
      continue;
    }
    int hi = lo;
    while (hi + 1 < 256 && set.test(uint8_t(hi + 1))) ++hi;
    fsa_.states[a].bytes.push_back({uint8_t(lo), uint8_t(hi), b});
    lo = hi + 1;
  }
  return {a, b};
}

FsaBuilder::Frag FsaBuilder::literal(std::string_view bytes) {
  const uint32_t a = new_state();
  uint32_t cur = a;
  for (unsigned char c : bytes) {
    const uint32_t next = new_state();
    fsa_.states[cur].bytes.push_back({c, c, next});
    cur = next;
  }
  return {a, cur};
}

FsaBuilder::Frag FsaBuilder::utf8_chars(const CodepointSet& set) {
  const uint32_t in = new_state(), out = new_state();
  // Shared tails of k continuation bytes keep \p{L}-sized classes small.
  std::array<uint32_t, 4> tail{out, UINT32_MAX, UINT32_MAX, UINT32_MAX};
  std::vector<ByteRanges> seqs;
  for (auto [lo, hi] : set.ranges()) utf8_sequences(lo, hi, &seqs);
  for (const ByteRanges& seq : seqs) {
    uint32_t cur = in;
    for (size_t i = 0; i < seq.size(); ++i) {
      const size_t rest = seq.size() - i - 1;
      bool full_tail = true;
      for (size_t j = i + 1; j < seq.size(); ++j)
        full_tail = full_tail && seq[j].first == 0x80 && seq[j].second == 0xBF;
      if (full_tail) {
        for (size_t k = 1; k <= rest; ++k) {
          if (tail[k] == UINT32_MAX) {
            const uint32_t s = new_state();
            fsa_.states[s].bytes.push_back({0x80, 0xBF, tail[k - 1]});
            tail[k] = s;
          }
        }
        fsa_.states[cur].bytes.push_back({seq[i].first, seq[i].second, tail[rest]});
        break;
      }
      const uint32_t next = new_state();
      fsa_.states[cur].bytes.push_back({seq[i].first, seq[i].second, next});
      cur = next;
    }
  }
  return {in, out};
}

FsaBuilder::Frag FsaBuilder::hex_range(uint32_t lo, uint32_t hi, int width) {
  auto digits = [&](uint32_t a, uint32_t b) {
    ByteSet set;
    for (uint32_t v = a; v <= b; ++v) {
      if (v < 10) {
        set.set(uint8_t('0' + v));
      } else {
        set.set(uint8_t('a' + v - 10));
        set.set(uint8_t('A' + v - 10));
      }
    }
    return byte_set(set);
  };
  if (width == 1) return digits(lo, hi);
  uint32_t p = 1;
  for (int i = 1; i < width; ++i) p *= 16;
  const uint32_t a = lo / p, b = hi / p;
  if (a == b) return seq(digits(a, a), hex_range(lo % p, hi % p, width - 1));
  std::vector<Frag> parts;
  uint32_t full_lo = a, full_hi = b;
  if (lo % p != 0) {
    parts.push_back(seq(digits(a, a), hex_range(lo % p, p - 1, width - 1)));
    full_lo = a + 1;
  }
  if (hi % p != p - 1) {
    parts.push_back(seq(digits(b, b), hex_range(0, hi % p, width - 1)));
    full_hi = b - 1;
  }
  if (full_lo <= full_hi && full_hi != UINT32_MAX)
    parts.push_back(seq(digits(full_lo, full_hi), hex_range(0, p - 1, width - 1)));
  return alt(parts);
}

FsaBuilder::Frag FsaBuilder::json_chars(const CodepointSet& set) {
  CodepointSet raw_allowed = CodepointSet::range(0x20, 0x21);
  raw_allowed.add(0x23, 0x5B);
  raw_allowed.add(0x5D, kMaxCodepoint);
  const CodepointSet raw = set.intersect(raw_allowed);
  std::vector<Frag> alts;
  if (!raw.empty()) alts.push_back(utf8_chars(raw));
  std::vector<Frag> esc;
  static const std::pair<uint32_t, char> kShort[] = {{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {0x08, 'b'},
                                                     {0x0C, 'f'}, {0x0A, 'n'},   {0x0D, 'r'}, {0x09, 't'}};
  for (auto [cp, c] : kShort)
    if (set.contains(cp)) esc.push_back(literal(std::string_view(&c, 1)));
  CodepointSet u_allowed = CodepointSet::range(0, 0x1F);
  u_allowed.add(0x22);
  u_allowed.add(0x5C);
  u_allowed.add(0x7F, 0xFFFF);
  const CodepointSet u = set.intersect(u_allowed);
  if (!u.empty()) {
    std::vector<Frag> hex;
    for (auto [lo, hi] : u.ranges()) hex.push_back(hex_range(lo, hi, 4));
    esc.push_back(seq(literal("u"), alt(hex)));
  }
  const CodepointSet astral = set.intersect(CodepointSet::range(0x10000, kMaxCodepoint));
  for (auto [lo, hi] : astral.ranges()) {
    const uint32_t hlo = 0xD800 + ((lo - 0x10000) >> 10), llo = 0xDC00 + ((lo - 0x10000) & 0x3FF);
    const uint32_t hhi = 0xD800 + ((hi - 0x10000) >> 10), lhi = 0xDC00 + ((hi - 0x10000) & 0x3FF);
    auto pair = [&](uint32_t h0, uint32_t h1, uint32_t l0, uint32_t l1) {
      const Frag parts[] = {literal("u"), hex_range(h0, h1, 4), literal("\\u"), hex_range(l0, l1, 4)};
      esc.push_back(seq(parts));
    };
    if (hlo == hhi) {
      pair(hlo, hlo, llo, lhi);
    } else {
      pair(hlo, hlo, llo, 0xDFFF);
      if (hlo + 1 <= hhi - 1) pair(hlo + 1, hhi - 1, 0xDC00, 0xDFFF);
      pair(hhi, hhi, 0xDC00, lhi);
    }
  }
  if (!esc.empty()) alts.push_back(seq(literal("\\"), alt(esc)));
  if (alts.empty()) return nothing();
  return alt(alts);
}

FsaBuilder::Frag FsaBuilder::chars(const CodepointSet& set, CharEncoding enc) {
  const CodepointSet s = set.intersect(CodepointSet::all_scalars());
  if (s.empty()) return nothing();
  return enc == CharEncoding::kUtf8 ? utf8_chars(s) : json_chars(s);
}

FsaBuilder::Frag FsaBuilder::text(std::string_view utf8, CharEncoding enc) {
  if (enc == CharEncoding::kUtf8) return literal(utf8);
  Frag f = empty();
  for (size_t pos = 0; pos < utf8.size();) {
    uint32_t cp;
    DI_CHECK_INPUT(decode_utf8(utf8, &pos, &cp), "invalid UTF-8 in a string literal");
    f = seq(f, codepoint(cp, enc));
  }
  return f;
}

FsaBuilder::Frag FsaBuilder::rule(uint32_t rule_id) {
  const uint32_t a = new_state(), b = new_state();
  fsa_.states[a].rules.push_back({rule_id, b});
  return {a, b};
}

FsaBuilder::Frag FsaBuilder::embed(const Fsa& fsa) {
  const uint32_t off = uint32_t(fsa_.states.size());
  for (size_t i = 0; i < fsa.states.size(); ++i) new_state();
  const uint32_t out = new_state();
  for (size_t i = 0; i < fsa.states.size(); ++i) {
    const Fsa::State& st = fsa.states[i];
    Fsa::State& ns = fsa_.states[off + i];
    for (const Fsa::ByteEdge& e : st.bytes) ns.bytes.push_back({e.lo, e.hi, e.to + off});
    for (const Fsa::RuleEdge& e : st.rules) ns.rules.push_back({e.rule, e.to + off});
    for (uint32_t t : st.eps) ns.eps.push_back(t + off);
    if (st.final) ns.eps.push_back(out);
  }
  return {fsa.start + off, out};
}

FsaBuilder::Frag FsaBuilder::seq(Frag a, Frag b) {
  eps(a.out, b.in);
  return {a.in, b.out};
}

FsaBuilder::Frag FsaBuilder::seq(std::span<const Frag> parts) {
  if (parts.empty()) return empty();
  Frag f = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) f = seq(f, parts[i]);
  return f;
}

FsaBuilder::Frag FsaBuilder::alt(std::span<const Frag> parts) {
  if (parts.empty()) return nothing();
  if (parts.size() == 1) return parts[0];
  const uint32_t in = new_state(), out = new_state();
  for (const Frag& p : parts) {
    eps(in, p.in);
    eps(p.out, out);
  }
  return {in, out};
}

FsaBuilder::Frag FsaBuilder::alt(Frag a, Frag b) {
  const Frag parts[] = {a, b};
  return alt(parts);
}

FsaBuilder::Frag FsaBuilder::opt(Frag a) {
  const uint32_t in = new_state(), out = new_state();
  eps(in, a.in);
  eps(a.out, out);
  eps(in, out);
  return {in, out};
}

FsaBuilder::Frag FsaBuilder::star(Frag a) {
  const uint32_t s = new_state(), out = new_state();
  eps(s, a.in);
  eps(a.out, s);
  eps(s, out);
  return {s, out};
}

FsaBuilder::Frag FsaBuilder::plus(Frag a) {
  const uint32_t out = new_state();
  eps(a.out, a.in);
  eps(a.out, out);
  const uint32_t in = new_state();
  eps(in, a.in);
  return {in, out};
}

FsaBuilder::Frag FsaBuilder::repeat(const std::function<Frag()>& make, uint32_t min, uint32_t max) {
  Frag f = empty();
  for (uint32_t i = 0; i < min; ++i) f = seq(f, make());
  if (max == kUnbounded) return seq(f, star(make()));
  // Optional copies each get a direct exit, so epsilon closures stay small.
  const uint32_t out = new_state();
  uint32_t cur = f.out;
  for (uint32_t i = min; i < max; ++i) {
    const Frag c = make();
    eps(cur, c.in);
    eps(cur, out);
    cur = c.out;
  }
  eps(cur, out);
  return {f.in, out};
}

Fsa FsaBuilder::finish(Frag f) {
  fsa_.start = f.in;
  fsa_.states[f.out].final = true;
  Fsa out = std::move(fsa_);
  fsa_ = Fsa();
  return out;
}

Fsa optimize_fsa(const Fsa& fsa, size_t max_states, CompileBudget* budget) {
  Fsa e = remove_epsilon(fsa, budget);
  Fsa d;
  // A subset construction much larger than its input is the exponential case; the
  // Earley matcher runs the nondeterministic automaton just as well.
  const size_t cap = std::min(max_states, std::max<size_t>(4096, 16 * e.states.size()));
  if (determinize(e, cap, &d, budget)) return trim(minimize(d, budget));
  return trim(e);
}

}  // namespace deepinfer::structured
