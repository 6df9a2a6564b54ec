#!/usr/bin/env bash
# Session 8, lead call 2 (integration of the session's helpers): every model test, the layers
# (bf16 + copies, 8K: batch 1 / 8 / 256 and the 8K prefill), then every op test.
#   bash bench/results/2026-11-30-h200-flash-logs/run26/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int only)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_model_cuda"; gtest test_model_cuda 90
st "layers bf16 + copies, 8K"
flash flash 130 --contexts 8192 --batches 1,8,256 --steps 3 --prefill 8192 --activations bf16 --bf16-weights on \
  --engram-compare 0 --budget-s 120
python3 bench/flash/report.py "$LOG/flash.log" > "$LOG/report.md" 2>&1
grep -E "^\| 8192 \| (1|8|256) \||tokens/s =" "$LOG/report.md" | head -12
st "test_ops_cuda"; gtest test_ops_cuda 240
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/flash.log" 2>/dev/null
