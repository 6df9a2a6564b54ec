#!/usr/bin/env bash
# Session 13, lead call 2 (integration): pair's gemv pairs (NOTES 47, mode 3 default) and rout's router /
# plan (NOTES 48; the lean plan now the default, --moe-plan fast the former): their op cases, the model
# tests, the layers at batch 1 A/B (twice each), and an nsys timeline of one batch-1 graph replay.
#   bash bench/results/2026-12-01-h200-flash-logs/run44/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: pairs, router, route, gemv rules"
gtest test_ops_cuda 150 '*gemv_pair*:*router*:*route*:LinearGemv.*:*gemv_auto*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "test_model_cuda"
gtest test_model_cuda 150
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
for r in 1 2; do
  st "layers b1 round $r"
  flash b1_def_$r 40 $B1
  flash b1_planfast_$r 40 $B1 --moe-plan fast
done
flash b1_pair0 40 $B1 --gemv-pair 0
flash b1_pair1 40 $B1 --gemv-pair 1
flash b1_split 40 $B1 --router dmmasplit
tar -C "$LOG" -czf "$LOG/layers.tgz" $(cd "$LOG" && ls b1_*.log) && rm -f "$LOG"/b1_*.log
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"
if [ -n "$NSYS" ]; then
  st "nsys timeline, batch 1"
  timeout 120 "$NSYS" profile --cuda-graph-trace=node -t cuda -o /tmp/tl -f true .gpubin-flash/flash_layers $B1 > "$LOG/nsys.out" 2>&1
  echo "nsys rc=$?"
  timeout 60 "$NSYS" export --type sqlite -o /tmp/tl.sqlite -f true /tmp/tl.nsys-rep >> "$LOG/nsys.out" 2>&1
  python3 bench/flash/nsys_timeline.py /tmp/tl.sqlite > "$LOG/timeline.txt" 2>&1
  head -3 "$LOG/timeline.txt"; tail -34 "$LOG/timeline.txt"
  gzip "$LOG/timeline.txt" "$LOG/nsys.out"
fi
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/test_model_cuda.log" 2>/dev/null
