#include "structured/limits.h"

#include "common/check.h"

namespace deepinfer::structured {

CompileBudget::CompileBudget(const CompileLimits& limits)
    : limits_(limits),
      deadline_(std::chrono::steady_clock::now() +
                std::chrono::microseconds(int64_t(limits.max_seconds * 1e6))) {}

void CompileBudget::check_time(const char* what) {
  // Reading the clock costs ~20 ns; poll it every 64 calls.
  if ((++polls_ & 63) != 0) return;
  DI_CHECK_INPUT(std::chrono::steady_clock::now() < deadline_, "constraint compile exceeded its time limit of ",
                 limits_.max_seconds, " s (in ", what, ")");
}

void CompileBudget::add_states(size_t n, const char* what) {
  total_states_ += n;
  DI_CHECK_INPUT(total_states_ <= limits_.max_total_states, "constraint too large: more than ",
                 limits_.max_total_states, " automaton states (in ", what, ")");
  check_time(what);
}

}  // namespace deepinfer::structured
