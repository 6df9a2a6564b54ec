#!/usr/bin/env bash
# On the GPU machine (helper moe5's one run): unpacks $PACK/moe5.tar.xz (PACK defaults to
# .gpubin-moe5; .gpubin-moe5-next holds the build with the kWide128 candidate) and runs,
# each part under its own timeout (capped by what is left of a 145 s budget) and
# continuing on failure, logs to $1:
#   flash_layers --ops-moe (grouped MoE both activation modes, the three kBF16 big-tile
#   kernels, T up to 8192), torch._grouped_mm (T up to 8192), test_ops_cuda (MoE cases,
#   then the rest), test_model_cuda.
set -uo pipefail
LOG="${1:?log dir}"
mkdir -p "$LOG"
T0=$(date +%s)
BIN=/tmp/moe5bin
PACK="${PACK:-.gpubin-moe5}"
rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf "$PACK/moe5.tar.xz" || exit 1
export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
stamp() { echo "== $(date +%T) $*" | tee -a "$LOG/steps.log"; }
cap() {  # min(own cap, budget left - reserve), at least 5 s
  local left=$((145 - ($(date +%s) - T0) - $2)) c=$1
  ((left < c)) && c=$left
  ((c < 5)) && c=5
  echo "$c"
}
stamp machine
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; cat "$BIN/commit.txt"; } >"$LOG/machine.txt" 2>&1
stamp flash_ops_moe
timeout "$(cap 40 90)" "$BIN/flash_layers" --ops-moe --batches 1,8,64,256 >"$LOG/flash_ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/flash_ops_moe.log"
grep -E "^op (moe_grouped|fp4_linear|fp4_moe)|rc=" "$LOG/flash_ops_moe.log"
stamp torch_moe
timeout "$(cap 20 75)" python3 "$BIN/torch_baselines.py" 1,8,64,256,8192 moe >"$LOG/torch_moe.log" 2>&1; echo "rc=$?" >>"$LOG/torch_moe.log"
cat "$LOG/torch_moe.log"
stamp ops_moe
timeout "$(cap 65 40)" "$BIN/test_ops_cuda" --gtest_filter='*moe_experts*' >"$LOG/ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/ops_moe.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|rc=" "$LOG/ops_moe.log" | tail -40
grep -E "metric.*(n4096|i384|both|bf16_n64|bf16_n300)" "$LOG/ops_moe.log" | head -30
stamp model_cuda
timeout "$(cap 30 12)" "$BIN/test_model_cuda" >"$LOG/model_cuda.log" 2>&1; echo "rc=$?" >>"$LOG/model_cuda.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|rc=" "$LOG/model_cuda.log" | head -20
stamp ops_rest
timeout "$(cap 30 0)" "$BIN/test_ops_cuda" --gtest_filter='-*moe_experts*' >"$LOG/ops_rest.log" 2>&1; echo "rc=$?" >>"$LOG/ops_rest.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|rc=" "$LOG/ops_rest.log" | head -20
stamp done
