#!/usr/bin/env bash
# Session 9, lead call 2: after run 28, host validation of DEEPINFER_FP8_GEMV(_LEAN) (new model
# test) and mma_e4m3 moved to smxx_linear_fp8_common.cuh (SASS unchanged): every model test and
# the fp8 op cases.
#   bash bench/results/2026-12-01-h200-flash-logs/run29/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int only)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_model_cuda"; gtest test_model_cuda 100
st "test_ops_cuda (fp8)"; gtest test_ops_cuda 60 '*fp8*'
st "done"
