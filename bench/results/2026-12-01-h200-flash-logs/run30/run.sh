#!/usr/bin/env bash
# Session 10, lead call 4 (integration): main with g2dt's opt-in tensor-map gemv (NOTES 38) and moe8's
# big-tile kinds with kAuto taking kWgmmaWsEf from 8192 tokens (NOTES 39): every model test, every op
# test, the layers (bf16 + copies: batch 1 / 8 / 256 and the 8K prefill).
#   bash bench/results/2026-12-01-h200-flash-logs/run30/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_model_cuda"; gtest test_model_cuda 100
st "layers bf16 + copies, 8K"
flash flash 140 --contexts 8192 --batches 1,8,256 --steps 3 --prefill 8192 --activations bf16 --bf16-weights on \
  --engram-compare 0 --budget-s 125
python3 bench/flash/report.py "$LOG/flash.log" > "$LOG/report.md" 2>&1
grep -E "^\| 8192 \| (1|8|256) \||tokens/s =" "$LOG/report.md" | head -12
st "test_ops_cuda"; gtest test_ops_cuda 330
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
st "done"
rm -f "$LOG/report.md"
gzip "$LOG/test_ops_cuda.log" "$LOG/flash.log" 2>/dev/null
