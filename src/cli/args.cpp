#include "cli/args.h"

#include <cerrno>
#include <cstdlib>

#include "common/check.h"

namespace deepinfer::cli {

static int64_t parse_int(const std::string& s, const std::string& what) {
  DI_CHECK_INPUT(!s.empty() && s.size() <= 20, what, ": '", s, "' is not an integer");
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  DI_CHECK_INPUT(errno == 0 && end == s.c_str() + s.size(), what, ": '", s, "' is not an integer");
  return v;
}

Args::Args(int argc, char** argv, int first, const std::set<std::string>& known) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    DI_CHECK_INPUT(a.rfind("--", 0) == 0, "unexpected argument '", a, "'");
    std::string name = a.substr(2), value;
    auto eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    } else {
      DI_CHECK_INPUT(i + 1 < argc, "flag --", name, " needs a value");
      value = argv[++i];
    }
    DI_CHECK_INPUT(known.count(name), "unknown flag --", name);
    DI_CHECK_INPUT(!values_.count(name), "flag --", name, " given twice");
    values_[name] = value;
  }
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::string Args::require(const std::string& name) const {
  DI_CHECK_INPUT(has(name), "missing required flag --", name);
  return get(name);
}

int64_t Args::get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const {
  if (!has(name)) return fallback;
  int64_t v = parse_int(get(name), "--" + name);
  DI_CHECK_INPUT(v >= min && v <= max, "--", name, " must be in [", min, ", ", max, "], got ", v);
  return v;
}

std::vector<int64_t> parse_id_list(const std::string& text, const std::string& what) {
  std::vector<int64_t> out;
  size_t start = 0;
  DI_CHECK_INPUT(!text.empty(), what, " is empty");
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(parse_int(text.substr(start, comma - start), what));
    DI_CHECK_INPUT(out.size() <= 10'000'000, what, " has too many entries");
    start = comma + 1;
  }
  return out;
}

}  // namespace deepinfer::cli
