#!/usr/bin/env bash
# Session 11, lead call 4: kAuto's one-token gemv on the >= 30 MB FP8 weights through the tensor-map
# kernel's slim consumer (4 stages; whole-K 64-row tiles for wo_b / wo_a; NOTES 41): its op cases
# (CPU oracle, bitwise vs the forced kTmap configuration, the routing rule), the other gemv / slim
# cases, every model test, the op bench, and the layers at batch 1 with it on / off / on.
#   bash bench/results/2026-12-01-h200-flash-logs/run34/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: kAuto's tensor-map cases, the gemv tests, xs / slim / fallback cases"
gtest test_ops_cuda 120 '*gemv_auto_tmap*:LinearGemv.*:*gemv_xs*:*slim*:*gemv_tmap_fallback*:*gemv_bulk*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
grep -E "tmap plan .*auto|gemv_auto_tmap" "$LOG/test_ops_cuda.log" | grep -E "OK|FAILED" | head -8
st "test_model_cuda"; gtest test_model_cuda 100
st "gemv n = 1 op bench, graph timing (auto = the new default, xs, slim as kTmap)"
flash ops_gemv 45 --ops-gemv --gemv-graph --gemv-variants auto,xs,tmapslim,tmapslim_t64c1 \
  --gemv-shapes wq_a,wq_b,wo_a,wo_b,shared_w1,shared_w2 --gemv-ns 1
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//' | cut -c1-150
i=0
for on in 1 0 1 0; do
  i=$((i + 1)); st "layers bf16 + copies, 8K, batch 1, --gemv-tmap-auto $on"
  flash flash_b1_$i 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on \
    --gemv-tmap-auto $on --engram-compare 0 --budget-s 15
done
st "done"
cd "$LOG" && tar -czf flash_b1.tgz flash_b1_*.log && rm -f flash_b1_*.log
gzip test_ops_cuda.log ops_gemv.log 2>/dev/null
