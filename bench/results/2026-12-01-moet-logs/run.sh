#!/usr/bin/env bash
# moet's one device call (NOTES 46, aim <= ~250 s): the routed expert tiles at T <= 8 on the ring
# kernel (MoeTcSmall::kRing). Op cases (the 4 moe_ring cases: CPU oracle, rerun bitwise, 3 vs 5
# stages bitwise, the probe differs, kInvariant unchanged; plus the V4.1 bf16 n = 1 / 8 cases as
# they were), the routed op at T = 1, 8 (configs new_lean / new_ring / new_ring3 / new_ringprobe),
# the layers at batch 1 with --moe-b1 lean / ring twice, then an ncu time pass of the stage kernels.
#   BUILD=build-gpu OUTDIR=/work/main/.gpubin-moet bash bench/flash/pack_all.sh   (in the worktree)
#   cp /work/main/.gpubin-int/tok.tar.xz bench/results/2026-12-01-moet-logs/run.sh /work/main/.gpubin-moet/
#   on the device (carry .gpubin-moet): bash .gpubin-moet/run.sh $OUT/r
set -uo pipefail
PACK=.gpubin-moet source bench/flash/device_lib.sh "$1"
NCU=/usr/local/cuda/bin/ncu
cat "$LOG/machine.txt"
st "op tests"
gtest test_ops_cuda 90 '*moe_ring*:*moe_experts_v41_fp4_bf16_n1:*moe_experts_v41_fp4_bf16_n8'
grep -E "ring" "$LOG/test_ops_cuda.log" | grep -vE "^\[ RUN" | head -30
st "routed MoE op, T = 1, 8"
flash route 50 --ops-moe-route --batches 1,8
grep "^op moe_route" "$LOG/route.log"
LA=(--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20)
for rep in 1 2; do
  for m in lean ring; do
    st "layers batch 1: --moe-b1 $m ($rep)"
    flash "layers_${m}_$rep" 40 "${LA[@]}" --moe-b1 $m
    python3 bench/flash/report.py "$LOG/layers_${m}_$rep.log" 2>/dev/null | grep -E "^\| 8192 \| 1 \|" | head -2
  done
done
NT=$((255 - $(date +%s) + T0)); [ "$NT" -gt 45 ] && NT=45
if [ "$NT" -ge 20 ]; then
st "ncu: stage times at T = 1 (former / new = lean, new_ring = ring)"
timeout "$NT" $NCU --profile-from-start off --metrics gpu__time_duration.sum,dram__bytes_read.sum -k regex:"moe_tc_lean|moe_tc_ring" --csv \
  .gpubin-flash/flash_layers --ops-moe-route-profile --batches 1 > "$LOG/ncu.out" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
tail -n 2 "$LOG/ncu.err"; rm -f "$LOG/ncu.err"
python3 - "$LOG/ncu.out" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]
    for r in rows[1:]:
        d = dict(zip(h, r))
        k = d.get("Kernel Name", "?")
        print("ncu", k[max(k.find("moe_tc"), 0):][:34], d.get("Grid Size", "?"), d.get("Metric Name"), d.get("Metric Value", "?"), d.get("Metric Unit", ""))
PY
else echo "ncu skipped (time)"; fi
st "done"
for f in "$LOG"/layers_*.log; do echo "#### $(basename "$f")"; cat "$f"; done > "$LOG/layers.log" && rm -f "$LOG"/layers_*.log
gzip "$LOG/test_ops_cuda.log" "$LOG/ncu.out" "$LOG/layers.log" 2>/dev/null
ls "$LOG"
