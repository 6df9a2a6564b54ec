// Minimal `--flag value` parsing for the deepinfer subcommands. Unknown flags,
// missing values and malformed numbers are InputErrors naming the flag.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace deepinfer::cli {

class Args {
 public:
  // `known` lists the accepted flags (without "--").
  Args(int argc, char** argv, int first, const std::set<std::string>& known);
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string get(const std::string& name, const std::string& fallback = "") const;
  std::string require(const std::string& name) const;
  int64_t get_int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;

 private:
  std::map<std::string, std::string> values_;
};

// "1,2,3" -> {1, 2, 3}; InputError on anything else (what names the flag).
std::vector<int64_t> parse_id_list(const std::string& text, const std::string& what);

}  // namespace deepinfer::cli
