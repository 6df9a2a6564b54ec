// Exact decimal numbers and automata over JSON number text.
//
// Numeric keywords (minimum, maximum, exclusive*, multipleOf) become automata that read
// the number's digits and compare them with the bound digit by digit, so the grammar
// accepts exactly the numbers in range, with no floating point involved.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "structured/fsa.h"
#include "structured/limits.h"

namespace deepinfer::structured {

// A finite decimal number: (-1)^negative * int_digits.frac_digits.
struct Decimal {
  bool negative = false;
  std::string int_digits;   // no leading zeros; empty when |x| < 1
  std::string frac_digits;  // no trailing zeros

  bool is_zero() const { return int_digits.empty() && frac_digits.empty(); }
  bool is_integer() const { return frac_digits.empty(); }
  // -1, 0, 1 as *this <, ==, > other (numerically; -0 == 0).
  int compare(const Decimal& other) const;
  std::string to_string() const;

  // Parses JSON number text (exponents allowed, |exponent| <= 10000); false otherwise.
  static bool parse(std::string_view text, Decimal* out);
  // The value of a JSON number (nlohmann keeps integers exactly and doubles as the
  // shortest text that round-trips).
  static Decimal from_json(const nlohmann::ordered_json& number);
};

enum class NumberCmp { kGe, kGt, kLe, kLt };

// Bounds on how many digits number text may have (the generation policy of
// json_schema.h); -1 = unbounded. Counts are of digits only: "-12.50e+007" has a
// mantissa of 4 digits with a point and 3 exponent digits.
struct NumberDigits {
  int integer = -1;  // digits of a mantissa without point ("0" is one); at least 1 when bounded
  int decimal = -1;  // digits of a mantissa with a point, both sides ("0.5" is two); 0 = no point
  int exponent = -1;  // digits after e/E and its sign; 0 = no exponent
  bool unbounded() const { return integer < 0 && decimal < 0 && exponent < 0; }
};

// JSON number text: -?(0|[1-9][0-9]*)(\.[0-9]+)? followed, with allow_exponent, by an
// optional [eE][+-]?[0-9]+, each part within `digits`. With integer_only the fraction
// must be all zeros (1.0 is an integer) and there is no exponent.
Fsa number_syntax_fsa(bool integer_only, bool allow_exponent, const NumberDigits& digits = {});

// Number text without exponent whose value v satisfies `v cmp bound`.
Fsa number_compare_fsa(const Decimal& bound, NumberCmp cmp, CompileBudget* budget);

// Number text without exponent whose value is an integer multiple of q (q > 0).
// InputError when q's scaled digits exceed the limit.
Fsa number_multiple_of_fsa(const Decimal& q, CompileBudget* budget);

// The texts that spell exactly v: its digits with any number of trailing fractional
// zeros ("1", "1.0", "1.00"; for zero also "-0"), and the normalized scientific form
// ("1e+20", "1.5E-07", "9.007199254740992e15"). `digits` bounds only the optional
// padding (trailing fractional zeros, leading exponent zeros; exponent 0 drops the
// scientific form): v's own shortest spellings are always accepted, however long.
Fsa number_literal_fsa(const Decimal& v, const NumberDigits& digits = {});

}  // namespace deepinfer::structured
