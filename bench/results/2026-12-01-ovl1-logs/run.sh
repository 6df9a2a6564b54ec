#!/usr/bin/env bash
# Session 9, helper ovl1 (bench/flash/NOTES.md 33): the concurrent branches of the decode
# layer (CudaModelOptions::overlap; DEEPINFER_OVERLAP=0|1|letters overrides it), A/B in one
# binary. Every model test (incl. CudaOverlap.*: overlap on vs off bitwise), the layers at 8K
# (bf16 + copies: batch 1 / 8 / 256 and the 8K prefill) with every branch on, then off, then
# batch 1 with one branch alone (m shared expert, e Engram, a compressor / indexer).
#   BUILD=build-gpu OUTDIR=/work/main/.gpubin-ovl1 bash bench/flash/pack_all.sh   (here, in the worktree)
#   cp bench/results/2026-12-01-ovl1-logs/run.sh /work/main/.gpubin-ovl1/run.sh
#   on the device (carry .gpubin-ovl1): bash .gpubin-ovl1/run.sh $OUT/r
set -uo pipefail
PACK=.gpubin-ovl1 source bench/flash/device_lib.sh "$1"
st "test_model_cuda"; gtest test_model_cuda 110
grep -E "^\[ +(OK|FAILED) +\] (CudaOverlap|CudaModel.GemvPdl)" "$LOG/test_model_cuda.log" | head -8
ARGS=(--contexts 8192 --steps 3 --prefill 8192 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 60)
for ov in 1 0; do
  st "layers bf16 + copies, 8K, DEEPINFER_OVERLAP=$ov"
  export DEEPINFER_OVERLAP=$ov
  flash "flash_ov$ov" 70 --batches 1,8,256 "${ARGS[@]}"
  unset DEEPINFER_OVERLAP
  python3 bench/flash/report.py "$LOG/flash_ov$ov.log" > "$LOG/report_ov$ov.md" 2>&1
  grep -E "^\| 8192 \| (1|8|256) \||tokens/s =" "$LOG/report_ov$ov.md" | head -12
  grep -E "^decode_graph_untimed" "$LOG/flash_ov$ov.log" | cut -c1-110
done
for ov in m e a; do
  st "batch 1 alone, DEEPINFER_OVERLAP=$ov"
  export DEEPINFER_OVERLAP=$ov
  flash "b1_ov$ov" 40 --batches 1 "${ARGS[@]}"
  unset DEEPINFER_OVERLAP
  echo "ov=$ov $(grep -E '^decode_graph ' "$LOG/b1_ov$ov.log" | grep -oE 'device_ms=[0-9.]+|layers_ms=[0-9.,]+' | tr '\n' ' ')"
  grep -E "^decode_graph_untimed" "$LOG/b1_ov$ov.log" | cut -c1-110
  cat "$LOG/b1_ov$ov.log" >> "$LOG/b1_alone.log" && rm "$LOG/b1_ov$ov.log"
done
st "done"
