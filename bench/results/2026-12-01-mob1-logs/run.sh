#!/usr/bin/env bash
# mob1's one device call (NOTES 32, <= ~250 s): kLeanF / kLeanFR6 / kLeanFB4, the lean MoE
# stages in one persistent launch. Op tests (every small-tile kernel incl. the three bitwise vs
# the default, and vs the CPU oracle), the routed MoE op at T = 1, 8 (defaults = lean4 vs the
# three), ncu sections of the lean4 stages and the three on the op harness (bf16, T = 1, 8), then
# the layers at batch 1, 8 (8K, bf16 + copies, graph replay) with the default (lean4) and with
# the fused kind that was fastest in the routed op at T = 1.
#   bash .gpubin-mob1/run.sh $OUT/r   (carry .gpubin-mob1; run.sh and stall.py are copied there)
# (Ran at a285d28. kLeanFR6 / kLeanFB4 were deleted after this call: slower than kLeanF; the
# --profile-small and route configs naming them no longer exist.)
set -uo pipefail
PACK=.gpubin-mob1 source bench/flash/device_lib.sh "$1"
NCU=/usr/local/cuda/bin/ncu
cat "$LOG/machine.txt"
st "op tests (MoE small tiles, V4.1 shapes)"
gtest test_ops_cuda 70 '*moe_experts_v41_fp4_n1:*moe_experts_v41_fp4_n8:*moe_experts_v41_fp4_bf16_n1:*moe_experts_v41_fp4_bf16_n2:*moe_experts_v41_fp4_bf16_n5:*moe_experts_v41_fp4_bf16_n8:*moe_experts_v41_fp4_n64_invariant:*moe_experts_fp4tc_*_n1:*moe_experts_fp4tc_*_n8:*moe_experts_fp4tc_*_n40_invariant:*moe_route_experts*'
grep -iE "leanf|differ" "$LOG/test_ops_cuda.log" | grep -vE "(=|:) ?0\b" | head -10
st "routed MoE op, T = 1, 8"
flash route 40 --ops-moe-route --batches 1,8
grep "^op moe_route" "$LOG/route.log"
st "ncu sections: lean4 vs leanf (op harness, bf16, T = 1, 8)"
timeout 70 $NCU --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
  --section LaunchStats --section Occupancy --section SchedulerStats -k regex:"moe_tc_lean" -o "$LOG/prof" \
  .gpubin-flash/flash_layers --ops-moe-profile --batches 1,8 --profile-small lean4,leanf,leanfr6,leanfb4 --profile-act bf16 \
  > "$LOG/ncu.out" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
tail -n 2 "$LOG/ncu.err"; grep "^profile" "$LOG/ncu.out"
if [ -f "$LOG/prof.ncu-rep" ]; then
  $NCU -i "$LOG/prof.ncu-rep" --csv --page details > "$LOG/prof_details.csv" 2>&1
  $NCU -i "$LOG/prof.ncu-rep" --csv --page raw > "$LOG/prof_raw.csv" 2>&1
  python3 .gpubin-mob1/stall.py "$LOG/prof_raw.csv" 2>&1 | head -24
  rm -f "$LOG/prof.ncu-rep"; gzip "$LOG/prof_details.csv" "$LOG/prof_raw.csv"
fi
LA=(--contexts 8192 --batches 1,8 --steps 3 --prefill 0 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 28)
st "layers batch 1, 8: defaults (lean4)"
flash layers_lean4 34 "${LA[@]}"
grep -E "^graph_nodes" "$LOG/layers_lean4.log" | cut -c1-200
BEST=$(grep "^op moe_route T=1 cfg=new_leanf" "$LOG/route.log" | sed 's/.*cfg=new_\([a-z0-9]*\) ms=\([0-9.]*\).*/\2 \1/' | sort -g | head -1 | cut -d' ' -f2)
BEST=${BEST:-leanf}
st "layers batch 1, 8: --moe-small $BEST"
flash layers_$BEST 34 "${LA[@]}" --moe-small $BEST
grep -E "^graph_nodes" "$LOG/layers_$BEST.log" | cut -c1-200
st "done"
gzip "$LOG/test_ops_cuda.log" 2>/dev/null
