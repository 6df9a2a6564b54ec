#!/usr/bin/env bash
# helper small: the op tests of the reworked kernels, an ncu per-kernel breakdown and the
# graph-replay layer times. bash .gpubin-small/run.sh   (carry .gpubin-small; logs in $OUT)
set -uo pipefail
LOG="${OUT:-/tmp/small_out}"; mkdir -p "$LOG"
B=/tmp/small_bin; rm -rf "$B"; mkdir -p "$B"; tar -C "$B" -xJf .gpubin-small/small.tar.xz || echo "untar failed"
LT="$(scripts/cublaslt_dir.sh)"
export LD_LIBRARY_PATH="$B/lib${LT:+:$LT}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv; cat "$B/commit.txt"; } > "$LOG/machine.txt" 2>&1
cat "$LOG/machine.txt"
echo "== $(date +%T) ops"
timeout 45 "$B/test_ops_cuda" --gtest_filter='*former*:*hc_*:*rope*:*router*:*fused*:*rms*:*moe_experts_v41_fp4_n1*:*moe_experts_v41_fp4_n8*:*moe_experts_f32_n13_badid*:*moe_experts_fp8_n40*' > "$LOG/ops_cuda.log" 2>&1; echo "ops rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$LOG/ops_cuda.log" | head -30
grep "former" "$LOG/ops_cuda.log" | grep -v "err/rms=0.000e+00\|mismatches=0" | head -10
echo "== $(date +%T) ncu"
timeout 75 /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
  "$B/flash_layers" --contexts 8192 --batches 1,256 --steps 1 --prefill 8192 --activations bf16 --bf16-weights on \
  --engram-compare 0 --profile --tokenizer "$B/tokenizer.json" > "$LOG/ncu.csv" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
python3 bench/flash/ncu_summary.py "$LOG/ncu.csv" 45 > "$LOG/ncu_summary.md" 2>&1
grep -E "Profiled|hc_|router|rope|moe_combine|round_kernel" "$LOG/ncu_summary.md" | head -40
gzip -9 "$LOG/ncu.csv"
echo "== $(date +%T) layers"
timeout 40 "$B/flash_layers" --contexts 8192 --batches 1,256 --steps 2 --prefill 8192 --activations bf16 \
  --bf16-weights on --engram-compare 0 --budget-s 35 --tokenizer "$B/tokenizer.json" > "$LOG/flash.log" 2>&1; echo "layers rc=$?"
grep -E "^(prefill|decode_graph |decode )" "$LOG/flash.log" | cut -c1-220
export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
echo "== $(date +%T) model"
timeout 30 "$B/test_model_cuda" > "$LOG/model_cuda.log" 2>&1; echo "model rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/model_cuda.log" | head -20
echo "== $(date +%T) done"
