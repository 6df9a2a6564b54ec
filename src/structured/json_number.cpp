#include "structured/json_number.h"

#include <algorithm>
#include <array>
#include <functional>

#include "common/check.h"
#include "structured/fsa_builder.h"
#include "structured/regex.h"

namespace deepinfer::structured {
namespace {

constexpr int64_t kMaxExponent = 10000;
constexpr uint64_t kMaxMultipleOfModulus = 1000000;

void normalize(Decimal* d) {
  size_t lead = 0;
  while (lead < d->int_digits.size() && d->int_digits[lead] == '0') ++lead;
  d->int_digits.erase(0, lead);
  while (!d->frac_digits.empty() && d->frac_digits.back() == '0') d->frac_digits.pop_back();
}

// Adds [lo, hi] -> to when the range is not empty.
void digit_edge(Fsa& f, uint32_t from, int lo, int hi, uint32_t to) {
  if (lo <= hi) f.states[from].bytes.push_back({uint8_t('0' + lo), uint8_t('0' + hi), to});
}

// Unsigned number text (no sign, no exponent) whose magnitude m satisfies `m pred M`,
// M given by its digits. Reads the integer part comparing length, then digits, then
// the fraction digit by digit.
Fsa magnitude_compare(const std::string& mi, const std::string& mf, NumberCmp pred) {
  enum Rel { kLess = 0, kEqual = 1, kGreater = 2 };
  auto ok = [&](int rel) {
    switch (pred) {
      case NumberCmp::kGe: return rel >= kEqual;
      case NumberCmp::kGt: return rel == kGreater;
      case NumberCmp::kLe: return rel <= kEqual;
      case NumberCmp::kLt: return rel == kLess;
    }
    return false;
  };
  const size_t n = mi.size(), p = mf.size();
  Fsa f;
  const uint32_t start = f.add_state();
  f.start = start;
  // Fraction states.
  uint32_t pending[3], tail[3];
  for (int v : {kLess, kGreater}) {
    pending[v] = f.add_state();
    tail[v] = f.add_state();
    f.states[tail[v]].final = ok(v);
    digit_edge(f, pending[v], 0, 9, tail[v]);
    digit_edge(f, tail[v], 0, 9, tail[v]);
  }
  // eq[j]: j fraction digits read (j = p + 1: more than p), all equal to M's (whose
  // digits past p are zeros).
  std::vector<uint32_t> eq(p + 2);
  for (size_t j = 0; j <= p + 1; ++j) eq[j] = f.add_state();
  for (size_t j = 0; j <= p + 1; ++j) {
    const uint32_t s = eq[j];
    f.states[s].final = j >= 1 && ok(j >= p ? kEqual : kLess);
    const int m = j < p ? mf[j] - '0' : 0;
    digit_edge(f, s, 0, m - 1, tail[kLess]);
    digit_edge(f, s, m, m, eq[std::min(j + 1, p + 1)]);
    digit_edge(f, s, m + 1, 9, tail[kGreater]);
  }
  auto frac_entry = [&](int verdict) { return verdict == kEqual ? eq[0] : pending[verdict]; };
  auto end_ok = [&](int verdict) { return verdict == kEqual ? ok(p == 0 ? kEqual : kLess) : ok(verdict); };
  auto finish_int_state = [&](uint32_t s, int verdict) {
    f.states[s].final = end_ok(verdict);
    f.states[s].bytes.push_back({'.', '.', frac_entry(verdict)});
  };
  // Integer part: "0", or [1-9][0-9]* tracked as (digits read, relation so far).
  const uint32_t zero = f.add_state();
  finish_int_state(zero, n == 0 ? kEqual : kLess);
  const uint32_t longer = f.add_state();
  finish_int_state(longer, kGreater);
  digit_edge(f, longer, 0, 9, longer);
  std::vector<std::array<uint32_t, 3>> ints(n + 1);
  for (size_t l = 1; l <= n; ++l)
    for (int r = 0; r < 3; ++r) ints[l][r] = f.add_state();
  for (size_t l = 1; l <= n; ++l) {
    for (int r = 0; r < 3; ++r) {
      const uint32_t s = ints[l][r];
      finish_int_state(s, l < n ? kLess : r);
      if (l == n) {
        digit_edge(f, s, 0, 9, longer);
      } else if (r != kEqual) {
        digit_edge(f, s, 0, 9, ints[l + 1][r]);
      } else {
        const int m = mi[l] - '0';
        digit_edge(f, s, 0, m - 1, ints[l + 1][kLess]);
        digit_edge(f, s, m, m, ints[l + 1][kEqual]);
        digit_edge(f, s, m + 1, 9, ints[l + 1][kGreater]);
      }
    }
  }
  f.states[start].bytes.push_back({'0', '0', zero});
  if (n == 0) {
    digit_edge(f, start, 1, 9, longer);
  } else {
    const int m = mi[0] - '0';
    digit_edge(f, start, 1, m - 1, ints[1][kLess]);
    digit_edge(f, start, std::max(m, 1), m, ints[1][kEqual]);
    digit_edge(f, start, m + 1, 9, ints[1][kGreater]);
  }
  for (Fsa::State& s : f.states)
    std::sort(s.bytes.begin(), s.bytes.end(), [](const Fsa::ByteEdge& a, const Fsa::ByteEdge& b) { return a.lo < b.lo; });
  return trim(f);
}

Fsa fixed_regex(const char* re) {
  CompileBudget budget{CompileLimits{}};
  return regex_to_fsa(re, RegexOptions{}, &budget);
}

}  // namespace

int Decimal::compare(const Decimal& o) const {
  const bool neg_a = negative && !is_zero(), neg_b = o.negative && !o.is_zero();
  if (neg_a != neg_b) return neg_a ? -1 : 1;
  int mag;
  if (int_digits.size() != o.int_digits.size()) {
    mag = int_digits.size() < o.int_digits.size() ? -1 : 1;
  } else if (int_digits != o.int_digits) {
    mag = int_digits < o.int_digits ? -1 : 1;
  } else {
    mag = frac_digits == o.frac_digits ? 0 : frac_digits < o.frac_digits ? -1 : 1;
  }
  return neg_a ? -mag : mag;
}

std::string Decimal::to_string() const {
  std::string s = (negative && !is_zero()) ? "-" : "";
  s += int_digits.empty() ? "0" : int_digits;
  if (!frac_digits.empty()) s += "." + frac_digits;
  return s;
}

bool Decimal::parse(std::string_view text, Decimal* out) {
  Decimal d;
  size_t i = 0;
  if (i < text.size() && text[i] == '-') {
    d.negative = true;
    ++i;
  }
  std::string digits;
  int64_t point = -1;
  for (; i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.'); ++i) {
    if (text[i] == '.') {
      if (point >= 0) return false;
      point = int64_t(digits.size());
    } else {
      digits += text[i];
    }
  }
  if (digits.empty()) return false;
  if (point < 0) point = int64_t(digits.size());
  int64_t exp = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) neg = text[i++] == '-';
    if (i >= text.size()) return false;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      exp = exp * 10 + (text[i] - '0');
      if (exp > kMaxExponent) return false;
    }
    if (neg) exp = -exp;
  }
  if (i != text.size()) return false;
  point += exp;
  if (point < 0) {
    digits.insert(0, size_t(-point), '0');
    point = 0;
  } else if (point > int64_t(digits.size())) {
    digits.append(size_t(point) - digits.size(), '0');
  }
  d.int_digits = digits.substr(0, size_t(point));
  d.frac_digits = digits.substr(size_t(point));
  normalize(&d);
  *out = d;
  return true;
}

