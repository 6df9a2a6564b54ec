#!/usr/bin/env bash
# moe5's final device call (NOTES 53, <= 110 s): the routed op at T = 1, 8 (new = kLean4;
# new5 / new5s1 / new5s2 / new5s3 = kLean5's shapes; new5s3pf with the w2 L2 prefetch), then the
# layers at batch 1 with kLean5 off / on (the shape fastest at T = 1 in the op) twice, alternating,
# then kLean5's op cases (bitwise the default at T = 1, 2, 8 and with slow-decode scale bytes) in the
# time left, and an ncu time pass if any is left.
#   BUILD=build-gpu OUTDIR=/work/main/.gpubin-moe5 bash bench/flash/pack_all.sh   (in the worktree)
#   cp bench/results/2026-12-01-moe5-logs/call2/run.sh /work/main/.gpubin-moe5/run2.sh
#   on the device (carry .gpubin-moe5): bash .gpubin-moe5/run2.sh $OUT/r
set -uo pipefail
PACK=.gpubin-moe5 source bench/flash/device_lib.sh "$1"
NCU=/usr/local/cuda/bin/ncu
cat "$LOG/machine.txt"
st "routed MoE op, T = 1, 8"
flash route 20 --ops-moe-route --batches 1,8
grep "^op moe_route" "$LOG/route.log"
SHAPE=$(python3 - "$LOG/route.log" <<'PY'
import re, sys
best = None
for l in open(sys.argv[1]):
    m = re.match(r"op moe_route T=1 cfg=new5(s(\d))?(_b)? ms=([\d.]+)", l)
    if m:
        s, ms = int(m.group(2) or 0), float(m.group(4))
        if best is None or ms < best[1]: best = (s, ms)
print(best[0] if best else 3)
PY
)
st "kLean5 shape for the layers: $SHAPE"
LA=(--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20)
for rep in 1 2; do
  for m in 0 1; do
    st "layers batch 1: --moe-lean5 $m ($rep)"
    flash "layers_l5${m}_$rep" 22 "${LA[@]}" --moe-lean5 $m --moe-lean5-shape "$SHAPE"
    python3 bench/flash/report.py "$LOG/layers_l5${m}_$rep.log" 2>/dev/null | grep -E "^\| 8192 \| 1 \|" | head -2
    gzip -f "$LOG/layers_l5${m}_$rep.log"
  done
done
NT=$((100 - $(date +%s) + T0))
st "op cases (budget $NT s)"
[ "$NT" -ge 5 ] && gtest test_ops_cuda "$NT" '*moe_experts_v41_fp4_bf16_n1:*moe_experts_v41_fp4_bf16_n2_bigscale:*moe_experts_v41_fp4_bf16_n8:*moe_experts_v41_fp4_bf16_n2'
grep -E "lean5|\.y " "$LOG/test_ops_cuda.log" | grep -vE "mismatches=0$" | head -12
echo "lean5 bitwise checks passed: $(grep -cE 'lean5.*mismatches=0$' "$LOG/test_ops_cuda.log")"
gzip -f "$LOG/test_ops_cuda.log"
NT=$((104 - $(date +%s) + T0))
if [ "$NT" -ge 12 ]; then
st "ncu stage times at T = 1 (budget $NT s)"
timeout "$NT" $NCU --profile-from-start off --clock-control none -k regex:"moe_tc_lean" \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active \
  --csv .gpubin-flash/flash_layers --ops-moe-route-profile --batches 1 > "$LOG/ncu.out" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
grep -E '"(gpu__time_duration.sum|dram__bytes_read.sum)"' "$LOG/ncu.out" | awk -F'","' '{print $5, $13, $15}' | cut -c1-160
fi
rm -f "$LOG/ncu.err"
gzip -f "$LOG"/*.log "$LOG/ncu.out" 2>/dev/null
st done
