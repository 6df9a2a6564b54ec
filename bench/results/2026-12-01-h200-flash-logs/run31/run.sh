#!/usr/bin/env bash
# Session 10, lead call 6: ea63fa0's host-only refactor (one cached device-attribute query for the
# launchers' SM counts) on the GPU: the op cases of every launcher it touched (bulk / persist / xs /
# tc gemv, fp8 mode's gemv, top-k, one tensor-map case).
#   bash bench/results/2026-12-01-h200-flash-logs/run31/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_ops_cuda (launchers using device_sm_count)"
gtest test_ops_cuda 90 '*topk*:*gemv_bulk*:*gemv_persist*:*fp8gemv*:LinearGemv.*:*gemv_xs_*:*gemv_tc_*:*gemv_tmap_fp8_n1_2304x5120*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
gzip "$LOG/test_ops_cuda.log"
