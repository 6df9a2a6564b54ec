#!/usr/bin/env bash
# On the GPU machine, from the unpacked bench/flash/fp8_pack.sh tarball (this script's
# folder): the linear / fake-quant GPU op tests (FP8 activations included), flash_layers'
# linear modes (f32, bf16, fp8) and torch's baselines for them (_scaled_mm), each part
# under a timeout and a shared deadline (BUDGET seconds, default 270), continuing past
# failures. Logs to LOG_DIR.   fp8_device.sh LOG_DIR
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
LOG="${1:-/tmp/fp8_logs}"
mkdir -p "$LOG"
START=$(date +%s)
BUDGET="${BUDGET:-270}"
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LT_DIR="$("$HERE/cublaslt_dir.sh")"
[ -n "$LT_DIR" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$LT_DIR"
stamp() { echo "== $(date +%T) +$(( $(date +%s) - START ))s $*" | tee -a "$LOG/steps.log"; }
left() { local l=$(( START + BUDGET - $(date +%s) )); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 1 ] && l=1; echo "$l"; }

stamp machine
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.mem --format=csv; cat "$HERE/commit.txt";
  echo "cublasLt dir: ${LT_DIR:-<loader path>}"; nproc; } 2>&1 | tee "$LOG/machine.txt"

stamp "test_ops_cuda (linear, fake_quant)"
timeout "$(left 150)" stdbuf -oL "$HERE/test_ops_cuda" --gtest_filter='*linear*:*fake_quant*' >"$LOG/ops_cuda.log" 2>&1
echo "test_ops_cuda rc=$?" | tee -a "$LOG/steps.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/ops_cuda.log" | head -40

stamp "flash_layers --ops-linear"
timeout "$(left 70)" stdbuf -oL "$HERE/flash_layers" --ops-linear >"$LOG/ops_linear.log" 2>&1
echo "ops_linear rc=$?" | tee -a "$LOG/steps.log"

stamp "torch baselines --linear-only"
PYTHONUNBUFFERED=1 timeout "$(left 45)" python3 "$HERE/torch_baselines.py" --linear-only >"$LOG/torch.log" 2>&1
echo "torch rc=$?" | tee -a "$LOG/steps.log"
stamp done
