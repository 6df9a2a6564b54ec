#!/usr/bin/env bash
# Helper srcc (NOTES 54): the source layers' chain (DEEPINFER_SRC_CHAIN / --src-chain): op cases, model
# tests, the layers at batch 1 off / on alternating twice, then (time allowing) one traced run with it on.
#   bash .gpubin-srcc/run.sh LOG_DIR   (carry .gpubin-srcc)
set -uo pipefail
PACK=.gpubin-srcc source bench/flash/device_lib.sh "$1"
st "ops: compressor gather, copy_to, nrq"
gtest test_ops_cuda 40 '*compress_gather*:*copy_to*:*fused_entry*:*fused_key*:*fused_index*:*copy_rows*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "test_model_cuda: CudaSourceChain, bad values"
gtest test_model_cuda 40 '*CudaSourceChain*:*BadEnvironment*'
mv "$LOG/test_model_cuda.log" "$LOG/test_model_cuda_chain.log"
st "test_model_cuda with DEEPINFER_SRC_CHAIN=1: overlap, graphs, fixtures"
DEEPINFER_SRC_CHAIN=1 gtest test_model_cuda 40 'CudaOverlap.ConcurrentBranchesChangeNoBit:CudaGraphs.DecodeReplayEqualsEagerSteps:CudaModel.FixturesMatchReferenceAndCpuInAllFeedingModes:CudaModelBf16.TrainedModelMatchesTheCpuInBf16Mode'
mv "$LOG/test_model_cuda.log" "$LOG/test_model_cuda_env1.log"
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
st "layers b1 A/B"
flash b1_off_1 26 $B1 --src-chain 0
flash b1_on_1 26 $B1 --src-chain 1
flash b1_off_2 26 $B1 --src-chain 0
flash b1_on_2 26 $B1 --src-chain 1
EL=$(($(date +%s) - T0))
if [ "$EL" -le 84 ]; then
  st "traced, on"
  flash b1_on_trace $((104 - EL)) $B1 --src-chain 1 --trace-csv "$LOG/trace_on.csv"
  [ -f "$LOG/trace_on.csv" ] && python3 bench/flash/timeline.py "$LOG/trace_on.csv" > "$LOG/tl_on.txt" 2>&1
else
  echo "no time for the trace (elapsed $EL s)"
fi
st "done"
grep -h "^decode_graph act" "$LOG"/b1_*.log | cut -c1-200
cd "$LOG" && tar -czf logs.tgz *.log $(ls tl_on.txt trace_on.csv 2>/dev/null) && rm -f *.log trace_on.csv tl_on.txt
