#!/usr/bin/env bash
# Builds mask_bench (release flags, no CMake) and runs it on the JSON-Schema-Test-Suite
# instances and on bench/structured/realistic_cases.py.
#
# usage: bench/structured/run_mask_bench.sh TOKENIZER_JSON [OUT_DIR]
# Needs scripts/fetch_structured_testdata.sh for the suite cases. CXXFLAGS / LDFLAGS
# are passed to the compiler and linker (e.g. for a utf8proc outside the system paths).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tok=${1:?usage: run_mask_bench.sh TOKENIZER_JSON [OUT_DIR]}
out=${2:-$root/build/bench-structured}
mkdir -p "$out"
mkdir -p "$out/obj"
ls "$root"/src/structured/*.cpp "$root/src/common/check.cpp" "$root/bench/structured/mask_bench.cpp" |
  xargs -P "$(nproc)" -I{} sh -c 'g++ -O2 -DNDEBUG -std=c++20 -I"$1/src" $CXXFLAGS -c "$2" -o "$3/obj/$(basename "$(dirname "$2")")_$(basename "$2" .cpp).o"' \
    _ "$root" {} "$out"
g++ "$out"/obj/*.o $LDFLAGS -lutf8proc -o "$out/mask_bench"
suite=${DEEPINFER_STRUCTURED_DATA:-$root/build/.cache/structured}/JSON-Schema-Test-Suite/tests/draft2020-12
python3 "$root/bench/structured/realistic_cases.py" "$out/realistic.jsonl"
echo "== realistic cases"
"$out/mask_bench" --tokenizer "$tok" --cases "$out/realistic.jsonl" --json-out "$out/realistic.json"
if [[ -d "$suite" ]]; then
  python3 "$root/bench/structured/make_suite_cases.py" "$suite" "$out/suite.jsonl"
  echo "== JSON-Schema-Test-Suite valid instances"
  "$out/mask_bench" --tokenizer "$tok" --cases "$out/suite.jsonl" --json-out "$out/suite.json"
fi
