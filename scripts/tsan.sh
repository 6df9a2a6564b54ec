#!/usr/bin/env bash
# The threaded CPU suites -- the HTTP server and API layer (Boost.Beast io threads, the
# router, streaming callbacks from the engine's thread), the engine and its async front
# end, the thread pool -- built with clang's ThreadSanitizer into build-tsan/ and run; any
# data race report fails the run. Not part of scripts/test.sh (a third full build of the
# core would take CI past its time); run it after changing threaded code.
#
# Usage: scripts/tsan.sh [gtest filter]     Env: TSAN_BUILD_DIR (default build-tsan)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${TSAN_BUILD_DIR:-$root/build-tsan}
flags="-fsanitize=thread -fno-omit-frame-pointer"
generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDEEPINFER_TESTS=ON -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
suites=(test_common test_server test_runtime)
cmake --build "$build" --target "${suites[@]}" -- -j "$(nproc)"
# halt_on_error: the first race fails the suite with its report (two stacks and the
# allocation) rather than a summary at exit.
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
export DEEPINFER_FIXTURES_DIR="$root/tests/fixtures"
for t in "${suites[@]}"; do
  echo "== $t (TSan)"
  (cd "$build/tests" && "./$t" --gtest_brief=1 ${1:+--gtest_filter="$1"})
done
echo "tsan: all passed"
