#!/usr/bin/env bash
# Session 11, lead call 1: the commits that session 10 could not run on a GPU (ea63fa0: one cached
# device-attribute query for the gemv / top-k launchers; c87b790: the tensor-map gemv's shared bf16x
# helpers; af34109: the DEEPINFER_* switches read once at load): every model test, the op cases of
# top-k and the gemvs (without 11 of the 59 tensor-map cases' full-size copies whose CPU oracles take
# 7-10 s each; one full-size wq_b case of the default tensor-map variant stays), and batch 1 in the layers.
#   bash bench/results/2026-12-01-h200-flash-logs/run31/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_model_cuda"; gtest test_model_cuda 100
st "test_ops_cuda topk + gemv"
gtest test_ops_cuda 170 '*topk*:*gemv*:*fp8gemv*-*gemv_tmap_*5120x8192*:*gemv_tmap_*8192x4096*:*gemv_tmap_fp8_n1_32768x1280*:*gemv_tmap_f16_fp8_n1_32768x1280*:*gemv_tmap_w16_fp8_n1_32768x1280*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
st "layers bf16 + copies, 8K, batch 1"
flash flash 70 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 55
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/flash.log" 2>/dev/null
