#!/usr/bin/env bash
# On the GPU machine (helper moewide's one run): unpacks $PACK/moewide.tar.xz (PACK defaults
# to .gpubin-moewide) and runs, each part under its own timeout (capped by what is left of a
# 185 s budget) and continuing on failure, logs to $1:
#   test_ops_cuda, the wgmma cases first (prefill sizes with few experts), then every other
#   MoE case (V4.1 shapes; each kBF16 big-tile kernel bitwise against the default);
#   flash_layers --ops-moe --batches 1,256 (+ T = 4096, 8192): big=wide vs big=wgmma;
#   torch._grouped_mm at T = 4096, 8192.
set -uo pipefail
LOG="${1:?log dir}"
mkdir -p "$LOG"
T0=$(date +%s)
BIN=/tmp/moewidebin
PACK="${PACK:-.gpubin-moewide}"
rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf "$PACK/moewide.tar.xz" || exit 1
export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LT_DIR="$(scripts/cublaslt_dir.sh)"  # cuBLASLt (linked dynamically, never packed): the machine's own copy
[ -n "$LT_DIR" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$LT_DIR"
stamp() { echo "== $(date +%T) $*" | tee -a "$LOG/steps.log"; }
cap() {  # min(own cap, budget left - reserve), at least 5 s
  local left=$((185 - ($(date +%s) - T0) - $2)) c=$1
  ((left < c)) && c=$left
  ((c < 5)) && c=5
  echo "$c"
}
stamp machine
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; cat "$BIN/commit.txt"; } >"$LOG/machine.txt" 2>&1
stamp ops_wg
timeout "$(cap 40 120)" "$BIN/test_ops_cuda" --gtest_filter='*_wg*' >"$LOG/ops_wg.log" 2>&1; echo "rc=$?" >>"$LOG/ops_wg.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|rc=|metric" "$LOG/ops_wg.log" | head -40
stamp flash_ops_moe
timeout "$(cap 60 60)" "$BIN/flash_layers" --ops-moe --batches 1,256 >"$LOG/flash_ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/flash_ops_moe.log"
grep -E "^op moe_grouped|rc=" "$LOG/flash_ops_moe.log"
stamp torch_moe
timeout "$(cap 30 35)" python3 "$BIN/torch_baselines.py" 8192 moe >"$LOG/torch_moe.log" 2>&1; echo "rc=$?" >>"$LOG/torch_moe.log"
cat "$LOG/torch_moe.log"
stamp ops_moe
timeout "$(cap 60 0)" "$BIN/test_ops_cuda" --gtest_filter='*moe_experts*:-*_wg*' >"$LOG/ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/ops_moe.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|rc=" "$LOG/ops_moe.log" | tail -40
grep -E "metric.*(n4096|i384|both)" "$LOG/ops_moe.log" | head -30
stamp done
