#!/usr/bin/env bash
# Session 6, lead call 1: the router DMMA path (ops tests + op timing), the MoE / router op
# tests after the session-5 refactors.   bash .gpubin-int/run6.sh LOG_DIR  (carry .gpubin .gpubin-int)
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
tar -xJf .gpubin-int/flash.tar.xz || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$LOG/machine.txt" 2>&1; cat .gpubin-flash/commit.txt >> "$LOG/machine.txt"
BIN=/tmp/deepinfer_gpubin; rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf .gpubin/gpubin.tar.xz
echo "== $(date +%T) ops tests router/moe"
DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" LD_LIBRARY_PATH="$BIN/lib:$LD_LIBRARY_PATH" timeout 60 "$BIN/test_ops_cuda" --gtest_filter='*router*:*moe*:*expert*' > "$LOG/ops_router.log" 2>&1; echo "ops rc=$?"
grep -E "FAILED|PASSED" "$LOG/ops_router.log" | head -20; grep -B2 -A8 "Failure" "$LOG/ops_router.log" | head -60
echo "== $(date +%T) op timing"
timeout 70 .gpubin-flash/flash_layers --ops-moe --batches 1,8,256,1024,4096,8192 --contexts 8192 > "$LOG/ops_moe.log" 2>&1; echo "opsmoe rc=$?"
grep -E "^op (router|fp4_moe|moe)" "$LOG/ops_moe.log" | cut -c1-160
echo "== $(date +%T) done"
