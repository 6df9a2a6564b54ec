// Three error tiers (STYLE.md 2.9):
//   1. DI_CHECK_INPUT: user-controlled input (configs, checkpoints, requests) is wrong.
//      Throws deepinfer::InputError with a one-line message naming the problem; the
//      caller (CLI, server) reports it and carries on or exits cleanly.
//   2. DI_CHECK: an internal invariant; always on; aborts with file, line, condition.
//   3. DI_DCHECK: the same, compiled out of release builds (hot paths).
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace deepinfer {

// An error caused by input the user controls. what() is a single line.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& msg) : std::runtime_error(msg) {}
};

// Concatenates its arguments with operator<< (no <format> in our baseline compiler).
template <typename... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

[[noreturn]] void check_failed(const char* file, int line, const char* cond, const std::string& msg);

}  // namespace deepinfer

#define DI_CHECK_INPUT(cond, ...)                                        \
  do {                                                                   \
    if (!(cond)) throw ::deepinfer::InputError(::deepinfer::str_cat(__VA_ARGS__)); \
  } while (0)

#define DI_CHECK(cond, ...)                                                                    \
  do {                                                                                         \
    if (!(cond)) ::deepinfer::check_failed(__FILE__, __LINE__, #cond, ::deepinfer::str_cat("" __VA_OPT__(,) __VA_ARGS__)); \
  } while (0)

#ifdef NDEBUG
#define DI_DCHECK(cond, ...) \
  do {                       \
  } while (0)
#else
#define DI_DCHECK(cond, ...) DI_CHECK(cond, __VA_ARGS__)
#endif
