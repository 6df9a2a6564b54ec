#include "structured/json_formats.h"

#include <cstdio>
#include <map>
#include <mutex>
#include <string>

#include "structured/regex.h"

namespace deepinfer::structured {
namespace {

const std::string kHex = "[0-9A-Fa-f]";
const std::string kDecOctet = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
const std::string kIpv4 = kDecOctet + "(\\." + kDecOctet + "){3}";

std::string ipv6() {
  const std::string h16 = kHex + "{1,4}";
  const std::string ls32 = "(" + h16 + ":" + h16 + "|" + kIpv4 + ")";
  auto pre = [&](int n) { return "((" + h16 + ":){0," + std::to_string(n) + "}" + h16 + ")?"; };
  return "((" + h16 + ":){6}" + ls32 + "|::(" + h16 + ":){5}" + ls32 + "|(" + h16 + ")?::(" + h16 + ":){4}" +
         ls32 + "|" + pre(1) + "::(" + h16 + ":){3}" + ls32 + "|" + pre(2) + "::(" + h16 + ":){2}" + ls32 + "|" +
         pre(3) + "::" + h16 + ":" + ls32 + "|" + pre(4) + "::" + ls32 + "|" + pre(5) + "::" + h16 + "|" + pre(6) +
         "::)";
}

std::string hostname() {
  const std::string label = "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?";
  return label + "(\\." + label + ")*";
}

std::string date() {
  const std::string y = "[0-9]{4}";
  const std::string leap = "([0-9]{2}(0[48]|[2468][048]|[13579][26])|([02468][048]|[13579][26])00)";
  return "(" + y + "-(0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|" + y + "-(0[469]|11)-(0[1-9]|[12][0-9]|30)|" + y +
         "-02-(0[1-9]|1[0-9]|2[0-8])|" + leap + "-02-29)";
}

// A leap second is valid only where the time is 23:59:60 in UTC, so each local hour
// and minute allows :60 with exactly one positive and one negative offset.
std::string time() {
  const std::string frac = "(\\.[0-9]+)?";
  const std::string hh = "([01][0-9]|2[0-3])", mm = "[0-5][0-9]";
  std::string out = "(" + hh + ":" + mm + ":[0-5][0-9]" + frac + "([Zz]|[-+]" + hh + ":" + mm + ")";
  char buf[64];
  for (int local = 0; local < 1440; ++local) {
    const int plus = ((local - 1439) % 1440 + 1440) % 1440;   // local = UTC + offset
    const int minus = ((1439 - local) % 1440 + 1440) % 1440;  // local = UTC - offset
    std::snprintf(buf, sizeof buf, "|%02d:%02d:60", local / 60, local % 60);
    out += buf;
    out += frac;
    std::snprintf(buf, sizeof buf, "(\\+%02d:%02d|-%02d:%02d%s)", plus / 60, plus % 60, minus / 60, minus % 60,
                  plus == 0 ? "|[Zz]" : "");
    out += buf;
  }
  return out + ")";
}

std::string duration() {
  const std::string n = "[0-9]+";
  const std::string second = n + "S", minute = n + "M(" + second + ")?", hour = n + "H(" + minute + ")?";
  const std::string t = "T(" + hour + "|" + minute + "|" + second + ")";
  const std::string day = n + "D", month = n + "M(" + day + ")?", year = n + "Y(" + month + ")?";
  return "P((" + day + "|" + month + "|" + year + ")(" + t + ")?|" + t + "|" + n + "W)";
}

struct UriParts {
  std::string scheme, authority, abempty, absolute, rootless, noscheme, query;
};

UriParts uri_parts() {
  const std::string pct = "%" + kHex + "{2}";
  const std::string unreserved = "[A-Za-z0-9._~-]", sub = "[!$&'()*+,;=]";
  const std::string pchar = "(" + unreserved + "|" + pct + "|" + sub + "|[:@])";
  const std::string host = "(\\[(" + ipv6() + "|[vV]" + kHex + "+\\.(" + unreserved + "|" + sub + "|:)+)\\]|(" +
                           unreserved + "|" + pct + "|" + sub + ")*)";
  UriParts p;
  p.scheme = "[A-Za-z][A-Za-z0-9+.-]*";
  p.authority = "((" + unreserved + "|" + pct + "|" + sub + "|:)*@)?" + host + "(:[0-9]*)?";
  p.abempty = "(/" + pchar + "*)*";
  p.absolute = "/(" + pchar + "+(/" + pchar + "*)*)?";
  p.rootless = pchar + "+(/" + pchar + "*)*";
  p.noscheme = "(" + unreserved + "|" + pct + "|" + sub + "|@)+(/" + pchar + "*)*";
  p.query = "(" + pchar + "|[/?])*";
  return p;
}

std::string uri() {
  const UriParts p = uri_parts();
  return p.scheme + ":(//" + p.authority + p.abempty + "|" + p.absolute + "|" + p.rootless + ")?(\\?" + p.query +
         ")?(#" + p.query + ")?";
}

std::string uri_reference() {
  const UriParts p = uri_parts();
  const std::string tail = "(\\?" + p.query + ")?(#" + p.query + ")?";
  return "(" + uri() + "|(//" + p.authority + p.abempty + "|" + p.absolute + "|" + p.noscheme + ")?" + tail + ")";
}

std::string email() {
  const std::string atext = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
  const std::string local = "(" + atext + "+(\\." + atext + "+)*|\"([\\x20\\x21\\x23-\\x5B\\x5D-\\x7E]|\\\\[\\x20-\\x7E])*\")";
  return local + "@(" + hostname() + "|\\[" + kIpv4 + "\\]|\\[IPv6:" + ipv6() + "\\])";
}

bool format_regex(std::string_view format, std::string* re) {
  if (format == "date") *re = date();
  else if (format == "time") *re = time();
  else if (format == "date-time") *re = date() + "[Tt]" + time();
  else if (format == "duration") *re = duration();
  else if (format == "uuid") *re = kHex + "{8}-" + kHex + "{4}-" + kHex + "{4}-" + kHex + "{4}-" + kHex + "{12}";
  else if (format == "email") *re = email();
  else if (format == "hostname") *re = hostname();
  else if (format == "ipv4") *re = kIpv4;
  else if (format == "ipv6") *re = ipv6();
  else if (format == "uri") *re = uri();
  else if (format == "uri-reference") *re = uri_reference();
  else if (format == "json-pointer") *re = "(/([^/~]|~[01])*)*";
  else if (format == "relative-json-pointer") *re = "(0|[1-9][0-9]*)(#|(/([^/~]|~[01])*)*)";
  else return false;
  return true;
}

}  // namespace

bool format_fsa(std::string_view format, CharEncoding enc, Fsa* out) {
  static std::mutex mu;
  static std::map<std::pair<std::string, int>, Fsa> cache;
  const std::pair<std::string, int> key{std::string(format), int(enc)};
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = cache.find(key);
    if (it != cache.end()) {
      *out = it->second;
      return true;
    }
  }
  std::string re;
  if (!format_regex(format, &re)) return false;
  CompileLimits limits;
  limits.max_input_bytes = 1 << 20;
  CompileBudget budget(limits);
  RegexOptions options;
  options.encoding = enc;
  Fsa f = regex_to_fsa(re, options, &budget);
  std::lock_guard<std::mutex> lock(mu);
  cache.emplace(key, f);
  *out = std::move(f);
  return true;
}

}  // namespace deepinfer::structured
