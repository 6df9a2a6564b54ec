#!/usr/bin/env bash
# Session 12, lead call 5: kAuto's whole-K 64-row tiles over several rounds where the plan would take
# clusters (NOTES 44, change 4): kAuto's cases (the new two-round case), the op bench with the rule on
# and off, and the layers at batch 1 with it on / off alternating.
#   bash bench/results/2026-12-01-h200-flash-logs/run40/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: kAuto's tensor-map cases, LinearGemv, the slim order cases"
gtest test_ops_cuda 150 '*gemv_auto_tmap*:LinearGemv.*:*slim_order*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
grep -E "tmap plan .*9216x6144" "$LOG/test_ops_cuda.log" | head -4
for r in 1 0; do
  st "gemv n = 1 op bench, graph timing, kAuto rounds $r"
  flash ops_gemv_r$r 60 --ops-gemv --gemv-graph --gemv-shapes wq_b,wo_a,wo_b,engram_wkv --gemv-ns 1 \
    --gemv-variants auto --gemv-tmap-auto-rounds $r
  grep -E "^op gemv " "$LOG/ops_gemv_r$r.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//; s/ GBps=[^ ]+//' | cut -c1-130
done
i=0
for r in 1 0 1 0 1 0; do
  i=$((i + 1))
  st "layers bf16 + copies, 8K, batch 1, kAuto rounds $r"
  flash flash_b1_$i 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on \
    --gemv-tmap-auto-rounds $r --engram-compare 0 --budget-s 20
done
st "done"
cd "$LOG" && tar -czf flash_b1.tgz flash_b1_*.log && rm -f flash_b1_*.log
gzip test_ops_cuda.log ops_gemv_r1.log ops_gemv_r0.log 2>/dev/null
