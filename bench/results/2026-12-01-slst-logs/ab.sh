#!/usr/bin/env bash
# helper slst (NOTES 50), NOT RUN: the layers' A/B that run.sh meant to make (its --budget-s 10 ran out
# in the 13.8 s setup, so both decode measurements were skipped). ~2 x 20 s.
#   PACK=.gpubin-slst bash ab.sh LOG_DIR   (carry .gpubin-slst; or in a lead script with its own pack)
set -uo pipefail
PACK="${PACK:-.gpubin-slst}" source bench/flash/device_lib.sh "$1"
for f in 0 1; do
  st "layers batch 1, sel-fuse $f"
  flash flash_b1_sel$f 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20 --sel-fuse $f
  python3 bench/flash/report.py "$LOG/flash_b1_sel$f.log" > "$LOG/report_b1_sel$f.md" 2>&1
  grep -E "^\| 8192 \| 1 \|" "$LOG/report_b1_sel$f.md" | head -3
done
st "done"
gzip "$LOG"/flash_b1_sel*.log 2>/dev/null
