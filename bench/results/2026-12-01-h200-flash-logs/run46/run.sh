#!/usr/bin/env bash
# Session 13, lead call 4 (the session's last device minutes): main with copy_rows' chunks, the hc tail,
# slst's one-launch selection lists (NOTES 50, opt-in) and hcst's deferred hc finish (NOTES 51, opt-in):
# their op cases, the model tests with both switches on, and the layers at batch 1 A/B.
#   bash bench/results/2026-12-01-h200-flash-logs/run46/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: hc site, copy_rows, selection lists, gemv pairs"
gtest test_ops_cuda 75 '*hc_site*:*copy_rows*:*selection_fuse*:*gemv_pair*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "test_model_cuda, DEEPINFER_HC_SITE=1 DEEPINFER_SEL_FUSE=1"
DEEPINFER_HC_SITE=1 DEEPINFER_SEL_FUSE=1 gtest test_model_cuda 70
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
st "layers b1"
flash b1_def_1 30 $B1
flash b1_both_1 30 $B1 --hc-site 1 --sel-fuse 1
flash b1_hc_1 30 $B1 --hc-site 1
flash b1_sel_1 30 $B1 --sel-fuse 1
flash b1_def_2 30 $B1
flash b1_both_2 30 $B1 --hc-site 1 --sel-fuse 1
tar -C "$LOG" -czf "$LOG/layers_b1.tgz" $(cd "$LOG" && ls b1_*.log) && rm -f "$LOG"/b1_*.log
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/test_model_cuda.log" 2>/dev/null
