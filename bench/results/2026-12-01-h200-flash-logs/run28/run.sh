#!/usr/bin/env bash
# Session 9, lead integration call (main at the commit in machine.txt): every model test, every op
# test, the layers (bf16 + copies: batch 1 / 8 / 256 and the 8K prefill; fp8 + copies: batch 1 / 8
# with the default fp8 decode gemv and with its lean variant at every n), one ncu pass splitting
# the MoE big tiles' L2 traffic by source at T = 8192 (NOTES 21's open question), and one ncu
# pass on cuBLASLt's kernel for torch._scaled_mm at wq_b, one token (what reaches 3.1 TB/s).
#   bash bench/results/2026-12-01-h200-flash-logs/run28/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int only)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
D=bench/results/2026-12-01-h200-flash-logs/run28
st "test_model_cuda"; gtest test_model_cuda 100
st "test_ops_cuda"; gtest test_ops_cuda 220
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
st "layers bf16 + copies, 8K"
flash flash 130 --contexts 8192 --batches 1,8,256 --steps 3 --prefill 8192 --activations bf16 --bf16-weights on \
  --engram-compare 0 --budget-s 120
python3 bench/flash/report.py "$LOG/flash.log" > "$LOG/report.md" 2>&1
grep -E "^\| 8192 \| (1|8|256) \||tokens/s =" "$LOG/report.md" | head -12
for v in default lean; do
  st "layers fp8 + copies, 8K, batch 1 / 8 ($v)"
  if [ $v = lean ]; then export DEEPINFER_FP8_GEMV=1 DEEPINFER_FP8_GEMV_LEAN=1; fi
  flash flash_fp8_$v 55 --contexts 8192 --batches 1,8 --steps 3 --activations fp8 --bf16-weights on --engram-compare 0 --budget-s 48
  unset DEEPINFER_FP8_GEMV DEEPINFER_FP8_GEMV_LEAN
done
python3 bench/flash/report.py "$LOG/flash_fp8_default.log" 2>&1 | grep -E "^\| 8192 \| (1|8) \||tokens/s =" | head -6
st "ncu: MoE big tiles, L2 by source, T = 8192"
timeout 45 /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none -k regex:moe_wgmma -c 2 \
  --metrics gpu__time_duration.sum,lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_write.sum,lts__t_sectors_srcunit_ltcfabric.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__m_xbar2l1tex_read_bytes.sum \
  .gpubin-flash/flash_layers --ops-moe-profile --batches 8192 --profile-big wgmmaws > "$LOG/ncu_moe_l2.txt" 2>&1
echo "ncu moe rc=$?"
grep -E "moe_wgmma|gpu__time|lts__|dram__|l1tex__" "$LOG/ncu_moe_l2.txt" | sed 's/  */ /g' | cut -c1-120 | head -30
st "ncu: cuBLASLt _scaled_mm, wq_b, one token"
timeout 60 /usr/local/cuda/bin/ncu --profile-from-start off --target-processes all -c 3 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section MemoryWorkloadAnalysis \
  python3 $D/scaled_mm_probe.py > "$LOG/ncu_scaled_mm.txt" 2>&1
echo "ncu scaled_mm rc=$?"
grep -vE "^==PROF==|^ *-+ *$|^ *$" "$LOG/ncu_scaled_mm.txt" | sed 's/  */ /g' | cut -c1-110 | head -90
st "done"
rm -f "$LOG/report.md"
gzip "$LOG/test_ops_cuda.log" "$LOG/flash.log" "$LOG"/flash_fp8_*.log "$LOG/ncu_scaled_mm.txt" 2>/dev/null
