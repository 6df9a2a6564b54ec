#!/usr/bin/env bash
# Session 12, lead call 3: the slim gemv's gate on an mbarrier, and head starts of one / two stages
# before it (orders 3 / 4; NOTES 44): the order cases, kAuto's cases, the op bench, and the layers at
# batch 1 with kAuto's order 2 / 3 / 4 alternating.
#   bash bench/results/2026-12-01-h200-flash-logs/run38/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: the slim order cases, kAuto's tensor-map cases, LinearGemv"
gtest test_ops_cuda 150 '*slim_order*:*gemv_auto_tmap*:LinearGemv.*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "gemv n = 1 op bench, graph timing"
flash ops_gemv 120 --ops-gemv --gemv-graph --gemv-shapes wq_b,wo_a,wo_b,shared_w1,shared_w2 --gemv-ns 1 \
  --gemv-variants auto,tmapslim_o2,tmapslim_o3,tmapslim_o4,tmapslim_t64c1_o2,tmapslim_t64c1_o3,tmapslim_t64c1_o4
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//; s/ GBps=[^ ]+//' | cut -c1-130
i=0
for o in 2 3 4 2 3 4; do
  i=$((i + 1))
  st "layers bf16 + copies, 8K, batch 1, kAuto order $o"
  flash flash_b1_$i 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on \
    --gemv-tmap-auto-order $o --engram-compare 0 --budget-s 15
done
st "done"
cd "$LOG" && tar -czf flash_b1.tgz flash_b1_*.log && rm -f flash_b1_*.log
gzip test_ops_cuda.log ops_gemv.log 2>/dev/null
