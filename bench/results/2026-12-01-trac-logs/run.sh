#!/usr/bin/env bash
# Helper trac (NOTES 49): the layers at batch 1 without and with --trace-csv (CUPTI kernel
# timeline of the graph steps), the same traced with the branches off (DEEPINFER_OVERLAP=0).
#   bash .gpubin-trac/run.sh LOG_DIR   (after bench/flash/pack_all.sh into .gpubin-trac; carry .gpubin-trac)
set -uo pipefail
PACK=.gpubin-trac source bench/flash/device_lib.sh "$1"
A="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
st "layers batch 1, untraced"
flash flash_b1 45 $A
st "layers batch 1, traced"
flash flash_b1_trace 60 $A --trace-csv "$LOG/b1.csv"
grep -E "^trace_csv|trace-csv|trace:" "$LOG/flash_b1_trace.log"
python3 .gpubin-trac/timeline.py "$LOG/b1.csv" --brief > "$LOG/timeline_b1.txt" 2>&1
head -12 "$LOG/timeline_b1.txt"; grep -A3 "^critical path" "$LOG/timeline_b1.txt"
if [ $(( $(date +%s) - T0 )) -lt 120 ]; then
  st "layers batch 1, traced, branches off"
  DEEPINFER_OVERLAP=0 flash flash_b1_trace_ovl0 60 $A --trace-csv "$LOG/b1_ovl0.csv"
  grep -E "^trace_csv" "$LOG/flash_b1_trace_ovl0.log"
fi
st "done"
cd "$LOG" && gzip -f b1.csv b1_ovl0.csv 2>/dev/null
tar czf logs.tgz *.log *.txt 2>/dev/null && rm -f *.log *.txt
ls -la
