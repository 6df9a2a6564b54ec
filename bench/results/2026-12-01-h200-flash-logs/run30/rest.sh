#!/usr/bin/env bash
# Session 10, lead call 5: the 85 op cases that run 30's test_ops_cuda did not reach in its 330 s
# budget (it stopped at the first of them; the 582 before passed, 0 failed).
#   bash bench/results/2026-12-01-h200-flash-logs/run30/rest.sh LOG_DIR   (carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
D=bench/results/2026-12-01-h200-flash-logs/run30
st "test_ops_cuda, the rest"; gtest test_ops_cuda 120 "$(cat $D/rest_filter.txt)"
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
gzip "$LOG/test_ops_cuda.log"
