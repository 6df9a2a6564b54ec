#!/usr/bin/env bash
# Session 7, lead call 1: the model tests at 882f73a (model_cuda split not yet run on a GPU),
# then an ncu per-kernel breakdown of one prefill 8192 step and one batch-1 step (bf16 + copies).
#   bash .gpubin-int/run9.sh LOG_DIR    (carry .gpubin and .gpubin-int)
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
T0=$(date +%s)
tar -xJf .gpubin-int/flash.tar.xz && tar -xJf .gpubin-int/tok.tar.xz || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
BIN=/tmp/deepinfer_gpubin; rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf .gpubin/gpubin.tar.xz
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat .gpubin-flash/commit.txt "$BIN/commit.txt"; } > "$LOG/machine.txt" 2>&1
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*"; }
st "test_model_cuda"
DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" LD_LIBRARY_PATH="$BIN/lib:$LD_LIBRARY_PATH" timeout 80 "$BIN/test_model_cuda" > "$LOG/model_cuda.log" 2>&1; echo "model rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/model_cuda.log" | head; tail -1 "$LOG/model_cuda.log"
st "ncu prefill 8192 + batch 1, bf16 + copies"
timeout 150 /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
  .gpubin-flash/flash_layers --contexts 8192 --steps 1 --batches 1 --prefill 8192 --activations bf16 --bf16-weights on \
  --engram-compare 0 --profile --graphs 0 --budget-s 120 > "$LOG/ncu.csv" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
python3 bench/flash/ncu_summary.py "$LOG/ncu.csv" 40 > "$LOG/ncu_summary.md" 2>&1; grep "Profiled" "$LOG/ncu_summary.md"
gzip "$LOG/ncu.csv"
st "done"
