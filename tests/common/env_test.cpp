// common/env.h: the one parser the model's load check and the kernels' own readers share.
#include "common/env.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>

namespace deepinfer {
namespace {

constexpr const char* kName = "DEEPINFER_TEST_ENV_DIGIT";

TEST(EnvDigit, UnsetAndEmptyAreNotSet) {
  unsetenv(kName);
  EXPECT_FALSE(env_digit(kName, 0, 1).set);
  setenv(kName, "", 1);
  const EnvDigit e = env_digit(kName, 0, 1);
  EXPECT_FALSE(e.set);
  EXPECT_FALSE(e.valid);
  unsetenv(kName);
}

TEST(EnvDigit, AcceptsOneDigitInRangeOnly) {
  for (int v = 0; v <= 8; ++v) {
    const std::string s(1, char('0' + v));
    setenv(kName, s.c_str(), 1);
    const EnvDigit e = env_digit(kName, 0, 8);
    EXPECT_TRUE(e.set && e.valid) << s;
    EXPECT_EQ(e.value, v);
  }
  for (const char* bad : {"9", "01", "-1", "1 ", " 1", "on", "x", "10", "/", ":"}) {
    setenv(kName, bad, 1);
    const EnvDigit e = env_digit(kName, 0, 8);
    EXPECT_TRUE(e.set) << bad;
    EXPECT_FALSE(e.valid) << bad;
    EXPECT_EQ(e.text, bad);
  }
  setenv(kName, "2", 1);
  EXPECT_FALSE(env_digit(kName, 0, 1).valid);
  EXPECT_FALSE(env_digit(kName, 3, 8).valid);
  EXPECT_TRUE(env_digit(kName, 2, 2).valid);
  unsetenv(kName);
}

// resolve_env_switch: the setter's value wins; otherwise the variable is read once (map sees
// unset and invalid values too) and kept, until a setter stores -1 again.
TEST(EnvSwitch, SetterThenVariableReadOnce) {
  std::atomic<int> slot{-1};
  int reads = 0;
  const auto map = [&reads](const EnvDigit& e) {
    ++reads;
    return e.valid ? e.value : 7;
  };
  unsetenv(kName);
  EXPECT_EQ(resolve_env_switch(slot, kName, 0, 3, map), 7);  // unset: the default
  setenv(kName, "2", 1);
  EXPECT_EQ(resolve_env_switch(slot, kName, 0, 3, map), 7);  // kept: the variable is not read again
  EXPECT_EQ(reads, 1);
  slot.store(-1);  // a setter going back to the variable
  EXPECT_EQ(resolve_env_switch(slot, kName, 0, 3, map), 2);
  setenv(kName, "9", 1);
  slot.store(-1);
  EXPECT_EQ(resolve_env_switch(slot, kName, 0, 3, map), 7);  // invalid: mapped like unset here
  slot.store(1);  // a setter's value
  EXPECT_EQ(resolve_env_switch(slot, kName, 0, 3, map), 1);
  EXPECT_EQ(reads, 3);
  unsetenv(kName);
}

}  // namespace
}  // namespace deepinfer
