#!/usr/bin/env bash
# On the GPU machine: the Flash-layer bench (bench/flash/pack.sh's binary), its op
# section, and the torch baselines; logs to LOG_DIR.
#   bench/flash/run_h200.sh LOG_DIR [flash_layers args...]
# Env: OPS=0 skips the op section, TORCH=0 the torch baselines; LAYERS_T / OPS_T /
# TORCH_T bound each part's seconds.
set -uo pipefail
cd "$(dirname "$0")/../.."
LOG="${1:-/tmp/flash_logs}"; shift || true
mkdir -p "$LOG"
export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# cuBLASLt is linked dynamically and not packed (bench/flash/pack.sh): the device image's copy.
LT_DIR="$(scripts/cublaslt_dir.sh)"
[ -n "$LT_DIR" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$LT_DIR"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv;
  cat .gpubin-flash/commit.txt; } 2>&1 | tee "$LOG/machine.txt"
echo "== layers $(date +%T)"
timeout "${LAYERS_T:-330}" .gpubin-flash/flash_layers "$@" 2>&1 | tee "$LOG/flash.log"
if [ "${OPS:-1}" = 1 ]; then
  echo "== ops $(date +%T)"
  timeout "${OPS_T:-120}" .gpubin-flash/flash_layers --ops-only 2>&1 | tee "$LOG/ops.log"
fi
if [ "${TORCH:-1}" = 1 ]; then
  echo "== torch $(date +%T)"
  PYTHONUNBUFFERED=1 timeout "${TORCH_T:-120}" python3 bench/flash/torch_baselines.py 2>&1 | tee "$LOG/torch.log"
fi
echo "== done $(date +%T)"
