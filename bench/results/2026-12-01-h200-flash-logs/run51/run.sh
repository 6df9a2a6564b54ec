#!/usr/bin/env bash
# PREPARED, NOT RUN (session 14 ended without device time): the determinism check of NOTES 58.
# Each configuration twice, in separate processes; the first graph decode step's logits hash
# (logits_fnv on the decode_graph line) must agree between the two runs of a configuration, and
# between configurations that claim to change no bit (the source chain 0 / 1 / 2, the branches on / off).
# With the model's load-time clear of the history pool (abc9f53) the harness's unwritten history reads
# zeros in every run. ~300 s.
#   bash bench/results/2026-12-01-h200-flash-logs/run51/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
B="--contexts 8192 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
fnv() { grep -o "^decode_graph .*logits_fnv=[0-9a-f]*" "$LOG/$1.log" | sed 's/.*batch=\([0-9]*\).*logits_fnv=/batch \1 fnv /'; }
for batch in 1 256; do
  for cfg in "src0::--src-chain 0" "src2::--src-chain 2" "src1::--src-chain 1"; do
    name=${cfg%%::*}; args=${cfg##*::}
    for r in 1 2; do
      flash b${batch}_${name}_$r 40 $B --batches $batch $args > /dev/null
      echo "b$batch $name run $r: $(fnv b${batch}_${name}_$r)"
    done
  done
  for r in 1 2; do  # every branch off: one stream
    DEEPINFER_OVERLAP=0 flash b${batch}_serial_$r 40 $B --batches $batch --src-chain 0 > /dev/null
    echo "b$batch serial run $r: $(fnv b${batch}_serial_$r)"
  done
done
tar -C "$LOG" -czf "$LOG/layers.tgz" $(cd "$LOG" && ls b*.log) && rm -f "$LOG"/b*.log
st "done"
