#!/usr/bin/env bash
# PREPARED (session 15 ended without device time), NOT RUN: do the switches that claim to change no bit
# agree at Flash sizes? With the history pool capped at the blocks the run uses (NOTES 61), every
# configuration sees the same history, so the first graph step's logits_fnv (and the hash over all
# steps' step_fnv lines) must be equal across all of these; each is one process. ~270 s.
#   bash bench/results/2026-12-01-h200-flash-logs/run60/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
B="--contexts 8192 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20 --step-fnv 1"
one() {  # NAME ENV ARGS
  local name=$1 envs=$2; shift 2
  env $envs .gpubin-flash/flash_layers $B "$@" > "$LOG/$name.log" 2>&1
  echo "$name rc=$? $(grep -o 'blocks=[0-9]*' $LOG/$name.log | head -1) $(grep -o '^decode_graph .*device_ms=[0-9.]*' $LOG/$name.log | grep -o 'device_ms=.*') $(grep -o 'logits_fnv=[0-9a-f]*' $LOG/$name.log | tail -1) steps=$(grep '^step_fnv' $LOG/$name.log | md5sum | cut -c1-12)"
}
st "batch 1"
one b1_default "X=0" --batches 1
one b1_src0 "X=0" --batches 1 --src-chain 0
one b1_src1 "X=0" --batches 1 --src-chain 1
one b1_serial "DEEPINFER_OVERLAP=0" --batches 1
for m in 0 1 2; do one b1_hc$m "X=0" --batches 1 --hc-site $m; done
for m in 0 2 3; do one b1_ew$m "X=0" --batches 1 --engram-wkv $m; done
one b1_selfuse0 "X=0" --batches 1 --sel-fuse 0
st "batch 256"
one b256_default "X=0" --batches 256
one b256_src0 "X=0" --batches 256 --src-chain 0
one b256_serial "DEEPINFER_OVERLAP=0" --batches 256
tar -C "$LOG" -czf "$LOG/layers.tgz" $(cd "$LOG" && ls b*.log) && rm -f "$LOG"/b*.log
st "done"
