#!/usr/bin/env bash
# Session 15, lead call 1 (main 90219ce + this script): (1) the review refactors of 1fc0681 (expand_value,
# mix_partials, pool_channel) and the load-time history clear (abc9f53), never run on a GPU: the hc and
# compressor op cases and the whole test_model_cuda; (2) run 51's determinism check, trimmed: batch 1 and
# 256, the source chain 0 and 2 and every branch off (DEEPINFER_OVERLAP=0), each twice in its own process;
# the first graph decode step's logits_fnv must agree between the two runs of a configuration and across
# the configurations (none claims to change a bit). The batch-1 src0 runs are also the defaults' timing.
#   bash bench/results/2026-12-01-h200-flash-logs/run52/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "op cases: hc + compressor"
gtest test_ops_cuda 90 '*hc_*:*compress*'
st "test_model_cuda (all)"
gtest test_model_cuda 130
B="--contexts 8192 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
fnv() { grep -o "^decode_graph .*logits_fnv=[0-9a-f]*" "$LOG/$1.log" | sed 's/.*batch=\([0-9]*\).*logits_fnv=/batch \1 fnv /'; }
for batch in 1 256; do
  for cfg in "src0::--src-chain 0" "src2::--src-chain 2"; do
    name=${cfg%%::*}; args=${cfg##*::}
    for r in 1 2; do
      flash b${batch}_${name}_$r 40 $B --batches $batch $args > /dev/null
      echo "b$batch $name run $r: $(fnv b${batch}_${name}_$r) | $(grep -o '^decode_graph .*ms=[0-9.]*' $LOG/b${batch}_${name}_$r.log | head -1 | cut -c1-120)"
    done
  done
  for r in 1 2; do
    DEEPINFER_OVERLAP=0 flash b${batch}_serial_$r 40 $B --batches $batch --src-chain 0 > /dev/null
    echo "b$batch serial run $r: $(fnv b${batch}_serial_$r)"
  done
done
tar -C "$LOG" -czf "$LOG/layers.tgz" $(cd "$LOG" && ls b*.log) && rm -f "$LOG"/b*.log
gzip -f "$LOG"/test_*.log
st "done"
