#!/usr/bin/env bash
# On the GPU machine, from the unpacked bench/results/scripts/fp8lin_pack.sh tarball (this script's
# folder): the pipelined FP8 GEMM (kWgmmaTma, "wgmmap") and the model's fp8 mode in one
# call (bench/results/2026-11-30-fp8-gemm.md, run 2). Each part under a timeout and a
# shared deadline (BUDGET seconds, default 130), continuing past failures:
#   1. the new kernel's op cases alone (a fault would end every later call of a process);
#   2. flash_layers --ops-linear (ours, f32 / bf16 / fp8 modes and the FP8 kernels alone);
#   3. torch_baselines.py --linear-only (torch.mm, _scaled_mm) at the same shapes and n;
#   4. flash_layers prefill layers, 8K tokens, bf16 then fp8 mode;
#   5. the model's fp8-mode tests, then the other FP8 op cases with what time is left.
# Logs to LOG_DIR (6 files). Run from the checkout's root (the model tests read
# tests/fixtures and models/ there).   fp8lin_device.sh LOG_DIR
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
LOG="${1:-/tmp/fp8lin_logs}"
mkdir -p "$LOG"
START=$(date +%s)
BUDGET="${BUDGET:-130}"
NS="${NS:-256,4096,8192}"
export DEEPINFER_FIXTURES_DIR="${DEEPINFER_FIXTURES_DIR:-$PWD/tests/fixtures}"
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LT_DIR="$("$HERE/cublaslt_dir.sh")"
[ -n "$LT_DIR" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$LT_DIR"
stamp() { echo "== $(date +%T) +$(( $(date +%s) - START ))s $*" | tee -a "$LOG/steps.log"; }
left() { local l=$(( START + BUDGET - $(date +%s) )); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 1 ] && l=1; echo "$l"; }

stamp machine
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.mem --format=csv; cat "$HERE/commit.txt";
  echo "cublasLt dir: ${LT_DIR:-<loader path>}"; nproc; } >>"$LOG/steps.log" 2>&1

stamp "test_ops_cuda: the TMA kernel's cases"
timeout "$(left 25)" stdbuf -oL "$HERE/test_ops_cuda" --gtest_filter='*linear_fp8_kernel_wgmmap*' >"$LOG/tests.log" 2>&1
echo "test_ops_cuda wgmmap rc=$?" | tee -a "$LOG/steps.log"
KINDS="wgmma3"
grep -q "^\[ fp8 \] linear_fp8_kernel_wgmmap" "$LOG/tests.log" && KINDS="wgmmap,wgmma3"
echo "fp8 kinds timed: $KINDS" | tee -a "$LOG/steps.log"

stamp "flash_layers --ops-linear"
timeout "$(left 25)" stdbuf -oL "$HERE/flash_layers" --ops-linear --fp8-kinds "$KINDS" --linear-ns "$NS" \
  >"$LOG/ops_linear.log" 2>&1
echo "ops_linear rc=$?" | tee -a "$LOG/steps.log"

stamp "torch baselines --linear-only"
PYTHONUNBUFFERED=1 timeout "$(left 20)" python3 "$HERE/torch_baselines.py" --linear-only --linear-ns "$NS" \
  >"$LOG/torch.log" 2>&1
echo "torch rc=$?" | tee -a "$LOG/steps.log"

stamp "flash_layers prefill 8K: bf16 then fp8"
timeout "$(left 50)" stdbuf -oL "$HERE/flash_layers" --contexts 8192 --batches 1 --steps 1 --prefill 8192 \
  --activations bf16,fp8 --bf16-weights on --engram-compare 0 --budget-s 45 --tokenizer "$HERE/tokenizer.json" \
  >"$LOG/layers.log" 2>&1
echo "layers rc=$?" | tee -a "$LOG/steps.log"

stamp "test_model_cuda: fp8 mode"
timeout "$(left 20)" stdbuf -oL "$HERE/test_model_cuda" --gtest_filter='CudaModelFp8.*' >>"$LOG/tests.log" 2>&1
echo "test_model_cuda fp8 rc=$?" | tee -a "$LOG/steps.log"
stamp "test_ops_cuda: the other FP8 cases"
timeout "$(left 120)" stdbuf -oL "$HERE/test_ops_cuda" \
  --gtest_filter='*linear_fp8_*-*linear_fp8_kernel_wgmmap*' >>"$LOG/tests.log" 2>&1
echo "test_ops_cuda fp8 rc=$?" | tee -a "$LOG/steps.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/tests.log" | head -40
stamp done
