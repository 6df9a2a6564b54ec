#!/usr/bin/env bash
# Builds the libFuzzer targets (safetensors headers; structured-output front ends) with clang (ASan + UBSan) and runs it for a
# bounded time on a scratch copy of the seed corpus, so the committed corpus stays small.
#
# Usage: scripts/fuzz.sh [SECONDS]      (default 60)
# Env:   FUZZ_BUILD_DIR (default build-fuzz), FUZZ_CORPUS_OUT (keep the grown corpus there)
# Exits non-zero when the fuzzer reports a crash, sanitizer error, leak, timeout or OOM;
# the reproducer is left in $FUZZ_BUILD_DIR/fuzz-artifacts/.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}

generator=()
if [[ ! -f "$build/CMakeCache.txt" ]] && command -v ninja >/dev/null; then generator=(-G Ninja); fi
CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator[@]}" \
  -DDEEPINFER_FUZZ=ON -DDEEPINFER_TESTS=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target safetensors_fuzz structured_fuzz

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$root/tests/fuzz/corpus/safetensors" "$work/corpus"
artifacts="$build/fuzz-artifacts"
mkdir -p "$artifacts"

status=0
"$build/tests/fuzz/safetensors_fuzz" "$work/corpus" \
  -dict="$root/tests/fuzz/safetensors.dict" \
  -max_total_time="$seconds" -max_len=4096 -rss_limit_mb=2048 -timeout=10 \
  -artifact_prefix="$artifacts/" -print_final_stats=1 || status=$?

# The structured-output parsers (regex, GBNF, JSON Schema) and matcher, from an empty corpus.
if [[ $status -eq 0 ]]; then
  mkdir -p "$work/structured"
  "$build/tests/fuzz/structured_fuzz" "$work/structured" \
    -max_total_time="$seconds" -max_len=2048 -rss_limit_mb=2048 -timeout=10 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 || status=$?
fi

if [[ -n "${FUZZ_CORPUS_OUT:-}" ]]; then
  mkdir -p "$FUZZ_CORPUS_OUT" && cp -r "$work/corpus/." "$FUZZ_CORPUS_OUT/"
fi
if [[ $status -ne 0 ]]; then
  echo "fuzz.sh: a fuzz target failed (exit $status); reproducers in $artifacts" >&2
  exit "$status"
fi
echo "fuzz.sh: no crashes in ${seconds}s"
