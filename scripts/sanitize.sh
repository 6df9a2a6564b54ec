#!/usr/bin/env bash
# The CPU test suites that handle model state and user input -- the model (CPU oracle), the
# engine (batching, prefix-cache replay, preemption, async scheduling), the HTTP server and
# OpenAI API layer (Beast io threads, streaming), the scheduler, sampling,
# structured outputs, the tokenizer, safetensors, common -- built with clang's AddressSanitizer +
# UndefinedBehaviorSanitizer into build-asan/, and run; any report fails the run. Why: an
# out-of-bounds read in the host's Engram hash after a replay reset (bench/flash/NOTES.md 61)
# passed every test for sessions, read heap memory before a vector, and showed only as logits
# that differed between runs.
#
# Usage: scripts/sanitize.sh            Env: SANITIZE_BUILD_DIR (default build-asan)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SANITIZE_BUILD_DIR:-$root/build-asan}
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDEEPINFER_TESTS=ON -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
suites=(test_common test_io test_model test_sched test_sample test_structured test_tokenizer test_runtime test_server)
cmake --build "$build" --target "${suites[@]}" -- -j "$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
export DEEPINFER_FIXTURES_DIR="$root/tests/fixtures"
for t in "${suites[@]}"; do
  echo "== $t (ASan + UBSan)"
  (cd "$build/tests" && "./$t" --gtest_brief=1)
done
echo "sanitize: all passed"
