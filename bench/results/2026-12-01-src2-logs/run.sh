#!/usr/bin/env bash
# Helper src2 (NOTES 59): the source chain's mode 2. Tests, then the 7 layers at batch 1
# off / mode 1 / mode 2 alternating (time-gated), then batch 8 off / 2 if time is left.
#   bash .gpubin-src2/run.sh LOG_DIR   (carry .gpubin-src2)
set -uo pipefail
PACK=.gpubin-src2 source bench/flash/device_lib.sh "$1"
st "test_model_cuda: CudaSourceChain (modes 1, 2 vs 0), bad values"
gtest test_model_cuda 30 '*CudaSourceChain*:*BadEnvironment*'
gzip -c "$LOG/test_model_cuda.log" > "$LOG/tmc_chain.log.gz"; rm -f "$LOG/test_model_cuda.log"
st "test_model_cuda with DEEPINFER_SRC_CHAIN=2: overlap, graphs, fixtures"
DEEPINFER_SRC_CHAIN=2 gtest test_model_cuda 30 'CudaOverlap.ConcurrentBranchesChangeNoBit:CudaGraphs.DecodeReplayEqualsEagerSteps:CudaModel.FixturesMatchReferenceAndCpuInAllFeedingModes:CudaModelBf16.TrainedModelMatchesTheCpuInBf16Mode'
gzip -c "$LOG/test_model_cuda.log" > "$LOG/tmc_env2.log.gz"; rm -f "$LOG/test_model_cuda.log"
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
B8="--contexts 8192 --batches 8 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
# One run if at least 16 s are left before 106 s; its log appended to layers.log (few files).
run1() {
  local name="$1"; shift
  local el=$(($(date +%s) - T0)) left
  left=$((106 - el))
  if [ "$left" -lt 16 ]; then echo "skip $name (elapsed $el s)"; return; fi
  st "$name"
  flash "$name" $((left < 22 ? left : 22)) "$@"
  { echo "#### $name: $*"; cat "$LOG/$name.log"; } >> "$LOG/layers.log"; rm -f "$LOG/$name.log"
}
run1 b1_off_1 $B1 --src-chain 0
run1 b1_m2_1 $B1 --src-chain 2
run1 b1_m1_1 $B1 --src-chain 1
run1 b1_off_2 $B1 --src-chain 0
run1 b1_m2_2 $B1 --src-chain 2
run1 b1_m1_2 $B1 --src-chain 1
run1 b8_off $B8 --src-chain 0
run1 b8_m2 $B8 --src-chain 2
st "done"
grep -h "^decode_graph act" "$LOG/layers.log" | cut -c1-200
