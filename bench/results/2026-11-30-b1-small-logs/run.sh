#!/usr/bin/env bash
# b1misc (session 6): batch-1 small kernels. One device call, <= 135 s:
# op tests of the touched families, the attention op (invariant vs small-batch kernel),
# Flash layers at batch 1 / 8K in f32 and bf16 + copies, then an ncu of one eager batch-1
# step (bf16 + copies) with whatever time is left.
#   bash .gpubin-b1misc/run.sh $OUT/b1     (carry .gpubin-b1misc)
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
T0=$(date +%s)
D=.gpubin-b1misc
tar -C "$D" -xJf "$D/bin.tar.xz" || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$PWD/$D/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; cat "$D/commit.txt"; } > "$LOG/machine.txt" 2>&1
echo "== $(date +%T) op tests"
timeout 40 "$D/test_ops_cuda" --gtest_filter='*sink_attention*:*hc_*:*moe_router*:*router_logits*:*rope*:*collapse*:*former*' \
  > "$LOG/ops_tests.log" 2>&1; echo "ops rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/ops_tests.log" | head -30; tail -n1 "$LOG/ops_tests.log"
echo "== $(date +%T) attention op"
timeout 25 "$D/flash_layers" --ops-attention > "$LOG/attn_ops.log" 2>&1; echo "attn rc=$?"
grep "attention_mode" "$LOG/attn_ops.log" | cut -c1-140
echo "== $(date +%T) layers f32 + bf16w, batch 1, 8K"
timeout 55 "$D/flash_layers" --contexts 8192 --batches 1 --steps 3 --prefill 0 --activations f32,bf16 --bf16-weights on \
  --engram-compare 0 --tokenizer "$D/tokenizer.json" --budget-s 50 > "$LOG/layers.log" 2>&1; echo "layers rc=$?"
grep -E "^(decode_graph |graph_nodes|skip)" "$LOG/layers.log" | cut -c1-230
LEFT=$(( 134 - ($(date +%s) - T0) ))
echo "== $(date +%T) ncu batch 1 bf16w (${LEFT} s left)"
if [ "$LEFT" -gt 30 ]; then
  timeout "$LEFT" /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
    "$D/flash_layers" --contexts 8192 --batches 1 --steps 1 --prefill 0 --activations bf16 --bf16-weights on --engram-compare 0 \
    --tokenizer "$D/tokenizer.json" --profile --graphs 0 --budget-s 60 > "$LOG/ncu.csv" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
  python3 bench/flash/ncu_summary.py "$LOG/ncu.csv" 40 > "$LOG/ncu_summary.md" 2>&1; grep -E "Profiled" "$LOG/ncu_summary.md"
  gzip "$LOG/ncu.csv"
fi
echo "== $(date +%T) done"
