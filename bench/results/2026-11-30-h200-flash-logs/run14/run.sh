#!/usr/bin/env bash
# Session 5, lead call 2 (final integration of the six helpers + the grouped indexer):
# layers in bf16 mode with bf16 weight copies (8K: batch 1, 256, prefill 8K), the indexer
# score op (per-row vs grouped rows at an 8K prefill chunk), then the GPU test binaries.
#   bash .gpubin-int/run4.sh LOG_DIR     (carry .gpubin and .gpubin-int)
set -uo pipefail
LOG="$1"; mkdir -p "$LOG/g" "$LOG/f"
tar -xJf .gpubin-int/flash.tar.xz && tar -xJf .gpubin-int/tok.tar.xz || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$LOG/f/machine.txt" 2>&1; cat .gpubin-flash/commit.txt >> "$LOG/f/machine.txt"
echo "== $(date +%T) layers bf16w 8K"
timeout 100 .gpubin-flash/flash_layers --contexts 8192 --batches 1,256 --steps 3 --prefill 8192 --activations bf16 \
  --bf16-weights on --engram-compare 0 --budget-s 90 > "$LOG/f/flash.log" 2>&1; echo "layers rc=$?"
grep -E "^(prefill|decode|skip|setup)" "$LOG/f/flash.log" | cut -c1-220
echo "== $(date +%T) indexer op"
timeout 40 .gpubin-flash/flash_layers --indexer-only > "$LOG/f/indexer.log" 2>&1; echo "indexer rc=$?"
grep -E "index_score" "$LOG/f/indexer.log" | cut -c1-200
BIN=/tmp/deepinfer_gpubin; rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf .gpubin/gpubin.tar.xz
export LD_LIBRARY_PATH="$BIN/lib:$LD_LIBRARY_PATH"; export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
cat "$BIN/commit.txt" >> "$LOG/f/machine.txt"
echo "== $(date +%T) test_ops_cuda"
timeout 150 "$BIN/test_ops_cuda" > "$LOG/g/ops_cuda.log" 2>&1; echo "ops rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/g/ops_cuda.log" | head -30; tail -2 "$LOG/g/ops_cuda.log"
echo "== $(date +%T) test_model_cuda"
timeout 120 "$BIN/test_model_cuda" > "$LOG/g/model_cuda.log" 2>&1; echo "model rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/g/model_cuda.log" | head -30; tail -2 "$LOG/g/model_cuda.log"
echo "== $(date +%T) done"
tar -C "$LOG" -czf "$LOG.tgz" . && rm -rf "$LOG" && mkdir -p "$LOG" && mv "$LOG.tgz" "$LOG/logs.tgz"
