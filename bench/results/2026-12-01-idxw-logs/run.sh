#!/usr/bin/env bash
# idxw (NOTES 43): the wgmma indexer score. Op cases, the 8K score chunks old vs new, the 8K prefill
# with the wgmma score off / on in one process, the model tests, the torch baseline if time is left.
#   PACK=.gpubin-idxw bash .gpubin-idxw/run.sh LOG_DIR   (carry .gpubin-idxw)
set -uo pipefail
PACK=.gpubin-idxw source bench/flash/device_lib.sh "$1"
st "ops"; gtest test_ops_cuda 55 '*indexer_score*'
grep -E "FAILED|mismatch|differ|max_" "$LOG/test_ops_cuda.log" | head -20
st "index score prefill"; flash idx 35 --index-score-prefill
grep -E "^op |error" "$LOG/idx.log" | head
st "prefill A/B"
flash pf 80 --contexts 8192 --batches 1 --steps 1 --prefill 8192 --activations bf16 --bf16-weights on \
  --engram-compare 0 --indexer-wgmma-ab --budget-s 40
grep -E "^setup act|error|Error" "$LOG/pf.log" | head -5
st "model tests"; DEEPINFER_INDEXER_WGMMA=1 gtest test_model_cuda 75
el=$(($(date +%s) - T0))
if [ "$el" -lt 200 ]; then
  st "torch"; timeout $((225 - el)) python3 .gpubin-idxw/torch_baselines.py --index-score > "$LOG/torch.log" 2>&1; echo torch rc=$?
  grep -E "^torch" "$LOG/torch.log"
fi
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/pf.log" "$LOG/test_model_cuda.log" 2>/dev/null
