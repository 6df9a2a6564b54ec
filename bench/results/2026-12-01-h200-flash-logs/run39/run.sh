#!/usr/bin/env bash
# Session 12, lead call 4: kAuto's slim gemv at start order 3 (NOTES 44): its cases and every model
# test; the op bench of the 2.6-12 MB weights and the Engram wkv (157 MB) at orders 0 / 3 / 4; the layers at batch 1 with kAuto's
# size floor at 30 MiB (the default) and 10 MiB (the shared expert's weights on the slim kernel too),
# alternating.
#   bash bench/results/2026-12-01-h200-flash-logs/run39/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: kAuto's tensor-map cases, LinearGemv"
gtest test_ops_cuda 100 '*gemv_auto_tmap*:LinearGemv.*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
st "test_model_cuda"; gtest test_model_cuda 100
st "gemv n = 1 op bench, graph timing: the 6-12 MB weights"
flash ops_gemv 90 --ops-gemv --gemv-graph --gemv-shapes wq_a,wkv,shared_w1,shared_w2,idx_wq_b,engram_wkv --gemv-ns 1 \
  --gemv-variants auto,xs,tmapslim,tmapslim_o3,tmapslim_o4,tmapslim_t64c1,tmapslim_t64c1_o3,tmapslim_t64c1_o4
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//; s/ GBps=[^ ]+//' | cut -c1-130
i=0
for mb in 0 10 0 10 0 10; do
  i=$((i + 1))
  st "layers bf16 + copies, 8K, batch 1, kAuto floor $mb MiB (0: 30)"
  flash flash_b1_$i 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on \
    --gemv-tmap-auto-min-mb $mb --engram-compare 0 --budget-s 15
done
st "done"
cd "$LOG" && tar -czf flash_b1.tgz flash_b1_*.log && rm -f flash_b1_*.log
gzip test_ops_cuda.log ops_gemv.log test_model_cuda.log 2>/dev/null
