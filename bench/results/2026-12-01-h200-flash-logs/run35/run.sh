#!/usr/bin/env bash
# Session 11, lead call 5: the review refactors on a GPU: the indexer's split-operand dots and head-sum
# epilogue as one pair of functions for the grouped-rows kernel and the wgmma kernel's fallback (PTX
# differs: register allocation), one sm_90a device check (smxx_device.h) for the attention, indexer and
# MoE wgmma kernels, the gemv dispatch's all-or-none launcher. Their op cases, the model tests, the
# prefill score's old-vs-new bits and times.
#   bash bench/results/2026-12-01-h200-flash-logs/run35/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: indexer, attention wgmma, MoE big tiles, gemv dispatch"
gtest test_ops_cuda 110 '*indexer*:*attention_bf16_wgmma*:*moe_experts_fp4tc*:*gemv_auto_tmap*:LinearGemv.*:*gemv_tmap_fallback*:*gemv_tc*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
st "test_model_cuda"; gtest test_model_cuda 90
st "prefill index score, grouped vs wgmma"
flash idx 35 --index-score-prefill
grep -E "^op index_score" "$LOG/idx.log"
st "done"
gzip "$LOG/test_ops_cuda.log" 2>/dev/null
