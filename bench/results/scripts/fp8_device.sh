#!/usr/bin/env bash
# On the GPU machine, from the unpacked bench/results/scripts/fp8_pack.sh tarball (this script's
# folder): the FP8-activation and fake-quant GPU op tests, flash_layers' linear modes
# (f32, bf16, fp8), torch's baselines for them (_scaled_mm), then the other linear op
# tests with what time is left, each part
# under a timeout and a shared deadline (BUDGET seconds, default 285), continuing past
# failures. Logs to LOG_DIR (7 files; the device machine returned only 8 of 10 in run 1).
#   fp8_device.sh LOG_DIR
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
LOG="${1:-/tmp/fp8_logs}"
mkdir -p "$LOG"
START=$(date +%s)
BUDGET="${BUDGET:-285}"
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LT_DIR="$("$HERE/cublaslt_dir.sh")"
[ -n "$LT_DIR" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$LT_DIR"
stamp() { echo "== $(date +%T) +$(( $(date +%s) - START ))s $*" | tee -a "$LOG/steps.log"; }
left() { local l=$(( START + BUDGET - $(date +%s) )); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 1 ] && l=1; echo "$l"; }

stamp machine
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.mem --format=csv; cat "$HERE/commit.txt";
  echo "cublasLt dir: ${LT_DIR:-<loader path>}"; nproc; } 2>&1 | tee "$LOG/machine.txt"

# Each FP8 GEMM kind alone first, in its own process: a kind whose kernel faults (a sticky
# CUDA error would end every later call of a process) is left out of the timings below.
KINDS=""
for k in wgmma wgmma3 wgmmaw mma8; do
  timeout "$(left 20)" "$HERE/test_ops_cuda" --gtest_filter="*linear_fp8_kernel_${k}_n250_*" >/tmp/fp8_sanity.log 2>&1
  cat /tmp/fp8_sanity.log >>"$LOG/sanity.log"  # one file: the device returns only a few files
  grep -q "^\[ fp8 \] linear_fp8_kernel_${k}_n250" /tmp/fp8_sanity.log && KINDS="$KINDS${KINDS:+,}$k"
done
echo "fp8 kinds that ran: ${KINDS:-none}" | tee -a "$LOG/steps.log"
stamp "test_ops_cuda: FP8 activations and fake_quant"
timeout "$(left 120)" stdbuf -oL "$HERE/test_ops_cuda" --gtest_filter='*linear_fp8_*:*fake_quant*' >"$LOG/ops_cuda_fp8.log" 2>&1
echo "test_ops_cuda fp8 rc=$?" | tee -a "$LOG/steps.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/ops_cuda_fp8.log" | head -40
stamp "flash_layers --ops-linear"
timeout "$(left 60)" stdbuf -oL "$HERE/flash_layers" --ops-linear --fp8-kinds "${KINDS:-none}" >"$LOG/ops_linear.log" 2>&1
echo "ops_linear rc=$?" | tee -a "$LOG/steps.log"

stamp "torch baselines --linear-only"
PYTHONUNBUFFERED=1 timeout "$(left 40)" python3 "$HERE/torch_baselines.py" --linear-only >"$LOG/torch.log" 2>&1
echo "torch rc=$?" | tee -a "$LOG/steps.log"
stamp "test_ops_cuda: the other linear cases"
timeout "$(left 50)" stdbuf -oL "$HERE/test_ops_cuda" --gtest_filter='*linear*-*linear_fp8_*' >"$LOG/ops_cuda_linear.log" 2>&1
echo "test_ops_cuda linear rc=$?" | tee -a "$LOG/steps.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/ops_cuda_linear.log" | head -20

stamp done
