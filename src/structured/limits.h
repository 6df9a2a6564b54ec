// Caps that keep hostile constraints (huge enums, nested or recursive schemas,
// catastrophic regexes, exponential determinization) from hanging a compile or
// exhausting memory. Exceeding any cap is an InputError naming the cap, never a crash.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace deepinfer::structured {

struct CompileLimits {
  size_t max_input_bytes = 8u << 20;      // schema / regex / grammar text
  int max_nesting = 200;                  // parser and schema recursion depth
  size_t max_rules = 20000;               // grammar rules after expansion
  size_t max_rule_states = 200000;        // automaton states of one rule (before minimizing)
  size_t max_total_states = 2000000;      // automaton states over the whole grammar
  size_t max_repeat = 100000;             // the n of {m,n} in regexes and GBNF
  size_t max_enum_values = 100000;        // enum / const literals in one schema
  size_t max_alternatives = 4096;         // anyOf x allOf expansion at one schema node
  double max_seconds = 10.0;              // wall clock for one compile
};

// Tracks one compile against its limits. Cheap to poll in inner loops.
class CompileBudget {
 public:
  explicit CompileBudget(const CompileLimits& limits);
  const CompileLimits& limits() const { return limits_; }
  // Throws InputError when the wall-clock budget is spent. `what` names the stage.
  void check_time(const char* what);
  // Counts states created anywhere in the compile against max_total_states.
  void add_states(size_t n, const char* what);

 private:
  CompileLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
  size_t total_states_ = 0;
  uint32_t polls_ = 0;
};

}  // namespace deepinfer::structured