Decimal Decimal::from_json(const nlohmann::ordered_json& number) {
  DI_CHECK(number.is_number(), "Decimal::from_json on a non-number");
  Decimal d;
  const bool ok = parse(number.dump(), &d);
  DI_CHECK_INPUT(ok, "number ", number.dump(), " is out of the supported range");
  return d;
}

Fsa number_syntax_fsa(bool integer_only, bool allow_exponent, const NumberDigits& digits) {
  static const Fsa kInteger = fixed_regex("-?(0|[1-9][0-9]*)(\\.0+)?");
  static const Fsa kPlain = fixed_regex("-?(0|[1-9][0-9]*)(\\.[0-9]+)?");
  static const Fsa kFull = fixed_regex("-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][-+]?[0-9]+)?");
  if (digits.unbounded()) return integer_only ? kInteger : allow_exponent ? kFull : kPlain;
  DI_CHECK(digits.integer != 0, "a number needs at least one integer digit");
  // Built directly as a DFA whose states count digits, so widened bounds stay linear.
  // int[n]: n integer digits read (n <= m explicit; `longer` past m where a part is
  // unbounded); pend[n]: a point after n; frac[t]: t digits in all, at least one after
  // the point. Every final state may take the exponent.
  const int I = digits.integer, D = digits.decimal, E = allow_exponent && !integer_only ? digits.exponent : 0;
  const bool int_final_all = I < 0, point_all = D < 0;
  auto int_final = [&](int n) { return I < 0 || n <= I; };
  auto point_ok = [&](int n) { return D < 0 || n <= D - 1; };
  const int m = std::max({1, I, D - 1});
  Fsa f;
  f.start = f.add_state();
  const uint32_t minus = f.add_state(), zero = f.add_state();
  std::vector<uint32_t> ints(m + 1), pend(m + 1);
  for (int n = 1; n <= m; ++n) ints[n] = f.add_state();
  for (int n = 1; n <= m; ++n) pend[n] = f.add_state();
  const uint32_t longer = (int_final_all || point_all) ? f.add_state() : UINT32_MAX;
  const uint32_t long_pend = point_all ? f.add_state() : UINT32_MAX;
  // Fraction states: bounded D: frac[t] for t in [2, D]; unbounded: one looping state.
  std::vector<uint32_t> frac(std::max(D, 0) + 1, UINT32_MAX);
  for (int t = 2; t <= D; ++t) frac[t] = f.add_state();
  const uint32_t frac_loop = point_all ? f.add_state() : UINT32_MAX;
  const uint32_t exp_mark = f.add_state(), exp_sign = f.add_state();
  std::vector<uint32_t> exps(std::max(E, 0) + 1);
  for (int k = 1; k <= E; ++k) exps[k] = f.add_state();
  const uint32_t exp_loop = E < 0 ? f.add_state() : UINT32_MAX;
  const uint8_t frac_hi = integer_only ? '0' : '9';
  auto digits_to = [&](uint32_t from, uint8_t hi, uint32_t to) { f.states[from].bytes.push_back({'0', hi, to}); };
  auto finish = [&](uint32_t s) {
    f.states[s].final = true;
    if (E == 0) return;
    f.states[s].bytes.push_back({'E', 'E', exp_mark});
    f.states[s].bytes.push_back({'e', 'e', exp_mark});
  };
  f.states[f.start].bytes.push_back({'-', '-', minus});
  for (uint32_t s : {f.start, minus}) {
    f.states[s].bytes.push_back({'0', '0', zero});
    f.states[s].bytes.push_back({'1', '9', ints[1]});
  }
  // After n integer digits (zero: the "0" alone).
  auto int_state = [&](uint32_t s, int n) {
    if (int_final(n)) finish(s);
    if (point_ok(n)) f.states[s].bytes.push_back({'.', '.', pend[n]});
  };
  int_state(zero, 1);
  for (int n = 1; n <= m; ++n) {
    int_state(ints[n], n);
    if (n < m) digits_to(ints[n], '9', ints[n + 1]);
    else if (longer != UINT32_MAX) digits_to(ints[n], '9', longer);
    // pend[n]: the first fraction digit makes n + 1 digits in all.
    if (D < 0) digits_to(pend[n], frac_hi, frac_loop);
    else if (n + 1 <= D) digits_to(pend[n], frac_hi, frac[n + 1]);
  }
  if (longer != UINT32_MAX) {
    if (int_final_all) finish(longer);
    if (point_all) f.states[longer].bytes.push_back({'.', '.', long_pend});
    digits_to(longer, '9', longer);
  }
  if (long_pend != UINT32_MAX) digits_to(long_pend, frac_hi, frac_loop);
  if (frac_loop != UINT32_MAX) {
    finish(frac_loop);
    digits_to(frac_loop, frac_hi, frac_loop);
  }
  for (int t = 2; t <= D; ++t) {
    finish(frac[t]);
    if (t < D) digits_to(frac[t], frac_hi, frac[t + 1]);
  }
  const uint32_t first_exp = E < 0 ? exp_loop : E > 0 ? exps[1] : UINT32_MAX;
  if (first_exp != UINT32_MAX) {
    f.states[exp_mark].bytes.push_back({'+', '+', exp_sign});
    f.states[exp_mark].bytes.push_back({'-', '-', exp_sign});
    for (uint32_t s : {exp_mark, exp_sign}) digits_to(s, '9', first_exp);
    if (E < 0) {
      f.states[exp_loop].final = true;
      digits_to(exp_loop, '9', exp_loop);
    }
    for (int k = 1; k <= E; ++k) {
      f.states[exps[k]].final = true;
      if (k < E) digits_to(exps[k], '9', exps[k + 1]);
    }
  }
  for (Fsa::State& st : f.states)
    std::sort(st.bytes.begin(), st.bytes.end(), [](const Fsa::ByteEdge& a, const Fsa::ByteEdge& b) { return a.lo < b.lo; });
  CompileBudget budget{CompileLimits{}};
  return optimize_fsa(trim(f), 1 << 20, &budget);
}

