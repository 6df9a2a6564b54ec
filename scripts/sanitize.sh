#!/usr/bin/env bash
# CPU test suites under clang's sanitizers; any report fails the run.
#
#   scripts/sanitize.sh            AddressSanitizer + UndefinedBehaviorSanitizer, into build-asan/:
#                                  the suites that handle model state and user input -- the model
#                                  (CPU oracle), the engine (batching, prefix-cache replay,
#                                  preemption, async scheduling), the HTTP server and OpenAI API
#                                  layer, the scheduler, sampling, structured outputs, the
#                                  tokenizer, safetensors, common. Part of scripts/test.sh. Why: an
#                                  out-of-bounds read in the host's Engram hash after a replay reset
#                                  (bench/flash/NOTES.md 61) passed every test for sessions, read
#                                  heap memory before a vector, and showed only as logits that
#                                  differed between runs.
#   scripts/sanitize.sh thread     ThreadSanitizer, into build-tsan/: the threaded suites -- the
#                                  HTTP server (Beast io threads, streaming callbacks from the
#                                  engine's thread), the engine and its async front end, the thread
#                                  pool. Not part of scripts/test.sh (a third full build of the core
#                                  would take CI past its time; ~25 min here); run it after changing
#                                  threaded code.
#
# Env: SANITIZE_BUILD_DIR (default build-asan / build-tsan), SANITIZE_FILTER (a gtest filter)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-address} in
  address)
    build=${SANITIZE_BUILD_DIR:-$root/build-asan}
    flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
    label="ASan + UBSan"
    suites=(test_common test_io test_model test_sched test_sample test_structured test_tokenizer test_runtime test_server)
    export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 ;;
  thread)
    build=${SANITIZE_BUILD_DIR:-$root/build-tsan}
    flags="-fsanitize=thread -fno-omit-frame-pointer"
    label="TSan"
    suites=(test_common test_server test_runtime)
    # halt_on_error: the first race fails the suite with its report (both stacks), not a
    # summary at exit.
    export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ;;
  *) echo "usage: scripts/sanitize.sh [address|thread]" >&2; exit 2 ;;
esac
generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDEEPINFER_TESTS=ON -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
cmake --build "$build" --target "${suites[@]}" -- -j "$(nproc)"
export DEEPINFER_FIXTURES_DIR="$root/tests/fixtures"
for t in "${suites[@]}"; do
  echo "== $t ($label)"
  (cd "$build/tests" && "./$t" --gtest_brief=1 ${SANITIZE_FILTER:+--gtest_filter="$SANITIZE_FILTER"})
done
echo "sanitize ($label): all passed"
