#!/usr/bin/env bash
# helper moe9 (NOTES 40): kWgmmaWsEf5 / Ef55 (5 token stages; + 5 weight stages), EfOdd (evict-first
# on the odd chunks' weight copies only), EfL1 (Ef's code with the 228 KB carve-out: the 5-stage
# rings' L1) against kWgmmaWsEf and kWgmmaWs. Target ~190 s (call timeout 230):
#   PACK=.gpubin-moe9 bash .gpubin-moe9/run.sh $OUT/r      (carry .gpubin-moe9)
set -uo pipefail
PACK=.gpubin-moe9 source bench/flash/device_lib.sh "$1"
el() { echo $(($(date +%s) - T0)); }
st "ops: the big-tile cases (every kind bitwise vs the default)"
gtest test_ops_cuda 80 '*moe_experts_fp4tc_bf16*:*moe_experts_v41_fp4_bf16_n4096*'
grep -E "_differ .*mismatches=[1-9]" "$LOG/test_ops_cuda.log" | head -10
for k in wgmmawsef wgmmawsef5 wgmmawsef55 wgmmawsefodd wgmmawsefl1; do
  echo "$k: $(grep -cE "${k}_vs_default_differ .*mismatches=0" "$LOG/test_ops_cuda.log") ok, $(grep -cE "${k}_vs_default_differ .*mismatches=[1-9]" "$LOG/test_ops_cuda.log") bad"
done
st "ops-moe-bigs 2048,4096,8192"
timeout 75 .gpubin-flash/flash_layers --ops-moe-bigs --batches 2048 > "$LOG/bigs.log" 2>&1; echo "bigs rc=$?"
grep -E "^op moe_grouped" "$LOG/bigs.log" | sed 's/ active=[0-9]*//; s/ mode=auto act=bf16//; s/ small=auto plan=3 pdl=0//' | cut -c1-100
BEST=$(grep -E "^op moe_grouped T=8192 " "$LOG/bigs.log" | grep -E "big=wgmmawsef(5|55|odd) " |
  sed -E 's/.* ms=([0-9.]+) .* big=([a-z0-9]+).*/\1 \2/' | sort -n | head -1 | cut -d' ' -f2)
BEST=${BEST:-wgmmawsef5}; echo "best new kind at 8192: $BEST"
FL=".gpubin-flash/flash_layers --contexts 8192 --batches 1 --prefill 8192 --steps 1 --activations bf16 --bf16-weights on --engram-compare 0"
i=0
for big in auto $BEST auto; do
  [ "$(el)" -gt 165 ] && { echo "skip prefill $big (t=$(el))"; continue; }
  i=$((i + 1)); st "prefill $i $big"
  timeout 28 $FL --moe-big $big --budget-s 24 > "$LOG/prefill_${i}_$big.log" 2>&1; echo "prefill $big rc=$?"
  grep -E "^prefill" "$LOG/prefill_${i}_$big.log" | cut -c1-200
done
left=$((200 - $(el)))
if [ "$left" -gt 25 ]; then
  st "ncu T = 8192: wgmmawsef, $BEST (timeout $left)"
  timeout "$left" /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none -k regex:moe_wgmma -c 4 \
    --metrics gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,sm__inst_executed.avg.per_cycle_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_sleeping_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio \
    .gpubin-flash/flash_layers --ops-moe-profile --batches 8192 --profile-big wgmmawsef,$BEST > "$LOG/ncu_moe.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "moe_wgmma_ws|gpu__time|lts__t_|dram__|inst_executed|tensor_op|stalled" "$LOG/ncu_moe.txt" | sed 's/  */ /g' | cut -c1-90 | head -60
else
  echo "ncu skipped (t=$(el))"
fi
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/ncu_moe.txt" 2>/dev/null
cd "$LOG" && tar -czf logs.tar.gz prefill_*.log bigs.log && rm -f prefill_*.log bigs.log
