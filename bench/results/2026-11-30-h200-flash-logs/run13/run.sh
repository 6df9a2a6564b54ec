#!/usr/bin/env bash
# Session 5, lead call 1: GPU test set at HEAD (the session-4 kernel refactors had not run on a GPU),
# then an ncu per-kernel breakdown of the 8K prefill and of one decode step at 8K x batch 1 / 256
# (bf16 activations, bf16 weight copies on).   bash .gpubin-int/run3.sh LOG_DIR
set -uo pipefail
LOG="$1"; mkdir -p "$LOG/g" "$LOG/f"
tar -xJf .gpubin-int/flash.tar.xz && tar -xJf .gpubin-int/tok.tar.xz || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== $(date +%T) gpu_run"
SANITIZE=1 timeout 230 bash scripts/gpu_run.sh "$LOG/g" > "$LOG/g/gpu_run.out" 2>&1; echo "gpu_run rc=$?"
tail -4 "$LOG/g/steps.log" 2>/dev/null
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/g/model_cuda.log" "$LOG/g/ops_cuda.log" | head -30
grep -E "memcheck" "$LOG/g/gpu_run.out"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1); echo "ncu=$NCU"
echo "== $(date +%T) ncu prefill 8K + decode 8K x 1 / 256"
timeout 300 "$NCU" --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
  .gpubin-flash/flash_layers --contexts 8192 --batches 1,256 --steps 1 --prefill 8192 --activations bf16 \
  --bf16-weights on --engram-compare 0 --profile --budget-s 200 > "$LOG/f/ncu.csv" 2> "$LOG/f/ncu.err"; echo "ncu rc=$?"
grep -E "^(prefill|decode|setup)" "$LOG/f/ncu.csv" | cut -c1-200; tail -3 "$LOG/f/ncu.err"
python3 bench/flash/ncu_summary.py "$LOG/f/ncu.csv" 25 > "$LOG/f/ncu_summary.md" 2>&1; head -120 "$LOG/f/ncu_summary.md"
gzip "$LOG/f/ncu.csv"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$LOG/f/machine.txt" 2>&1; cat .gpubin-flash/commit.txt >> "$LOG/f/machine.txt"
echo "== $(date +%T) done"
tar -C "$LOG" -czf "$LOG.tgz" . && rm -rf "$LOG" && mkdir -p "$LOG" && mv "$LOG.tgz" "$LOG/logs.tgz"
