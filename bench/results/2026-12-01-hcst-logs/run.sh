#!/usr/bin/env bash
# Helper hcst (NOTES 51), its one device call: the hc site's deferred finish (DEEPINFER_HC_SITE=1).
#   bash .gpubin-hcst/run.sh LOG_DIR   (after bench/flash/pack_all.sh into .gpubin-hcst; carry .gpubin-hcst)
set -uo pipefail
PACK=.gpubin-hcst source bench/flash/device_lib.sh "$1"
st "ops: hc site one launch"
gtest test_ops_cuda 20 '*hc_site_one_launch*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 10"
st "layers b1 off"
flash b1_off 25 $B1 --hc-site 0
st "layers b1 on"
flash b1_on 25 $B1 --hc-site 1
st "test_model_cuda, DEEPINFER_HC_SITE=1"
DEEPINFER_HC_SITE=1 gtest test_model_cuda 34 '*CudaHcSite*:*CudaGraphs*:*BadEnvironment*:*CudaOverlap*'
echo "tests passed: $(grep -c '^\[       OK \]' "$LOG/test_model_cuda.log")"
# A CUPTI timeline of the switch on (bench/flash/timeline.py offline) if the call's ~95 s allow it.
LEFT=$((93 - ($(date +%s) - T0)))
if [ "$LEFT" -gt 18 ]; then
  st "layers b1 on, traced ($LEFT s left)"
  flash b1_on_trace $LEFT $B1 --hc-site 1 --trace-csv "$LOG/b1_on.csv"
  gzip "$LOG/b1_on.csv" 2>/dev/null
fi
st "done"
tar -C "$LOG" -czf "$LOG/logs.tgz" test_ops_cuda.log test_model_cuda.log b1_off.log b1_on.log $(cd "$LOG" && ls b1_on_trace.log 2>/dev/null) 2>/dev/null && \
  rm -f "$LOG"/test_ops_cuda.log "$LOG"/test_model_cuda.log "$LOG"/b1_off.log "$LOG"/b1_on.log "$LOG"/b1_on_trace.log
