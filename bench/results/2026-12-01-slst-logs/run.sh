#!/usr/bin/env bash
# helper slst (NOTES 50): the one-launch selection lists: op cases, the layers at batch 1 off / on,
# test_model_cuda with DEEPINFER_SEL_FUSE=1.
set -uo pipefail
PACK=.gpubin-slst source bench/flash/device_lib.sh "$1"
st "ops: selection"
gtest test_ops_cuda 25 '*selection_fuse*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
grep -E "mismatches=[1-9]|one-launch path did not run" "$LOG/test_ops_cuda.log" | head -5
st "layers batch 1, sel-fuse 0"
flash flash_b1_off 20 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 10 --sel-fuse 0
st "layers batch 1, sel-fuse 1"
flash flash_b1_on 20 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 10 --sel-fuse 1
for f in off on; do python3 bench/flash/report.py "$LOG/flash_b1_$f.log" > "$LOG/report_b1_$f.md" 2>&1; echo "$f:"; grep -E "^\| 8192 \| 1 \|" "$LOG/report_b1_$f.md" | head -3; done
st "test_model_cuda, DEEPINFER_SEL_FUSE=1"
left=$((96 - ($(date +%s) - T0)))
export DEEPINFER_SEL_FUSE=1
gtest test_model_cuda $((left > 10 ? left : 10))
unset DEEPINFER_SEL_FUSE
echo "model tests passed: $(grep -c '^\[       OK \]' "$LOG/test_model_cuda.log") failed: $(grep -c '^\[  FAILED  \]' "$LOG/test_model_cuda.log")"
grep -E "^\[ RUN|^\[       OK|FAILED" "$LOG/test_model_cuda.log" | tail -4
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/test_model_cuda.log" "$LOG/flash_b1_off.log" "$LOG/flash_b1_on.log" 2>/dev/null
