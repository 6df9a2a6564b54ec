#!/usr/bin/env bash
# Session 13, lead call 3: the candidates for default (NOTES 47-48) A/B'd three times at batch 1: the
# shared expert's pair on the pair kernel too (--gemv-pair 1, whole-K 64-row tiles) and the split-order
# router (--router dmmasplit); the model tests with both on through the environment; then the layers at
# batch 1 / 8 / 256 and the 8K prefill with both on (the closing table if they become the defaults).
#   bash bench/results/2026-12-01-h200-flash-logs/run45/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: router, route"
gtest test_ops_cuda 90 '*router*:*route*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "test_model_cuda, DEEPINFER_ROUTER_SPLIT=1 DEEPINFER_GEMV_PAIR=1"
DEEPINFER_ROUTER_SPLIT=1 DEEPINFER_GEMV_PAIR=1 gtest test_model_cuda 150
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
for r in 1 2 3; do
  st "layers b1 round $r"
  flash b1_def_$r 40 $B1
  flash b1_pair1_$r 40 $B1 --gemv-pair 1
  flash b1_split_$r 40 $B1 --router dmmasplit
  flash b1_both_$r 40 $B1 --gemv-pair 1 --router dmmasplit
done
tar -C "$LOG" -czf "$LOG/layers_b1.tgz" $(cd "$LOG" && ls b1_*.log) && rm -f "$LOG"/b1_*.log
st "layers 1 / 8 / 256 + prefill 8192, both on"
flash full 150 --contexts 8192 --batches 1,8,256 --steps 3 --prefill 8192 --activations bf16 --bf16-weights on \
  --engram-compare 0 --budget-s 120 --gemv-pair 1 --router dmmasplit
python3 bench/flash/report.py "$LOG/full.log" > "$LOG/report.md" 2>&1
grep -E "^\| 8192 \| (1|8|256) \||tokens/s =" "$LOG/report.md" | head -12
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/test_model_cuda.log" "$LOG/full.log" 2>/dev/null
