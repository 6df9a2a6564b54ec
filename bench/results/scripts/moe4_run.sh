#!/usr/bin/env bash
# On the GPU machine (helper moe4's one run): unpacks .gpubin-moe4/moe4.tar.xz and runs,
# each part under its own timeout and continuing on failure, logs to $1:
#   test_ops_cuda (MoE cases first, then the rest), flash_layers --ops-moe (grouped MoE
#   in both activation modes, FP4 linear gemv), torch._grouped_mm, test_model_cuda.
set -uo pipefail
LOG="${1:?log dir}"
mkdir -p "$LOG"
BIN=/tmp/moe4bin
rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf .gpubin-moe4/moe4.tar.xz || exit 1
export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
stamp() { echo "== $(date +%T) $*" | tee -a "$LOG/steps.log"; }
stamp machine
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; cat "$BIN/commit.txt"; } >"$LOG/machine.txt" 2>&1
stamp ops_moe
timeout 45 "$BIN/test_ops_cuda" --gtest_filter='*moe_experts*' >"$LOG/ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/ops_moe.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|metric" "$LOG/ops_moe.log" | tail -60
stamp flash_ops_moe
timeout 40 "$BIN/flash_layers" --ops-moe --batches 1,8,64,256 >"$LOG/flash_ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/flash_ops_moe.log"
grep -E "^op (moe_grouped|fp4_linear|fp4_moe)" "$LOG/flash_ops_moe.log"
stamp torch_moe
timeout 30 python3 "$BIN/torch_baselines.py" 1,8,64,256 moe >"$LOG/torch_moe.log" 2>&1; echo "rc=$?" >>"$LOG/torch_moe.log"
cat "$LOG/torch_moe.log"
stamp ops_rest
timeout 45 "$BIN/test_ops_cuda" --gtest_filter='-*moe_experts*' >"$LOG/ops_rest.log" 2>&1; echo "rc=$?" >>"$LOG/ops_rest.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/ops_rest.log" | head -20
stamp model_cuda
timeout 35 "$BIN/test_model_cuda" >"$LOG/model_cuda.log" 2>&1; echo "rc=$?" >>"$LOG/model_cuda.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|rc=" "$LOG/model_cuda.log" | head -20
stamp done
