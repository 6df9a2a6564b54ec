#!/usr/bin/env bash
# Session 15, lead call 8 (item 0's index keys in 64-entry pieces): run 56 found every configuration deterministic run to run, but the source
# chain 0 / 2 and one stream (DEEPINFER_OVERLAP=0) giving different bits already at the eager decode
# fill (128 tokens at 8K, batch 1). The tensor trace (--step-fnv 2) of each, first differences printed.
#   bash bench/results/2026-12-01-h200-flash-logs/run59/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
B="--contexts 8192 --steps 1 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20 --step-fnv 2 --batches 1"
.gpubin-flash/flash_layers $B --src-chain 0 > "$LOG/src0.log" 2>&1; echo "src0 rc=$?"
.gpubin-flash/flash_layers $B --src-chain 2 > "$LOG/src2.log" 2>&1; echo "src2 rc=$?"
for o in src2; do
  st "src0 vs $o"
  diff <(grep "^trace_fnv" "$LOG/src0.log") <(grep "^trace_fnv" "$LOG/$o.log") | head -60
done
diff <(grep "idx_keys0_from" "$LOG/src0.log") <(grep "idx_keys0_from" "$LOG/src2.log") | grep "^<" | head -40
tar -C "$LOG" -czf "$LOG/logs.tgz" src0.log src2.log && rm -f "$LOG"/*.log
st "done"
