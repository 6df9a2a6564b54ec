#!/usr/bin/env bash
# On the GPU machine (helper moepf2's one run, timeout 120 s): unpacks $PACK/moepf2.tar.xz
# (PACK defaults to .gpubin-moepf2; test_ops_cuda, flash_layers, the libraries the image
# lacks) and runs, each part under its own timeout (capped by what is left of the budget)
# and continuing on failure, logs to $1:
#   test_ops_cuda on the kBF16 tensor-core MoE cases (the both_big ones compare every
#   big-tile kernel, kWgmmaWs included, bitwise with the default and with the CPU);
#   flash_layers --ops-moe at T = 4096, 8192 (big=wgmma vs big=wgmmaws vs the others);
#   then, with what is left, ncu with stall reasons (WarpStateStats) on one T = 8192 call of
#   each of kWgmma and kWgmmaWs (--ops-moe-profile --profile-big wgmma,wgmmaws).
# Torch._grouped_mm is not rerun: 8.36 / 12.49 ms at T = 4096 / 8192 (run moepf, same image).
set -uo pipefail
LOG="${1:?log dir}"
BUDGET="${BUDGET:-112}"
mkdir -p "$LOG"
T0=$(date +%s)
BIN=/tmp/moepf2bin
PACK="${PACK:-.gpubin-moepf2}"
rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf "$PACK/moepf2.tar.xz" || exit 1
export LD_LIBRARY_PATH="$BIN/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
LT_DIR="$(scripts/cublaslt_dir.sh)"  # cuBLASLt (linked dynamically, never packed): the machine's own copy
[ -n "$LT_DIR" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$LT_DIR"
export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
stamp() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*" | tee -a "$LOG/steps.log"; }
cap() {  # min(own cap, budget left - reserve), at least 3 s
  local left=$((BUDGET - ($(date +%s) - T0) - $2)) c=$1
  ((left < c)) && c=$left
  ((c < 3)) && c=3
  echo "$c"
}
stamp machine
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv; cat "$BIN/commit.txt"; } >"$LOG/machine.txt" 2>&1
stamp ops_moe
timeout "$(cap 36 70)" "$BIN/test_ops_cuda" --gtest_filter='*moe_experts_fp4tc_bf16*:*moe_experts_v41_fp4_bf16_n4096*' \
  >"$LOG/ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/ops_moe.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|rc=" "$LOG/ops_moe.log" | tail -8
grep -E "_differ .*mismatches=[1-9]" "$LOG/ops_moe.log" | head -10
grep -cE "wgmmaws_vs_default_differ" "$LOG/ops_moe.log"
stamp flash_ops_moe
timeout "$(cap 48 20)" "$BIN/flash_layers" --ops-moe --batches 4096,8192 >"$LOG/flash_ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/flash_ops_moe.log"
grep -E "^op moe_grouped.*act=bf16.*big=|rc=" "$LOG/flash_ops_moe.log" | cut -c1-150
left=$((BUDGET - ($(date +%s) - T0) - 1))
if ((left >= 15)); then
  stamp ncu
  timeout "$left" /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none -k regex:moe_wgmma -c 4 \
    --section WarpStateStats --section SchedulerStats \
    --metrics gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.avg.per_cycle_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
    "$BIN/flash_layers" --ops-moe-profile --batches 8192 --profile-big wgmma,wgmmaws >"$LOG/ncu_moe.txt" 2>"$LOG/ncu_moe.err"
  echo "ncu rc=$?" >>"$LOG/ncu_moe.err"
  grep -E "moe_wgmma|Warp Cycles Per Issued|tensor_op|lts__t_bytes|gpu__time|dram__|inst_executed|stalled_(barrier|long|short|wait|math|mio|lg_|no_inst|dispatch|sleep|branch|membar|not_sel)" "$LOG/ncu_moe.txt" | sed 's/  */ /g' | cut -c1-120 | head -90
fi
stamp done
