// JSON Schema string formats as automata.
//
// Asserted formats: date, time, date-time (RFC 3339, leap seconds only at 23:59:60 UTC,
// T and Z in either case), duration (RFC 3339 appendix A), uuid, email (dot-atom or
// quoted local part; host name, [IPv4] or [IPv6:...] domain), hostname (RFC 1123
// labels; the 253-character total is not checked), ipv4, ipv6 (RFC 4291 text forms,
// no zone), uri and uri-reference (RFC 3986), json-pointer, relative-json-pointer.
#pragma once

#include <string_view>

#include "structured/fsa.h"
#include "structured/fsa_builder.h"
#include "structured/limits.h"

namespace deepinfer::structured {

// The strings of `format`, each character spelled with `enc`, as a trimmed epsilon-free
// automaton; false if we do not implement the format. Results are cached per process.
bool format_fsa(std::string_view format, CharEncoding enc, Fsa* out);

}  // namespace deepinfer::structured
