#!/usr/bin/env bash
# mob2's one device call (NOTES 34, aim <= ~220 s): the routed MoE's critical path at batch 1 / 8.
# Op tests (the shared w1 + w3 under a branch's per-SM cap, bitwise; the V4.1 MoE cases incl. the
# lean K split 8 / 4 against the CPU and batch invariant; the route cases), test_model_cuda whole
# (CudaOverlap.*: priorities + bulk cap bitwise vs one stream), the routed op at T = 1, 8 with the
# lean K splits, the layers at batch 1, 8 (8K, bf16 + copies, graph replay): defaults,
# DEEPINFER_BRANCH_PRIO=1, PRIO + BRANCH_BULK=1, and PRIO + BULK + --moe-lean-ks 8,4 if the routed
# op at T = 1 was faster with it (else BULK alone); last, time permitting, a one-pass ncu of the
# lean stages (default vs ks 8 / 4).
#   BUILD=build-gpu OUTDIR=/work/main/.gpubin-mob2 bash bench/flash/pack_all.sh   (in the worktree)
#   cp /work/main/.gpubin-int/tok.tar.xz bench/results/2026-12-01-mob2-logs/run.sh /work/main/.gpubin-mob2/
#   on the device (carry .gpubin-mob2): bash .gpubin-mob2/run.sh $OUT/r
# (Ran at 2a2af0b. The lean K split override -- flash_layers --moe-lean-ks and the route configs
# new_ks84 / 82 / 44 / 88 -- was removed after this call: slower, and not batch invariant as written.)
set -uo pipefail
PACK=.gpubin-mob2 source bench/flash/device_lib.sh "$1"
NCU=/usr/local/cuda/bin/ncu
cat "$LOG/machine.txt"
st "op tests"
gtest test_ops_cuda 70 '*gemv_multi_shared_w13*:*moe_experts_v41_fp4_n1:*moe_experts_v41_fp4_n8:*moe_experts_v41_fp4_bf16_n1:*moe_experts_v41_fp4_bf16_n2:*moe_experts_v41_fp4_bf16_n5:*moe_experts_v41_fp4_bf16_n8:*moe_experts_v41_fp4_n64_invariant:*moe_route_experts*'
grep -E "leanks84|smcap" "$LOG/test_ops_cuda.log" | head -12
st "test_model_cuda"
gtest test_model_cuda 70
grep -E "^\[ +(OK|FAILED) +\] CudaOverlap" "$LOG/test_model_cuda.log"
st "routed MoE op, T = 1, 8"
flash route 40 --ops-moe-route --batches 1,8
grep "^op moe_route" "$LOG/route.log"
LA=(--contexts 8192 --batches 1,8 --steps 3 --prefill 0 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 24)
lay() {  # NAME [flash args...]: one layers run, its device / per-layer lines
  local name="$1"; shift
  st "layers batch 1, 8: $name (PRIO=${DEEPINFER_BRANCH_PRIO:-} BULK=${DEEPINFER_BRANCH_BULK:-} $*)"
  flash "layers_$name" 31 "${LA[@]}" "$@"
}
lay base
export DEEPINFER_BRANCH_PRIO=1
lay prio
export DEEPINFER_BRANCH_BULK=1
lay prio_bulk1
T1D=$(grep "^op moe_route T=1 cfg=new ms" "$LOG/route.log" | sed 's/.*ms=//')
T1K=$(grep "^op moe_route T=1 cfg=new_ks84 ms" "$LOG/route.log" | sed 's/.*ms=//')
echo "route T=1 new=$T1D ks84=$T1K"
if [ -n "$T1D" ] && [ -n "$T1K" ] && awk "BEGIN {exit !($T1K < $T1D)}"; then
  lay prio_bulk1_ks84 --moe-lean-ks 8,4
else
  unset DEEPINFER_BRANCH_PRIO
  lay bulk1
fi
unset DEEPINFER_BRANCH_PRIO DEEPINFER_BRANCH_BULK
NT=$((285 - $(date +%s) + T0)); [ "$NT" -gt 45 ] && NT=45
if [ "$NT" -ge 20 ]; then
st "ncu: lean stage times, default vs ks 8 / 4"
timeout "$NT" $NCU --profile-from-start off --metrics gpu__time_duration.sum -k regex:"moe_tc_lean" --csv \
  .gpubin-flash/flash_layers --ops-moe-route-profile --batches 1,8 > "$LOG/ncu.out" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
tail -n 2 "$LOG/ncu.err"; rm -f "$LOG/ncu.err"
python3 - "$LOG/ncu.out" <<'PY'
import csv, sys
# The kernels in profile order (T = 1: former, new, new_ks84 (stage 1, stage 2 each); then T = 8).
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]
    for r in rows[1:]:
        d = dict(zip(h, r))
        if d.get("Metric Name") == "gpu__time_duration.sum":
            k = d.get("Kernel Name", "?")
            print("ncu", k[max(k.find("moe_tc"), 0):][:40], d.get("Grid Size", "?"), d.get("Metric Value", "?"), d.get("Metric Unit", ""))
PY
else echo "ncu skipped (time)"; fi
st "done"
for f in "$LOG"/layers_*.log; do echo "#### $(basename "$f")"; cat "$f"; done > "$LOG/layers.log" && rm -f "$LOG"/layers_*.log
gzip "$LOG/test_ops_cuda.log" "$LOG/ncu.out" "$LOG/layers.log" 2>/dev/null
ls "$LOG"
