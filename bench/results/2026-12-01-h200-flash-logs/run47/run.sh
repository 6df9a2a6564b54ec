#!/usr/bin/env bash
# Session 13, lead call 5 (the last ~90 s of device time): the model tests at the final defaults (the
# one-launch selection lists and the deferred hc finish on without any environment switch).
#   bash bench/results/2026-12-01-h200-flash-logs/run47/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_model_cuda, defaults"
gtest test_model_cuda 50
st "done"
gzip "$LOG/test_model_cuda.log" 2>/dev/null
