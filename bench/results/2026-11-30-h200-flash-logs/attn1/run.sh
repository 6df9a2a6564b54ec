#!/usr/bin/env bash
# Helper attn1 (NOTES 23), one device call: the small-batch attention kernel's op cases (A/B vs
# the former kernel, oracle, RoPE, invariance), the op benchmark (new vs former, n = 1..16,
# 640 / 128 entries), batch-1 layers with the new kernel and with the former one (same binary,
# --attn-small former), then ncu of the small kernels at n = 1 if time is left.
#   bash .gpubin-attn1/run.sh LOG_DIR    (carry .gpubin-attn1)
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
T0=$(date +%s); END=$((T0 + 122))
left() { echo $((END - $(date +%s))); }
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*"; }
tar -xJf .gpubin-attn1/tok.tar.xz || echo "tok untar failed"
B=/tmp/attn1bin; rm -rf "$B" && mkdir -p "$B" && tar -C "$B" -xJf .gpubin-attn1/attn1.tar.xz || echo "untar failed"
tar -C "$B" -xJf .gpubin-attn1/model.tar.xz || echo "model untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$B/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; cat "$B/commit.txt"; } > "$LOG/machine.txt" 2>&1
st "op cases"
timeout 40 "$B/test_ops_cuda" --gtest_filter='*sink_attention_small*:*sink_attention_bf16_small*:*fused_sink_attention*' > "$LOG/ops.log" 2>&1; ops_rc=$?; echo "ops rc=$ops_rc"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/ops.log" | head -20; tail -1 "$LOG/ops.log"
st "op bench"
timeout 25 "$B/flash_layers" --ops-attention --attn-ns 1,2,4,8,16 --attn-entries 640,128 > "$LOG/op_bench.log" 2>&1; echo "bench rc=$?"
grep -E "clusters|path=small" "$LOG/op_bench.log" | sed 's/ layout=decode//' | cut -c1-120
FL="--contexts 8192 --batches 1 --steps 3 --activations bf16,f32 --bf16-weights on --engram-compare 0"
st "layers after"
timeout $(( $(left) < 45 ? $(left) : 45 )) "$B/flash_layers" $FL --budget-s 40 > "$LOG/layers_after.log" 2>&1; echo "rc=$?"
grep -E "^decode_graph act" "$LOG/layers_after.log" | cut -c1-220
st "layers before"
timeout $(( $(left) < 45 ? $(left) : 45 )) "$B/flash_layers" $FL --attn-small former --budget-s 40 > "$LOG/layers_before.log" 2>&1; echo "rc=$?"
grep -E "^decode_graph act" "$LOG/layers_before.log" | cut -c1-220
if [ "$ops_rc" != 0 ] && [ "$(left)" -gt 45 ]; then
  st "test_model_cuda (op cases failed)"
  DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" timeout 45 "$B/test_model_cuda" > "$LOG/model_cuda.log" 2>&1; echo "model rc=$?"
  tail -3 "$LOG/model_cuda.log"
fi
if [ "$(left)" -gt 12 ]; then
  st "ncu small kernels n = 1, 640 entries"
  timeout $(( $(left) - 2 )) /usr/local/cuda/bin/ncu --profile-from-start off --section SpeedOfLight --section WarpStateStats \
    --section LaunchStats --section Occupancy --csv --page details "$B/flash_layers" --ops-attention --attn-ns 1 \
    --attn-entries 640 --attn-profile > "$LOG/ncu.csv" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
  grep -c "small_attention_kernel\|former_attention_kernel" "$LOG/ncu.csv"
fi
st "done"
gzip -f "$LOG/ops.log" 2>/dev/null
