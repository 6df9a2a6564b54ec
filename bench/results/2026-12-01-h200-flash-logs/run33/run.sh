#!/usr/bin/env bash
# Session 11, lead call 3 (integration): main with idxw's wgmma prefill indexer score (now kAuto's
# from 1024 rows; NOTES 43), gvn1's opt-in slim tensor-map gemv consumer (NOTES 41) and moea's
# scale-word ring (kAuto = kWgmmaWsS from 2048 tokens; NOTES 42): every model test, the layers with
# the indexer's logits A/B (its prefill off, then on: the hashes must agree), the changed op cases,
# the slim gemv in the op bench and at batch 1, then as many of the other op cases as the time allows.
#   bash bench/results/2026-12-01-h200-flash-logs/run33/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
el() { echo $(($(date +%s) - T0)); }
st "test_model_cuda"; gtest test_model_cuda 100
st "layers bf16 + copies, 8K: batch 1 / 8 / 256, prefill 8192 with the indexer A/B"
flash flash 150 --contexts 8192 --batches 1,8,256 --steps 3 --prefill 8192 --activations bf16 --bf16-weights on \
  --indexer-wgmma-ab --engram-compare 0 --budget-s 130
python3 bench/flash/report.py "$LOG/flash.log" > "$LOG/report.md" 2>&1
grep -E "^\| 8192 \| (1|8|256) \||tokens/s =" "$LOG/report.md" | head -12
grep -E "^prefill" "$LOG/flash.log" | grep -oE "wall_ms=[0-9.]+|indexer_wgmma=[01] logits_fnv=[0-9a-f]+" | paste - - 
st "ops: indexer, moe, slim gemv"
gtest test_ops_cuda 200 '*indexer*:*moe*:*slim*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
mv "$LOG/test_ops_cuda.log" "$LOG/test_ops_changed.log"
st "gemv n = 1 op bench, graph timing"
flash ops_gemv 60 --ops-gemv --gemv-graph --gemv-variants xs,tmapw16f16s4,tmapslim,tmapslim_t64c1,tmapprobe4 \
  --gemv-shapes wq_a,wq_b,wo_a,wo_b,shared_w1,shared_w2 --gemv-ns 1
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//' | cut -c1-150
st "layers batch 1, slim on the >= 30 MB weights"
flash flash_b1_slim 45 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on \
  --gemv tmap --gemv-tmap 4,16,1,30,1 --engram-compare 0 --budget-s 20
left=$((545 - $(el)))
if [ "$left" -gt 20 ]; then
  st "ops: the others (${left}s; without the full-size tensor-map copies)"
  gtest test_ops_cuda "$left" '*-*indexer*:*moe*:*slim*:*gemv_tmap_*5120x8192*:*gemv_tmap_*8192x4096*:*gemv_tmap_*32768x1280*'
  grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
  echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
fi
st "done"
rm -f "$LOG/report.md"
gzip "$LOG/test_ops_cuda.log" "$LOG/test_ops_changed.log" "$LOG/flash.log" "$LOG/ops_gemv.log" "$LOG/flash_b1_slim.log" 2>/dev/null
