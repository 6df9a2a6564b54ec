#!/usr/bin/env bash
# helper moe8 (NOTES 39), one device call: MoE big tiles of up to 160 rows (kWgmmaWsTall) and
# with evict-first weights (kWgmmaWsTallEf) vs kWgmmaWs (kAuto) and torch._grouped_mm.
#   PACK=.gpubin-moe8 bash .gpubin-moe8/run.sh $OUT/r   (carry .gpubin-moe8)
set -uo pipefail
PACK=.gpubin-moe8 source bench/flash/device_lib.sh "$1"
st "ops: moe / expert cases"
gtest test_ops_cuda 120 '*moe*:*expert*'
grep -E "_differ .*mismatches=[1-9]" "$LOG/test_ops_cuda.log" | head -10
echo "tall comparisons: $(grep -cE "wgmmatall_vs_default_differ" "$LOG/test_ops_cuda.log") tallef: $(grep -cE "wgmmatallef_vs_default_differ" "$LOG/test_ops_cuda.log") tall144: $(grep -cE "wgmmatall144_vs_default_differ" "$LOG/test_ops_cuda.log")"
grep -E "y_wgmma(ws|tall) " "$LOG/test_ops_cuda.log" | head -12
st "ops-moe-bigs 2048,4096,8192 (two passes)"
for p in 1 2; do
  timeout 60 .gpubin-flash/flash_layers --ops-moe-bigs --batches 2048 > "$LOG/bigs$p.log" 2>&1; echo "bigs$p rc=$?"
  grep -E "^op moe_grouped" "$LOG/bigs$p.log" | grep -E "T=(2048|4096|8192)" | sed 's/ active=[0-9]*//; s/ mode=auto act=bf16//' | cut -c1-120
done
st "torch grouped_mm"
timeout 40 python3 bench/flash/torch_baselines.py 8192,2048 moe > "$LOG/torch.log" 2>&1; echo "torch rc=$?"
grep -E "grouped_mm" "$LOG/torch.log"
FL=".gpubin-flash/flash_layers --contexts 8192 --batches 1 --prefill 8192 --steps 1 --activations bf16 --bf16-weights on --engram-compare 0"
i=0
for big in auto wgmmatall wgmmatallef wgmmatall144 auto; do
  i=$((i + 1)); st "prefill $i $big"
  timeout 30 $FL --moe-big $big --budget-s 26 > "$LOG/prefill_${i}_$big.log" 2>&1; echo "prefill $big rc=$?"
  grep -E "^prefill" "$LOG/prefill_${i}_$big.log" | cut -c1-220
done
st "ncu T = 8192: wgmmaws, wgmmatall, wgmmatallef, wgmmatall144 (stage 1 and 2 each)"
timeout 75 /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none -k regex:moe_wgmma -c 8 \
  --section WarpStateStats \
  --metrics gpu__time_duration.sum,lts__t_sectors.avg.pct_of_peak_sustained_elapsed,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,dram__bytes_read.sum,sm__inst_executed.avg.per_cycle_active,lts__t_sectors_srcunit_ltcfabric.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio \
  .gpubin-flash/flash_layers --ops-moe-profile --batches 8192 --profile-big wgmmaws,wgmmatall,wgmmatallef,wgmmatall144 > "$LOG/ncu_moe.txt" 2>&1
echo "ncu rc=$?"
grep -E "moe_wgmma|profile moe|tensor_op|lts__t_|gpu__time|dram__|inst_executed|ltcfabric|stalled_(long|wait|barrier|short|math|not_sel|lg_th|mio)" "$LOG/ncu_moe.txt" | sed 's/  */ /g' | cut -c1-110 | head -120
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/ncu_moe.txt" 2>/dev/null
cd "$LOG" && tar -czf prefill_logs.tar.gz prefill_*.log bigs*.log torch.log && rm -f prefill_*.log bigs*.log torch.log
