#!/usr/bin/env bash
# Builds mask_bench (release flags, no CMake) and runs it on the JSON-Schema-Test-Suite
# instances and on bench/structured/realistic_cases.py.
#
# usage: bench/structured/run_mask_bench.sh TOKENIZER_JSON [OUT_DIR]
# Needs scripts/fetch_structured_testdata.sh for the suite cases.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tok=${1:?usage: run_mask_bench.sh TOKENIZER_JSON [OUT_DIR]}
out=${2:-$root/build/bench-structured}
mkdir -p "$out"
g++ -O2 -DNDEBUG -std=c++20 -I"$root/src" "$root/bench/structured/mask_bench.cpp" \
  "$root"/src/structured/*.cpp "$root/src/common/check.cpp" -lutf8proc -o "$out/mask_bench"
suite=${DEEPINFER_STRUCTURED_DATA:-$root/build/.cache/structured}/JSON-Schema-Test-Suite/tests/draft2020-12
python3 "$root/bench/structured/realistic_cases.py" "$out/realistic.jsonl"
echo "== realistic cases"
"$out/mask_bench" --tokenizer "$tok" --cases "$out/realistic.jsonl" --json-out "$out/realistic.json"
if [[ -d "$suite" ]]; then
  python3 "$root/bench/structured/make_suite_cases.py" "$suite" "$out/suite.jsonl"
  echo "== JSON-Schema-Test-Suite valid instances"
  "$out/mask_bench" --tokenizer "$tok" --cases "$out/suite.jsonl" --json-out "$out/suite.json"
fi