Fsa number_compare_fsa(const Decimal& bound, NumberCmp cmp, CompileBudget* budget) {
  // v = +m: m cmp |B| when B >= 0; always (>=, >) or never (<=, <) when B < 0.
  // v = -m: m flip(cmp) |B| when B <= 0; never (>=, >) or always (<=, <) when B > 0.
  static const Fsa kUnsigned = fixed_regex("(0|[1-9][0-9]*)(\\.[0-9]+)?");
  const bool b_neg = bound.negative && !bound.is_zero();
  const bool b_pos = !bound.negative && !bound.is_zero();
  const bool lower = cmp == NumberCmp::kGe || cmp == NumberCmp::kGt;
  auto flip = [](NumberCmp c) {
    switch (c) {
      case NumberCmp::kGe: return NumberCmp::kLe;
      case NumberCmp::kGt: return NumberCmp::kLt;
      case NumberCmp::kLe: return NumberCmp::kGe;
      case NumberCmp::kLt: return NumberCmp::kGt;
    }
    return c;
  };
  FsaBuilder b(budget, budget->limits().max_rule_states);
  std::vector<FsaBuilder::Frag> alts;
  if (!b_neg) {
    alts.push_back(b.embed(magnitude_compare(bound.int_digits, bound.frac_digits, cmp)));
  } else if (lower) {
    alts.push_back(b.embed(kUnsigned));
  }
  if (!b_pos) {
    alts.push_back(b.seq(b.literal("-"), b.embed(magnitude_compare(bound.int_digits, bound.frac_digits, flip(cmp)))));
  } else if (!lower) {
    alts.push_back(b.seq(b.literal("-"), b.embed(kUnsigned)));
  }
  return optimize_fsa(b.finish(b.alt(alts)), budget->limits().max_rule_states, budget);
}

