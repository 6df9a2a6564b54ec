#!/usr/bin/env bash
# moe5's first device call (NOTES 53, <= 60 s): the routed op at T = 1, 8 with kLean5's
# configurations (new = kLean4 default, new5 / new5pf / new5pf48 / new5s1 / new5s1np / new5w13),
# an ncu pass of the lean stages at T = 1 (unlocked clocks), and the V4.1 bf16 n = 1 op case.
#   BUILD=build-gpu OUTDIR=/work/main/.gpubin-moe5 bash bench/flash/pack_all.sh   (in the worktree)
#   cp bench/results/2026-12-01-moe5-logs/call1/run.sh /work/main/.gpubin-moe5/run1.sh
#   on the device (carry .gpubin-moe5): bash .gpubin-moe5/run1.sh $OUT/r
set -uo pipefail
PACK=.gpubin-moe5 source bench/flash/device_lib.sh "$1"
NCU=/usr/local/cuda/bin/ncu
cat "$LOG/machine.txt"
st "routed MoE op, T = 1, 8"
flash route 24 --ops-moe-route --batches 1,8
grep "^op moe_route" "$LOG/route.log"
NT=$((50 - $(date +%s) + T0))
st "ncu T = 1 (budget $NT s)"
timeout "$NT" $NCU --profile-from-start off --clock-control none -k regex:"moe_tc_lean" \
  --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section Occupancy \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_active,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct,sm__inst_executed.sum \
  --csv .gpubin-flash/flash_layers --ops-moe-route-profile --batches 1 > "$LOG/ncu.out" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
tail -n 3 "$LOG/ncu.err"
grep -E "^profile|^op moe_route" "$LOG/ncu.out" | head -40
NT=$((58 - $(date +%s) + T0))
st "op case (budget $NT s)"
[ "$NT" -ge 8 ] && gtest test_ops_cuda "$NT" '*moe_experts_v41_fp4_bf16_n1'
grep -E "lean5|differ" "$LOG/test_ops_cuda.log" | grep -v "differ.*0.*0" | head -10
gzip -f "$LOG"/*.log "$LOG/ncu.out" 2>/dev/null
st done
