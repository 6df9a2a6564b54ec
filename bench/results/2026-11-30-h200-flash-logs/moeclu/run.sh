#!/usr/bin/env bash
# On the GPU machine (helper moeclu's one run, timeout 150 s): unpacks $PACK/moeclu.tar.xz
# (PACK defaults to .gpubin-moeclu; test_ops_cuda, flash_layers, the libraries the image
# lacks) and $PACK/tok.tar.xz (the tokenizer the prefill's Engram hash reads), then runs,
# each part under its own timeout (capped by what is left of the budget) and continuing on
# failure, logs to $1:
#   test_ops_cuda on the kBF16 tensor-core MoE cases (the both_big ones compare every
#   big-tile kernel, kWgmmaCl2 / kWgmmaCl4 included, bitwise with the default and the CPU);
#   flash_layers --ops-moe-bigs at T = 1024, 2048, 4096, 8192 (default vs wide, wgmma,
#   wgmmaws, wgmmacl2, wgmmacl4);
#   the 8K prefill (7 layers, bf16 + copies) with --moe-big auto / wgmmacl2 / wgmmacl4;
#   with what is left: ncu (stall reasons, L2 / tensor / DRAM) on one T = 8192 call of
#   kWgmmaWs, kWgmmaCl2, kWgmmaCl4, then torch._grouped_mm at the same T.
set -uo pipefail
LOG="${1:?log dir}"
BUDGET="${BUDGET:-143}"
mkdir -p "$LOG"
T0=$(date +%s)
BIN=/tmp/moeclubin
PACK="${PACK:-.gpubin-moeclu}"
rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf "$PACK/moeclu.tar.xz" || exit 1
tar -xJf "$PACK/tok.tar.xz" || echo "tokenizer untar failed"
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
timeout "$(cap 42 95)" "$BIN/test_ops_cuda" --gtest_filter='*moe_experts_fp4tc_bf16*:*moe_experts_v41_fp4_bf16_n4096*' \
  >"$LOG/ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/ops_moe.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|rc=" "$LOG/ops_moe.log" | tail -8
grep -E "_differ .*mismatches=[1-9]" "$LOG/ops_moe.log" | head -10
echo "cl2 comparisons: $(grep -cE "wgmmacl2_vs_default_differ" "$LOG/ops_moe.log") cl4: $(grep -cE "wgmmacl4_vs_default_differ" "$LOG/ops_moe.log")"
stamp flash_ops_moe_bigs
timeout "$(cap 30 65)" "$BIN/flash_layers" --ops-moe-bigs --batches 1024,2048 >"$LOG/flash_ops_moe.log" 2>&1
echo "rc=$?" >>"$LOG/flash_ops_moe.log"
grep -E "^op moe_grouped|rc=" "$LOG/flash_ops_moe.log" | cut -c1-150
FL="$BIN/flash_layers --contexts 8192 --batches 1 --prefill 8192 --steps 1 --activations bf16 --bf16-weights on --engram-compare 0"
for big in auto wgmmacl2 wgmmacl4; do
  stamp "prefill $big"
  c=$(cap 22 12)
  timeout "$c" $FL --moe-big "$big" --budget-s $((c - 3)) >"$LOG/prefill_$big.log" 2>&1; echo "rc=$?" >>"$LOG/prefill_$big.log"
  grep -E "^prefill|rc=" "$LOG/prefill_$big.log" | cut -c1-200
done
left=$((BUDGET - ($(date +%s) - T0) - 1))
if ((left >= 15)); then
  stamp ncu
  timeout "$((left > 30 ? 30 : left))" /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none -k regex:moe_wgmma -c 6 \
    --section WarpStateStats \
    --metrics gpu__time_duration.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__inst_executed.avg.per_cycle_active,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
    "$BIN/flash_layers" --ops-moe-profile --batches 8192 --profile-big wgmmaws,wgmmacl2,wgmmacl4 >"$LOG/ncu_moe.txt" 2>"$LOG/ncu_moe.err"
  echo "ncu rc=$?" >>"$LOG/ncu_moe.err"
  grep -E "moe_wgmma|tensor_op|lts__t_bytes|gpu__time|dram__|inst_executed|stalled_(long|wait|barrier|short|math|not_sel)" "$LOG/ncu_moe.txt" | sed 's/  */ /g' | cut -c1-110 | head -60
fi
left=$((BUDGET - ($(date +%s) - T0) - 1))
if ((left >= 20)); then
  stamp torch
  timeout "$left" python3 bench/flash/torch_baselines.py 1024,2048,8192 moe >"$LOG/torch.log" 2>&1; echo "rc=$?" >>"$LOG/torch.log"
  grep -E "grouped_mm|rc=" "$LOG/torch.log"
fi
stamp done