Fsa number_multiple_of_fsa(const Decimal& q, CompileBudget* budget) {
  DI_CHECK_INPUT(!q.is_zero() && !q.negative, "multipleOf must be greater than 0");
  const size_t d = q.frac_digits.size();
  std::string scaled = q.int_digits + q.frac_digits;
  scaled.erase(0, std::min(scaled.find_first_not_of('0'), scaled.size()));
  DI_CHECK_INPUT(scaled.size() <= 7, "multipleOf ", q.to_string(), " has too many significant digits");
  const uint64_t m = std::stoull(scaled);
  DI_CHECK_INPUT(m <= kMaxMultipleOfModulus && m * (d + 2) <= budget->limits().max_rule_states, "multipleOf ",
                 q.to_string(), " needs too many automaton states");
  // States: int(r) after integer digits with remainder r; frac(j, r) after j fraction
  // digits (j <= d); past d only zeros may follow.
  Fsa f;
  f.start = f.add_state();
  const uint32_t minus = f.add_state();
  const uint32_t zero = f.add_state();
  const uint32_t int_base = uint32_t(f.states.size());
  for (uint64_t r = 0; r < m; ++r) f.add_state();
  const uint32_t frac_base = uint32_t(f.states.size());
  for (uint64_t k = 0; k < (d + 1) * m; ++k) f.add_state();
  budget->add_states(f.states.size(), "multipleOf");
  auto frac = [&](size_t j, uint64_t r) { return uint32_t(frac_base + j * m + r); };
  uint64_t pow10_d = 1 % m;
  for (size_t i = 0; i < d; ++i) pow10_d = pow10_d * 10 % m;
  f.states[f.start].bytes.push_back({'-', '-', minus});
  for (uint32_t s : {f.start, minus}) {
    f.states[s].bytes.push_back({'0', '0', zero});
    for (int dig = 1; dig <= 9; ++dig) f.states[s].bytes.push_back({uint8_t('0' + dig), uint8_t('0' + dig), uint32_t(int_base + dig % m)});
  }
  auto int_state = [&](uint32_t s, uint64_t r) {
    f.states[s].final = r * pow10_d % m == 0;
    f.states[s].bytes.push_back({'.', '.', frac(0, r)});
  };
  int_state(zero, 0);
  for (uint64_t r = 0; r < m; ++r) {
    const uint32_t s = int_base + uint32_t(r);
    int_state(s, r);
    for (int dig = 0; dig <= 9; ++dig)
      f.states[s].bytes.push_back({uint8_t('0' + dig), uint8_t('0' + dig), uint32_t(int_base + (r * 10 + dig) % m)});
    std::sort(f.states[s].bytes.begin(), f.states[s].bytes.end(),
              [](const Fsa::ByteEdge& a, const Fsa::ByteEdge& b) { return a.lo < b.lo; });
  }
  for (size_t j = 0; j <= d; ++j) {
    uint64_t pad = 1 % m;  // 10^(d-j)
    for (size_t i = j; i < d; ++i) pad = pad * 10 % m;
    for (uint64_t r = 0; r < m; ++r) {
      const uint32_t s = frac(j, r);
      f.states[s].final = j >= 1 && r * pad % m == 0;
      if (j < d) {
        for (int dig = 0; dig <= 9; ++dig)
          f.states[s].bytes.push_back({uint8_t('0' + dig), uint8_t('0' + dig), frac(j + 1, (r * 10 + dig) % m)});
      } else {
        f.states[s].bytes.push_back({'0', '0', s});
      }
    }
  }
  return optimize_fsa(trim(f), budget->limits().max_rule_states, budget);
}

