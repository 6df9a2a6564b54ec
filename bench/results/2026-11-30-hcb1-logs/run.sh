#!/usr/bin/env bash
# helper hcb1 (session 8), its one device call: DEEPINFER_B1_FUSE=0 (the former kernels) vs =8
# (the one-launch hc site, the q / kv norm pair with the ring write, batched single-block norms).
# Layers (graph per-layer times) first, then the op cases and the model tests, then an ncu time
# breakdown of one eager batch-1 step with the new path if time is left.
#   bash run.sh LOG_DIR   (from the repository root; carry .gpubin-hcb1 = bins.tar.xz + tok.tar.xz)
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
T0=$(date +%s)
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*"; }
P=.gpubin-hcb1
tar -xJf $P/tok.tar.xz || echo "untar tok failed"
R=/tmp/hcb1_bins; rm -rf $R && mkdir -p $R && tar -C $R -xJf $P/bins.tar.xz || echo "untar bins failed"
B=$R/hcbin
LT_DIR="$(scripts/cublaslt_dir.sh)"
export LD_LIBRARY_PATH="$B/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; cat $B/commit.txt; } > "$LOG/machine.txt" 2>&1
gtest() {
  local name="$1" to="$2" filter="$3" tag="$4"
  DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" timeout "$to" "$B/$name" --gtest_filter="$filter" > "$LOG/$name.$tag.log" 2>&1
  echo "$name $tag rc=$?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/$name.$tag.log" | head -30; tail -1 "$LOG/$name.$tag.log"
}
flash() {
  local name="$1" to="$2"; shift 2
  timeout "$to" "$B/flash_layers" "$@" > "$LOG/$name.log" 2>&1
  echo "$name rc=$?"
  grep -E "^(decode_graph |graph_nodes|skip|done)" "$LOG/$name.log" | cut -c1-220
}
L=(--contexts 8192 --batches 1,8 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 40)
st "layers old"; DEEPINFER_B1_FUSE=0 flash b18_fuse0 50 "${L[@]}"
st "layers new"; DEEPINFER_B1_FUSE=8 flash b18_fuse8 50 "${L[@]}"
F='*hc_*:*norm*:*rms*'
st "ops new"; DEEPINFER_B1_FUSE=8 gtest test_ops_cuda 30 "$F" fuse8
st "ops old"; DEEPINFER_B1_FUSE=0 gtest test_ops_cuda 25 "$F" fuse0
st "model new"; DEEPINFER_B1_FUSE=8 gtest test_model_cuda 70 '*' fuse8
left=$((250 - ($(date +%s) - T0)))
if [ "$left" -gt 30 ]; then
  st "ncu b1 new (${left}s)"
  DEEPINFER_B1_FUSE=8 timeout "$left" /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none \
    --metrics gpu__time_duration.sum --csv "$B/flash_layers" --contexts 8192 --steps 1 --batches 1 --activations bf16 \
    --bf16-weights on --engram-compare 0 --profile --graphs 0 --budget-s 200 > "$LOG/ncu_b1.csv" 2> "$LOG/ncu_b1.err"
  echo "ncu rc=$?"
  python3 bench/flash/ncu_summary.py "$LOG/ncu_b1.csv" 40 > "$LOG/ncu_b1_summary.md" 2>&1; head -45 "$LOG/ncu_b1_summary.md"
  gzip "$LOG/ncu_b1.csv"
fi
st "done"
