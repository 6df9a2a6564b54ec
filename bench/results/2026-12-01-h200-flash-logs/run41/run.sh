#!/usr/bin/env bash
# Session 12, lead call 6 (integration): main with moex's MoE kind deletion (NOTES 45), the launch
# attribute helper (LaunchAttrs: top-k, small attention, FP8 x FP8 gemv, tensor-map gemv) and the shared
# big gemv test weights: the op cases of every changed family, then the model tests as time allows.
#   bash bench/results/2026-12-01-h200-flash-logs/run41/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
el() { echo $(($(date +%s) - T0)); }
st "ops: moe, top-k, small attention, FP8 x FP8 gemv, tensor-map gemv, kAuto's"
gtest test_ops_cuda 230 '*moe*:*Moe*:*topk*:*sink_attention*:*linear_fp8gemv*:*gemv_tmap*:*gemv_auto*:LinearGemv.*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
left=$((300 - $(el)))
if [ "$left" -gt 60 ]; then st "test_model_cuda (${left}s)"; gtest test_model_cuda "$left"; fi
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/test_model_cuda.log" 2>/dev/null
