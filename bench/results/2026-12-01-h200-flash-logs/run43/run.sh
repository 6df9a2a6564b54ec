#!/usr/bin/env bash
# Session 13, lead call 1: c4ae99e (the indexer's dots_split_with refactor, compiled but not run in
# session 12) on the GPU: every indexer / fused index-query op case, the model tests, and the layers at
# batch 1 as this session's baseline.
#   bash bench/results/2026-12-01-h200-flash-logs/run43/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: indexer"
gtest test_ops_cuda 150 '*index*:*Index*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "test_model_cuda"
gtest test_model_cuda 150
st "layers batch 1"
flash flash_b1 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20
python3 bench/flash/report.py "$LOG/flash_b1.log" > "$LOG/report_b1.md" 2>&1
grep -E "^\| 8192 \| 1 \|" "$LOG/report_b1.md" | head -3
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/test_model_cuda.log" "$LOG/flash_b1.log" 2>/dev/null
