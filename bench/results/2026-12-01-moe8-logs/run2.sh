#!/usr/bin/env bash
# helper moe8, FOLLOW-UP (not run by moe8; NOTES 39 "Next" 1 and 2): kWgmmaWsEf (the 128-row kernel
# with evict-first weight copies) and the tall kinds with the LDS.128 producer, vs kWgmmaWs.
# ~120 s. Needs the pack of wt-moe8's follow-up commit in .gpubin-moe8 (carry .gpubin-moe8):
#   PACK=.gpubin-moe8 bash .gpubin-moe8/run2.sh $OUT/r
set -uo pipefail
PACK=.gpubin-moe8 source bench/flash/device_lib.sh "$1"
st "ops: the big-tile cases (every kind bitwise vs the default)"
gtest test_ops_cuda 60 '*moe_experts_fp4tc_bf16*:*moe_experts_v41_fp4_bf16_n4096*'
grep -E "_differ .*mismatches=[1-9]" "$LOG/test_ops_cuda.log" | head -10
echo "wsef comparisons: $(grep -cE "wgmmawsef_vs_default_differ .*mismatches=0" "$LOG/test_ops_cuda.log") tall: $(grep -cE "wgmmatall(ef|144)?_vs_default_differ .*mismatches=0" "$LOG/test_ops_cuda.log")"
st "ops-moe-bigs 2048,4096,8192"
timeout 60 .gpubin-flash/flash_layers --ops-moe-bigs --batches 2048 > "$LOG/bigs.log" 2>&1; echo "bigs rc=$?"
grep -E "^op moe_grouped" "$LOG/bigs.log" | sed 's/ active=[0-9]*//; s/ mode=auto act=bf16//' | cut -c1-110
FL=".gpubin-flash/flash_layers --contexts 8192 --batches 1 --prefill 8192 --steps 1 --activations bf16 --bf16-weights on --engram-compare 0"
i=0
for big in auto wgmmawsef wgmmatallef auto; do
  i=$((i + 1)); st "prefill $i $big"
  timeout 30 $FL --moe-big $big --budget-s 26 > "$LOG/prefill_${i}_$big.log" 2>&1; echo "prefill $big rc=$?"
  grep -E "^prefill" "$LOG/prefill_${i}_$big.log" | cut -c1-220
done
st "ncu T = 8192: wgmmaws, wgmmawsef, wgmmatallef"
timeout 60 /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none -k regex:moe_wgmma -c 6 \
  --metrics gpu__time_duration.sum,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,dram__bytes_read.sum,sm__inst_executed.avg.per_cycle_active,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio \
  .gpubin-flash/flash_layers --ops-moe-profile --batches 8192 --profile-big wgmmaws,wgmmawsef,wgmmatallef > "$LOG/ncu_moe.txt" 2>&1
echo "ncu rc=$?"
grep -E "moe_wgmma_ws|gpu__time|lts__t_|dram__|inst_executed|tensor_op|stalled" "$LOG/ncu_moe.txt" | sed 's/  */ /g' | cut -c1-100 | head -60
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/ncu_moe.txt" 2>/dev/null
cd "$LOG" && tar -czf logs.tar.gz prefill_*.log bigs.log && rm -f prefill_*.log bigs.log
