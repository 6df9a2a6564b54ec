// The DEEPINFER_* one-digit switches that measurements flip through the environment.
//
// Why one parser: a switch is read in two places. The model checks it at load and turns a bad
// value into an InputError naming the switch (a typo must not silently measure the default);
// the kernel library reads it where the kernel is chosen, cannot throw (its errors are
// cudaError_t) and also runs without a model (op tests set the switch directly). Both ask
// this function, so they cannot disagree about which values are accepted.
#pragma once

#include <atomic>
#include <cstdlib>
#include <string>

namespace deepinfer {

struct EnvDigit {
  bool set = false;    // present and not empty
  bool valid = false;  // one digit in [lo, hi]
  int value = 0;       // the digit, when valid
  std::string text;    // the raw value, for messages
};

inline EnvDigit env_digit(const char* name, int lo, int hi) {
  EnvDigit d;
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return d;
  d.set = true;
  d.text = v;
  if (d.text.size() == 1 && d.text[0] >= '0' + lo && d.text[0] <= '0' + hi) {
    d.valid = true;
    d.value = d.text[0] - '0';
  }
  return d;
}

// A kernel-side switch read lazily: `slot` holds a setter's value (>= 0), or -1 until the first
// read, which stores map(env_digit(name, lo, hi)) -- map turns the variable (unset or invalid
// included: the model's load has refused invalid values already) into the value. Later reads
// return the stored value; a setter storing -1 makes the next read consult the variable again.
template <class Map>
int resolve_env_switch(std::atomic<int>& slot, const char* name, int lo, int hi, Map map) {
  int v = slot.load();
  if (v < 0) {
    v = map(env_digit(name, lo, hi));
    slot.store(v);
  }
  return v;
}

}  // namespace deepinfer