Fsa number_literal_fsa(const Decimal& v, const NumberDigits& digits) {
  CompileBudget budget{CompileLimits{}};
  FsaBuilder b(&budget, 1 << 20);
  // Optional padding zeros: up to `room` of them (-1: any number).
  auto zeros = [&](int64_t room) {
    if (room < 0) return b.star(b.literal("0"));
    return b.repeat([&] { return b.literal("0"); }, 0, uint32_t(room));
  };
  // The fraction of a mantissa whose integer part has `int_len` digits and whose own
  // significant fraction digits are `own`: ".own" then padding zeros, or for own = ""
  // nothing or ".0", ".00", ... while all digits stay within digits.decimal.
  auto fraction = [&](size_t int_len, const std::string& own) {
    const int64_t room =
        digits.decimal < 0 ? -1 : std::max<int64_t>(0, digits.decimal - int64_t(int_len + own.size()));
    if (!own.empty()) return b.seq(b.literal("." + own), zeros(room));
    if (room == 0) return b.empty();
    return b.opt(b.seq(b.literal("."), room < 0 ? b.plus(b.literal("0"))
                                                  : b.repeat([&] { return b.literal("0"); }, 1, uint32_t(room))));
  };
  FsaBuilder::Frag sign = v.is_zero() ? b.opt(b.literal("-")) : v.negative ? b.literal("-") : b.empty();
  FsaBuilder::Frag body = b.literal(v.int_digits.empty() ? "0" : v.int_digits);
  const FsaBuilder::Frag plain_parts[] = {sign, body, fraction(std::max<size_t>(1, v.int_digits.size()), v.frac_digits)};
  std::vector<FsaBuilder::Frag> forms{b.seq(plain_parts)};
  if (!v.is_zero() && digits.exponent != 0) {
    // The normalized scientific form serializers use for large and small doubles:
    // one nonzero digit, the other significant digits, then the exponent (1e+20,
    // 9.007199254740992e15, 1.5E-07).
    const std::string all = v.int_digits + v.frac_digits;
    const size_t first = all.find_first_not_of('0');
    std::string sig = all.substr(first);
    while (sig.size() > 1 && sig.back() == '0') sig.pop_back();
    const int64_t exp = int64_t(v.int_digits.size()) - int64_t(first) - 1;
    const std::string exp_text = exp == 0 ? "0" : std::to_string(exp < 0 ? -exp : exp);
    FsaBuilder::Frag exp_sign = exp < 0 ? b.literal("-") : exp == 0 ? b.opt(b.alt(b.literal("+"), b.literal("-")))
                                                                   : b.opt(b.literal("+"));
    const int64_t exp_room = digits.exponent < 0 ? -1 : std::max<int64_t>(0, digits.exponent - int64_t(exp_text.size()));
    const FsaBuilder::Frag sci_parts[] = {v.negative ? b.literal("-") : b.empty(),
                                          b.literal(sig.substr(0, 1)),
                                          fraction(1, sig.substr(1)),
                                          b.alt(b.literal("e"), b.literal("E")),
                                          exp_sign,
                                          zeros(exp_room),
                                          b.literal(exp_text)};
    forms.push_back(b.seq(sci_parts));
  }
  return optimize_fsa(b.finish(b.alt(forms)), 1 << 20, &budget);
}

}  // namespace deepinfer::structured
