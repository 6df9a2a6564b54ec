#!/usr/bin/env bash
# helper hcmx (NOTES 55): the wide hc site (DEEPINFER_HC_SITE 2 / 3) and the Engram wkv placement
# (DEEPINFER_ENGRAM_WKV 1..3): op cases, the layers at batch 1 A/B'd (in two processes, each with
# in-process rounds of every mode), the model tests with mode 3.
#   bash .gpubin-hcmx/run.sh LOG_DIR   (carry .gpubin-hcmx)
set -uo pipefail
PACK=.gpubin-hcmx source bench/flash/device_lib.sh "$1"
st "ops: hc sites, tmap cap"
gtest test_ops_cuda 25 '*hc_site*:LinearGemv.TmapMaxCtasChangesNoBit'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log") failed: $(grep -c '^\[  FAILED  \]' "$LOG/test_ops_cuda.log")"
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
st "layers A: loaded 1; in-process hc 1,3,2 x2, engram 0,1,2,3 x2"
flash b1_a 30 $B1 --hc-site 1 --hc-site-ab 1,3,2 --engram-wkv-ab 0,1,2,3 --ab-rounds 2
grep -E "^(hc_site_ab|engram_wkv_ab|decode_graph)" "$LOG/b1_a.log" | cut -c1-190
st "layers B: loaded 3; in-process hc 3,1,2 x2"
flash b1_b 28 $B1 --hc-site 3 --hc-site-ab 3,1,2 --ab-rounds 2
grep -E "^(hc_site_ab|decode_graph)" "$LOG/b1_b.log" | cut -c1-190
st "test_model_cuda, DEEPINFER_HC_SITE=3"
DEEPINFER_HC_SITE=3 gtest test_model_cuda 36 '*CudaHcSite*:*CudaGraphs*:*BadEnvironment*:*CudaOverlap*'
echo "tests passed: $(grep -c '^\[       OK \]' "$LOG/test_model_cuda.log")"
LEFT=$((104 - ($(date +%s) - T0)))
if [ "$LEFT" -gt 19 ]; then
  st "layers C: loaded 1 ($LEFT s left)"
  flash b1_c $LEFT $B1 --hc-site 1
fi
st "done"
tar -C "$LOG" -czf "$LOG/logs.tgz" $(cd "$LOG" && ls *.log) && rm -f "$LOG"/*.log
