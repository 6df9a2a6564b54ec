#!/usr/bin/env bash
# Helper pair (NOTES 47): the gemv pairs on the slim tensor-map kernel. Op cases, the pair op bench
# (graph timing), the layers at batch 1 with the pair rule off / on / outside branches (twice each,
# interleaved) and the 2-stage ring once, test_model_cuda with DEEPINFER_GEMV_PAIR=1.
#   bash .gpubin-pair/run.sh LOG_DIR   (carry .gpubin-pair)
set -uo pipefail
PACK=.gpubin-pair source bench/flash/device_lib.sh "$1"
st "ops: pair cases"
gtest test_ops_cuda 60 '*gemv_pair*:*PairRule*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "op bench: pairs"
flash ops_gemv 50 --ops-gemv --gemv-graph --gemv-ns 1 --gemv-shapes wq_a,wkv,shared_w1 --gemv-variants auto,tmapslim_o3,pairs
grep -E "^op gemv" "$LOG/ops_gemv.log" | grep -E "act=bf16|gemv_pair" | cut -c1-230
L="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
for r in 1 2; do
  for m in 0 1 2; do
    st "layers pair=$m run $r"
    flash b1_p${m}_r$r 40 $L --gemv-pair $m
  done
done
st "layers pair=1 2 stages"
flash b1_p1s2 40 $L --gemv-pair 1 --gemv-pair-config 2
st "test_model_cuda pair=1"
DEEPINFER_GEMV_PAIR=1 gtest test_model_cuda 100
st "done"
cd "$LOG" && tar -czf layers.tgz b1_*.log && rm -f b1_*.log && gzip test_ops_cuda.log test_model_cuda.log ops_gemv.log 2>/dev/null
ls "$LOG"
