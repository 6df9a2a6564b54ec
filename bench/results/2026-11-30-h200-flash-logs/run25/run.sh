#!/usr/bin/env bash
# Session 8, lead call 1 (493464d): where batch-1 decode time goes now. An ncu per-kernel time
# breakdown of one eager batch-1 step (bf16 + copies, 8K, 7 layers), then `ncu --set full` on
# the same step (every kernel: pipe utilisation, stall reasons, L1/L2 traffic), exported as CSV.
#   bash bench/results/2026-11-30-h200-flash-logs/run25/run.sh LOG_DIR   (carry .gpubin, .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
NCU=/usr/local/cuda/bin/ncu
ARGS=(--contexts 8192 --steps 1 --batches 1 --activations bf16 --bf16-weights on --engram-compare 0 --profile --graphs 0 --budget-s 200)
if [ -z "${SKIP_TIMES:-}" ]; then
st "ncu times, batch 1"
timeout 150 $NCU --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
  .gpubin-flash/flash_layers "${ARGS[@]}" > "$LOG/ncu_b1.csv" 2> "$LOG/ncu_b1.err"; echo "ncu rc=$?"
python3 bench/flash/ncu_summary.py "$LOG/ncu_b1.csv" 40 > "$LOG/ncu_b1_summary.md" 2>&1; cat "$LOG/ncu_b1_summary.md" | head -60
gzip "$LOG/ncu_b1.csv"
fi
st "ncu --set full, batch 1"
timeout 330 $NCU --profile-from-start off --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats --section InstructionStats --section LaunchStats --section Occupancy -k regex:"gemv|moe_tc_lean|hc_mixes|router|moe_plan|moe_combine|copy_rows|small_attention|norm_rope|topk|rank|rms_norm|swiglu" -o "$LOG/b1full" \
  .gpubin-flash/flash_layers "${ARGS[@]}" > "$LOG/ncu_full.out" 2> "$LOG/ncu_full.err"; echo "ncu full rc=$?"
tail -n 3 "$LOG/ncu_full.err"; zcat -f "$LOG/ncu_full.out" 2>/dev/null | grep -E "ERROR|WARN" | head -5
$NCU -i "$LOG/b1full.ncu-rep" --csv --page details > "$LOG/b1full_details.csv" 2>&1; echo "details rc=$?"
$NCU -i "$LOG/b1full.ncu-rep" --csv --page raw > "$LOG/b1full_raw.csv" 2>&1; echo "raw rc=$?"
rm -f "$LOG/b1full.ncu-rep"; gzip "$LOG/b1full_details.csv" "$LOG/b1full_raw.csv" "$LOG/ncu_full.out"
ls -la "$LOG"
st "done"
