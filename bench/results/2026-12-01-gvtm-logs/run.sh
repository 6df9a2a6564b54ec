#!/usr/bin/env bash
# Session 9, helper gvtm (NOTES 37): the bulk-copy-ring one-token FP8 gemv (GemvKind::kTma).
# Its op cases first, the gemv op bench (stream / xs / tma at n = 1), the layers at batch 1
# (8K, bf16 + copies) with --gemv auto and --gemv tma, test_model_cuda whole, then the rest of
# test_ops_cuda (everything but the tma cases, run first) in the time left.
#   bash .gpubin-gvtm/run.sh LOG_DIR   (after BUILD=build-gpu OUTDIR=/work/main/.gpubin-gvtm bench/flash/pack_all.sh; carry .gpubin-gvtm)
set -uo pipefail
PACK=.gpubin-gvtm source bench/flash/device_lib.sh "$1"
st "test_ops_cuda: the tma cases"; gtest test_ops_cuda 60 '*gemv_tma*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
mv "$LOG/test_ops_cuda.log" "$LOG/test_ops_tma.log"
st "ops-gemv n = 1"
flash ops_gemv 70 --ops-gemv --gemv-variants stream,xs,tma --gemv-shapes wq_a,wkv,wq_b,wo_a,wo_b,shared_w1,shared_w2 --gemv-ns 1
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//' | cut -c1-150
for g in auto tma; do
  st "layers bf16 + copies, 8K, batch 1, --gemv $g"
  flash flash_b1_$g 60 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --gemv $g \
    --engram-compare 0 --budget-s 40
  python3 bench/flash/report.py "$LOG/flash_b1_$g.log" 2>&1 | grep -E "^\| 8192 \| 1 \||tokens/s =" | head -4
done
st "test_model_cuda"; gtest test_model_cuda 75
left=$((315 - ($(date +%s) - T0)))
st "test_ops_cuda: the rest (${left}s)"; gtest test_ops_cuda "$left" '-*gemv_tma*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
grep -cE "^\[       OK \]" "$LOG/test_ops_cuda.log"
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG"/flash_b1_*.log "$LOG/ops_gemv.log" 2>/dev/null
