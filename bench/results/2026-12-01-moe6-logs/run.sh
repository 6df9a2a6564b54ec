#!/usr/bin/env bash
# moe6's device call (NOTES 60, <= 95 s): the routed op A/B at T = 1, 8 (cur = the defaults,
# leant1..4 = kLeanT's modes, cur_b a second default sample), then the layers at batch 1 off / on
# once each if a kLeanT mode wins at T = 1 (the best mode), then kLeanT's op cases (bitwise the
# default at T = 1..8) in the time left.
#   BUILD=build-gpu OUTDIR=/work/main/.gpubin-moe6 bash bench/flash/pack_all.sh   (in the worktree)
#   on the device (carry .gpubin-moe6): bash .gpubin-moe6/run.sh $OUT/r
set -uo pipefail
PACK=.gpubin-moe6 source bench/flash/device_lib.sh "$1"
cat "$LOG/machine.txt" 2>/dev/null | head -3
st "routed MoE op, T = 1, 8"
flash route 30 --ops-moe-route --batches 1,8 --moe-route-only cur,leant1,leant2,leant3,leant4,cur_b
grep -E "^op moe_route|rror|what" "$LOG/route.log" | head -20
BEST=$(python3 - "$LOG/route.log" <<'PY'
import re, sys
cur, best = [], None
for l in open(sys.argv[1]):
    m = re.match(r"op moe_route T=1 cfg=(\w+) ms=([\d.]+)", l)
    if not m: continue
    name, ms = m.group(1), float(m.group(2))
    if name.startswith("cur"): cur.append(ms)
    elif best is None or ms < best[1]: best = (name, ms)
# a mode "wins" when it beats the faster default sample by > 2%
print(best[0][5:] if best and cur and best[1] < 0.98 * min(cur) else 0)
PY
)
st "kLeanT mode for the layers: $BEST"
LA=(--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20)
if [ "$BEST" != 0 ] && [ $(( $(date +%s) - T0 )) -le 32 ]; then
  for m in 0 "$BEST"; do
    st "layers batch 1: --moe-leant $m"
    flash "layers_t$m" 23 "${LA[@]}" --moe-leant "$m"
    python3 bench/flash/report.py "$LOG/layers_t$m.log" 2>/dev/null | grep -E "^\| 8192 \| 1 \|" | head -2
    gzip -f "$LOG/layers_t$m.log"
  done
fi
NT=$((88 - $(date +%s) + T0))
st "op cases (budget $NT s)"
[ "$NT" -ge 5 ] && gtest test_ops_cuda "$NT" '*moe_experts_v41_fp4_bf16_n1:*moe_experts_v41_fp4_bf16_n8:*moe_experts_v41_fp4_bf16_n2:*moe_experts_v41_fp4_bf16_n3:*moe_experts_v41_fp4_bf16_n4:*moe_experts_v41_fp4_bf16_n6:*moe_experts_v41_fp4_bf16_n7'
grep -E "leant|\.y " "$LOG/test_ops_cuda.log" | grep -vE "mismatches=0$" | head -12
echo "leant checks passed: $(grep -cE 'leant.*mismatches=0$' "$LOG/test_ops_cuda.log")"
gzip -f "$LOG"/*.log 2>/dev/null
st done
