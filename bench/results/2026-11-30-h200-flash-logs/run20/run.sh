#!/usr/bin/env bash
# Session 7, lead call 2: what cuBLASLt's FP8 block-scaling modes do on the H200.
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="${LT_DIR:+$LT_DIR:}${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version --format=csv > "$LOG/machine.txt" 2>&1
for s in "5120 8192 8192" "1280 8192 5120" "32768 8192 1280" "5120 256 8192"; do
  timeout 60 .gpubin-int/probe_lt $s 2>&1 | tee -a "$LOG/probe.log"
done
