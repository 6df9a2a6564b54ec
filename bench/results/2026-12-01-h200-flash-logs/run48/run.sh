#!/usr/bin/env bash
# Session 14, lead call 2: main with srcc's and src2's source chain (NOTES 54 / 59, DEEPINFER_SRC_CHAIN 1 / 2)
# and hcmx's wide PDL hc site + Engram wkv placement (NOTES 55, DEEPINFER_HC_SITE 3, DEEPINFER_ENGRAM_WKV),
# all opt-in in this binary: their op cases, the whole test_model_cuda with the candidate defaults set,
# and the A/B at batch 1 / 8 that decides the defaults.
#   bash bench/results/2026-12-01-h200-flash-logs/run48/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: hc site (wide, PDL), fused compress gather, copy_to, tmap grid cap"
gtest test_ops_cuda 70 '*hc_site*:*compress_gather*:*copy_to*:LinearGemv.*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "test_model_cuda (all), DEEPINFER_HC_SITE=3 DEEPINFER_SRC_CHAIN=2"
DEEPINFER_HC_SITE=3 DEEPINFER_SRC_CHAIN=2 gtest test_model_cuda 100
B="--contexts 8192 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
NEW="--hc-site 3 --src-chain 2"
st "layers b1: defaults vs new, alternating"
flash b1_def_1 30 $B --batches 1
flash b1_new_1 30 $B --batches 1 $NEW
flash b1_def_2 30 $B --batches 1
flash b1_new_2 30 $B --batches 1 $NEW
st "layers b1: Engram wkv 0,1,2,3 x3 in one process (new)"
flash b1_e 40 $B --batches 1 $NEW --engram-wkv-ab 0,1,2,3 --ab-rounds 3
grep -E "^(engram_wkv_ab)" "$LOG/b1_e.log" | cut -c1-190
st "layers b8: defaults vs new"
flash b8_def 30 $B --batches 8
flash b8_new 30 $B --batches 8 $NEW
tar -C "$LOG" -czf "$LOG/layers.tgz" $(cd "$LOG" && ls b1_*.log b8_*.log) && rm -f "$LOG"/b1_*.log "$LOG"/b8_*.log
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/test_model_cuda.log" 2>/dev/null
