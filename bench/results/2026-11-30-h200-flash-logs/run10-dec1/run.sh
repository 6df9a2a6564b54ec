#!/usr/bin/env bash
# dec1's one device call: the Flash-layer decode bench at 4K (eager, graph replay with
# layer events, graph replay without), then test_model_cuda beside test_ops_cuda (the
# fused cases first, then the rest). Logs to $1. Each part under timeout.
set -u
LOG="$1"; mkdir -p "$LOG"
BIN=/tmp/dec1bin
rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf .gpubin-dec1/dec1.tar.xz || exit 1
export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; cat "$BIN/commit.txt"; } >"$LOG/machine.txt" 2>&1
echo "== flash $(date +%T)"
timeout "${FLASH_T:-100}" "$BIN/flash_layers" --contexts 4096 --batches 1,8,256 --steps 5 --prefill 0 \
  --engram-compare 0 --budget-s "${BUDGET:-75}" >"$LOG/flash.log" 2>"$LOG/flash.err"
echo "flash rc=$?" | tee -a "$LOG/rc.txt"
grep -E "^decode|^graph_nodes|^skip|^setup|^done" "$LOG/flash.log" | cut -c1-400
tail -3 "$LOG/flash.err"
echo "== tests $(date +%T)"
( timeout "${TEST_T:-80}" "$BIN/test_model_cuda" >"$LOG/model_cuda.log" 2>&1; echo "model_cuda rc=$?" >>"$LOG/rc.txt" ) &
( timeout 30 "$BIN/test_ops_cuda" --gtest_filter='*fused*' >"$LOG/ops_cuda_fused.log" 2>&1; echo "ops_cuda_fused rc=$?" >>"$LOG/rc.txt"
  timeout $(( ${TEST_T:-80} - 25 )) "$BIN/test_ops_cuda" --gtest_filter='-*fused*' >"$LOG/ops_cuda.log" 2>&1; echo "ops_cuda_rest rc=$?" >>"$LOG/rc.txt" ) &
wait
cat "$LOG/rc.txt"
grep -hE "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$LOG/model_cuda.log" "$LOG/ops_cuda_fused.log" "$LOG/ops_cuda.log" | head -40
grep -hE "metric \] fused" "$LOG/ops_cuda_fused.log" | cut -c1-160 | head -40
echo "== done $(date +%T)"
