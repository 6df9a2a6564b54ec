#!/usr/bin/env bash
# Session 5, lead call 3 (same binaries as run4.sh): ncu per-kernel breakdown at 8K
# (prefill, batch 1, batch 256; bf16 + copies) and the layers in f32 mode.
set -uo pipefail
LOG="$1"; mkdir -p "$LOG/f"
tar -xJf .gpubin-int/flash.tar.xz && tar -xJf .gpubin-int/tok.tar.xz || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== $(date +%T) ncu"
timeout 80 /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
  .gpubin-flash/flash_layers --contexts 8192 --batches 1,256 --steps 1 --prefill 8192 --activations bf16 \
  --bf16-weights on --engram-compare 0 --profile --graphs 0 --budget-s 60 > "$LOG/f/ncu.csv" 2> "$LOG/f/ncu.err"; echo "ncu rc=$?"
python3 bench/flash/ncu_summary.py "$LOG/f/ncu.csv" 30 > "$LOG/f/ncu_summary.md" 2>&1; grep "Profiled" "$LOG/f/ncu_summary.md"; gzip "$LOG/f/ncu.csv"
echo "== $(date +%T) layers f32"
timeout 75 .gpubin-flash/flash_layers --contexts 8192 --batches 1,256 --steps 3 --prefill 8192 --activations f32 \
  --engram-compare 0 --budget-s 65 > "$LOG/f/flash_f32.log" 2>&1; echo "layers rc=$?"
grep -E "^(prefill|decode_graph |skip)" "$LOG/f/flash_f32.log" | cut -c1-200
echo "== $(date +%T) done"
tar -C "$LOG" -czf "$LOG.tgz" . && rm -rf "$LOG" && mkdir -p "$LOG" && mv "$LOG.tgz" "$LOG/logs.tgz"
