#!/usr/bin/env bash
# On the GPU machine, from the unpacked bench/results/scripts/gemm_pack.sh tarball (this script's
# folder), with the checkout as the working directory (tests/fixtures): the GPU tests,
# flash_layers' linear modes, the torch baselines for them, and the layers in both
# activation modes (bf16 first), each part under a timeout and a shared deadline
# (BUDGET seconds, default 185), continuing past failures. Logs to LOG_DIR.
#   gemm_device.sh LOG_DIR
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
LOG="${1:-/tmp/gemm_logs}"
mkdir -p "$LOG"
START=$(date +%s)
BUDGET="${BUDGET:-185}"
export LD_LIBRARY_PATH="$HERE/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LT_DIR="$("$HERE/cublaslt_dir.sh")"
[ -n "$LT_DIR" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$LT_DIR"
export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
stamp() { echo "== $(date +%T) +$(( $(date +%s) - START ))s $*" | tee -a "$LOG/steps.log"; }
# Seconds for the next part: at most $1, never past the deadline.
left() { local l=$(( START + BUDGET - $(date +%s) )); [ "$l" -gt "$1" ] && l=$1; [ "$l" -lt 1 ] && l=1; echo "$l"; }

stamp machine
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; cat "$HERE/commit.txt";
  echo "cublasLt dir: ${LT_DIR:-<loader path>}"; ldd "$HERE/test_ops_cuda" | grep -i cublas; } 2>&1 | tee "$LOG/machine.txt"

stamp "tests (test_ops_cuda and test_model_cuda side by side)"
timeout "$(left 85)" "$HERE/test_ops_cuda" >"$LOG/ops_cuda.log" 2>&1 &
p1=$!
timeout "$(left 85)" "$HERE/test_model_cuda" >"$LOG/model_cuda.log" 2>&1 &
p2=$!
wait $p1; echo "test_ops_cuda rc=$?" | tee -a "$LOG/steps.log"
wait $p2; echo "test_model_cuda rc=$?" | tee -a "$LOG/steps.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/ops_cuda.log" "$LOG/model_cuda.log" | head -30

stamp "flash_layers --ops-linear"
timeout "$(left 40)" "$HERE/flash_layers" --ops-linear >"$LOG/ops_linear.log" 2>&1
echo "ops_linear rc=$?" | tee -a "$LOG/steps.log"

stamp "torch baselines --linear-only"
PYTHONUNBUFFERED=1 timeout "$(left 35)" python3 "$HERE/torch_baselines.py" --linear-only >"$LOG/torch.log" 2>&1
echo "torch rc=$?" | tee -a "$LOG/steps.log"

stamp "flash_layers layers: bf16 then f32, prefill 4K / 8K, decode batch 256 at 8K"
timeout "$(left 70)" "$HERE/flash_layers" --activations bf16,f32 --prefill 4096,8192 --contexts 8192 --batches 256 \
  --steps 3 --engram-compare 0 --tokenizer "$HERE/tokenizer.json" >"$LOG/layers.log" 2>&1
echo "layers rc=$?" | tee -a "$LOG/steps.log"

stamp report
python3 "$HERE/report.py" "$LOG/layers.log" "$LOG/ops_linear.log" --torch "$LOG/torch.log" >"$LOG/report.md" 2>&1
stamp done
