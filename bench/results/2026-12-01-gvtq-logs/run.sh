#!/usr/bin/env bash
# Helper gvtq (NOTES 57): the one-token tensor-map gemv's start / tail bits (DEEPINFER_GEMV_TMAP_FAST,
# kAuto's mask; same bits). One device call (<= 110 s):
#  1. the op cases (*fast*: bitwise the current kernel) in the background, CPU-bound weight draws,
#     while ncu profiles torch._scaled_mm (cuBLASLt) and our kAuto kernel at wq_b / wo_b;
#  2. then, alone on the GPU: the --ops-gemv graph-timed bench of the variants and torch._scaled_mm's
#     graph timing at the same shapes;
#  3. if a mask beats kAuto on wq_b + wo_a + wo_b and the time allows: the layers at batch 1, on / off.
#   bash .gpubin-gvtq/run.sh LOG_DIR   (carry .gpubin-gvtq)
set -uo pipefail
PACK=.gpubin-gvtq source bench/flash/device_lib.sh "$1"
left() { echo $((106 - ($(date +%s) - T0))); }
NCU=/usr/local/cuda/bin/ncu
SEC="--section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis"
KEYS="nvjet|gemv_tmap|gemm|Duration|DRAM Throughput|Memory Throughput|Elapsed Cycles|SM Frequency|Block Size|Grid Size|Cluster Size|Registers Per|Dynamic Shared|Issued Warp Per|Warp Cycles Per Issued|L2 Hit Rate|Achieved Active Warps|Waves Per SM"
st "op cases (*fast*) in the background"
( DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" LD_LIBRARY_PATH="$BIN/lib:$LD_LIBRARY_PATH" \
    timeout 60 "$BIN/test_ops_cuda" --gtest_filter='*fast*' > "$LOG/test_ops_cuda.log" 2>&1; echo "tests rc=$?" >> "$LOG/test_ops_cuda.log" ) &
TPID=$!
st "ncu torch._scaled_mm wq_b, wo_b"
timeout 22 $NCU --profile-from-start off --clock-control none $SEC -o "$LOG/ncu_torch" \
  python3 .gpubin-gvtq/torch_gemv.py ncu wq_b,wo_b > "$LOG/ncu_torch_run.txt" 2>&1; echo "ncu torch rc=$?"
st "ncu ours (kAuto, kAuto mask 7) wq_b, wo_b"
timeout 22 $NCU --profile-from-start off --clock-control none -k regex:gemv_tmap $SEC -o "$LOG/ncu_ours" \
  .gpubin-flash/flash_layers --ops-gemv --gemv-profile --gemv-acts bf16 --gemv-shapes wq_b,wo_b --gemv-ns 1 \
  --gemv-variants auto,auto_f7 > "$LOG/ncu_ours_run.txt" 2>&1; echo "ncu ours rc=$?"
for r in torch ours; do
  $NCU --import "$LOG/ncu_$r.ncu-rep" --page details > "$LOG/ncu_$r.txt" 2>&1
  grep -E "$KEYS" "$LOG/ncu_$r.txt" | sed 's/  */ /g' | cut -c1-120 | head -60
done
st "waiting for the op cases"
wait $TPID
grep -E "^\[  FAILED  \]|tests rc=" "$LOG/test_ops_cuda.log" | head -20
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
tail -1 "$LOG/test_ops_cuda.log"
st "ops-gemv n = 1, graph timing ($(left)s left)"
flash ops_gemv 40 --ops-gemv --gemv-graph --gemv-acts bf16 --gemv-ns 1 \
  --gemv-shapes wq_b,wo_a,wo_b,shared_w1,shared_w2,wq_a,wkv \
  --gemv-variants auto,auto_f1,auto_f5,auto_f3,auto_f7,auto_f15,auto_f7_s6,auto_f5_s6,tmapprobe4,tmapslim_o3,tmapslim_f7,pair,pair_f7,auto_f0
grep -E "^op gemv" "$LOG/ops_gemv.log" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//; s/ GBps=[^ ]+//; s/ act=bf16 n=1//' | cut -c1-120
st "torch _scaled_mm, graph timing ($(left)s left)"
timeout 20 python3 .gpubin-gvtq/torch_gemv.py time > "$LOG/torch.log" 2>&1; echo "torch rc=$?"; grep "^torch" "$LOG/torch.log"
# The best kAuto mask on wq_b + wo_a + wo_b (sum of us) against kAuto as it is.
best=$(python3 - "$LOG/ops_gemv.log" <<'PY'
import re, sys
t = {}
for line in open(sys.argv[1]):
    m = re.match(r"op gemv kernel=(\S+) name=(wq_b|wo_a|wo_b) .* ms=([0-9.]+)", line)
    if m and (m.group(1) == "auto" or re.fullmatch(r"auto_f\d+", m.group(1))):
        t.setdefault(m.group(1), {})[m.group(2)] = float(m.group(3)) * 1e3
full = {k: sum(v.values()) for k, v in t.items() if len(v) == 3}
base = min(full.get("auto", 1e9), full.get("auto_f0", 1e9))
cand = {k: s for k, s in full.items() if k not in ("auto", "auto_f0")}
if not cand:
    print("none"); sys.exit()
k = min(cand, key=cand.get)
print(k[len("auto_f"):] if cand[k] < base - 0.3 else "none", f"{cand[k]:.2f}", f"{base:.2f}")
PY
)
echo "best mask (sum us, base): $best"
mask=${best%% *}
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
if [ "$mask" != "none" ] && [ "$(left)" -ge 46 ]; then
  st "layers b1, kAuto mask $mask ($(left)s left)"
  flash b1_on 26 $B1 --gemv-tmap-auto-fast "$mask"
  st "layers b1, kAuto mask 0 ($(left)s left)"
  flash b1_off 26 $B1 --gemv-tmap-auto-fast 0
else
  st "layers skipped (mask $mask, $(left)s left)"
fi
st "done"
cd "$LOG"
tar -czf ncu.tgz ncu_* 2>/dev/null && rm -f ncu_*
gzip test_ops_cuda.log ops_gemv.log 2>/dev/null
rest=$(ls | grep -vE '^(ncu.tgz|ops_gemv.log.gz|test_ops_cuda.log.gz|machine.txt)$')
[ -n "$rest" ] && tar -czf rest.tgz $rest && rm -f $rest
ls -la
