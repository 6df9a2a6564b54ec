#!/usr/bin/env bash
# Session 12, lead call 7: the layers at the session's final code (binaries of 1ecd0e7): batch 1 / 8 / 256
# at 8K and the 8K prefill, bf16 + copies, for the closing table.
#   bash bench/results/2026-12-01-h200-flash-logs/run42/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "layers bf16 + copies, 8K: batch 1 / 8 / 256, prefill 8192"
flash flash 170 --contexts 8192 --batches 1,8,256 --steps 3 --prefill 8192 --activations bf16 --bf16-weights on \
  --engram-compare 0 --budget-s 140
python3 bench/flash/report.py "$LOG/flash.log" > "$LOG/report.md" 2>&1
grep -E "^\| 8192 \| (1|8|256) \||tokens/s =" "$LOG/report.md" | head -12
st "done"
gzip "$LOG/flash.log" 2>/dev/null
