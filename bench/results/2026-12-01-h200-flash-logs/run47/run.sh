#!/usr/bin/env bash
# Session 14, lead call 1: main at dc4fe70 (session 13's final defaults and its review refactors, never
# run on a GPU): the op cases they touch, the whole test_model_cuda, the layers at batch 1 with the
# defaults, and the selection-list fuse A/B at batch 8 (default off there since NOTES 50).
#   bash bench/results/2026-12-01-h200-flash-logs/run47/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: hc site, copy_rows, selection, gemv pairs, router / route, gemv rules, fp8 gemv"
gtest test_ops_cuda 170 '*hc_site*:*copy_rows*:*selection*:*gemv_pair*:*router*:*route*:LinearGemv.*:*fp8gemv*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "test_model_cuda (all)"
gtest test_model_cuda 110
B="--contexts 8192 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
st "layers b1, defaults"
flash b1_def_1 30 $B --batches 1
flash b1_def_2 30 $B --batches 1
st "layers b8, selection fuse A/B"
flash b8_sel0_1 30 $B --batches 8 --sel-fuse 0
flash b8_sel1_1 30 $B --batches 8 --sel-fuse 1
flash b8_sel0_2 30 $B --batches 8 --sel-fuse 0
flash b8_sel1_2 30 $B --batches 8 --sel-fuse 1
tar -C "$LOG" -czf "$LOG/layers.tgz" $(cd "$LOG" && ls b1_*.log b8_*.log) && rm -f "$LOG"/b1_*.log "$LOG"/b8_*.log
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/test_model_cuda.log" 2>/dev/null
