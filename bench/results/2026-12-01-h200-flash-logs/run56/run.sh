#!/usr/bin/env bash
# Session 15, lead call 5 (after the Engram hash fix, NOTES 61; source chain mode 2 the default again):
# (1) the model tests around the changed pieces; (2) determinism: batch 1 and 256, the source chain 0 / 2
# and one stream, the first graph step's logits_fnv (and every step's, --step-fnv 1) must agree across
# runs and configurations; (3) the full layers at the defaults (batch 1 / 8 / 256, prefill 8K).
#   bash bench/results/2026-12-01-h200-flash-logs/run56/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_model_cuda subset"
gtest test_model_cuda 80 '*SourceChain*:*Engram*:*Graph*:*Overlap*'
B="--contexts 8192 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20 --step-fnv 1"
steps() { grep "^step_fnv" "$LOG/$1.log" | md5sum | cut -c1-12; }
one() {  # NAME ENV ARGS
  local name=$1 envs=$2; shift 2
  env $envs .gpubin-flash/flash_layers $B "$@" > "$LOG/$name.log" 2>&1
  echo "$name rc=$? $(grep -o '^decode_graph .*batch=[0-9]* .*device_ms=[0-9.]*' $LOG/$name.log | sed 's/act=.*batch=/batch=/;s/wall_ms=[0-9.]* //') $(grep -o 'logits_fnv=[0-9a-f]*' $LOG/$name.log | tail -1) steps=$(steps $name)"
}
st "determinism"
one b1_src0_1 "X=0" --batches 1 --src-chain 0
one b1_src0_2 "X=0" --batches 1 --src-chain 0
one b1_src2_1 "X=0" --batches 1 --src-chain 2
one b1_serial "DEEPINFER_OVERLAP=0" --batches 1 --src-chain 0
one b256_src2_1 "X=0" --batches 256 --src-chain 2
one b256_src2_2 "X=0" --batches 256 --src-chain 2
one b256_src0_1 "X=0" --batches 256 --src-chain 0
one b256_serial "DEEPINFER_OVERLAP=0" --batches 256 --src-chain 0
st "layers 1 / 8 / 256 + prefill 8192 (defaults)"
flash full 160 --contexts 8192 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --batches 1,8,256 --prefill 8192 --budget-s 120
python3 bench/flash/report.py "$LOG/full.log" > "$LOG/report.md" 2>&1
grep -E "tok/s|tokens/s" "$LOG/report.md" | head -12
tar -C "$LOG" -czf "$LOG/layers.tgz" $(cd "$LOG" && ls b*.log full.log) && rm -f "$LOG"/b*.log "$LOG"/full.log
gzip -f "$LOG"/test_*.log
st "done"
