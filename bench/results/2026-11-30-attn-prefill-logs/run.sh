#!/usr/bin/env bash
# attnpf (NOTES 15): the wgmma sink attention. One device call:
#   bash .gpubin-attnpf/run.sh "$OUT"      (carry .gpubin-attnpf)
# attention + indexer op tests (GPU vs CPU), flash_layers --ops-attention (both bf16
# kernels), then the 7 layers at 8K: prefill 8192 and batch 256 in one process.
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
D=.gpubin-attnpf
tar -C "$D" -xJf "$D/bin.tar.xz" && tar -xJf "$D/tok.tar.xz" || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$PWD/$D/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$LOG/machine.txt" 2>&1; cat "$D/commit.txt" >> "$LOG/machine.txt"
echo "== $(date +%T) op tests"
timeout 45 "$D/test_ops_cuda" --gtest_filter='*sink_attention*:*indexer*' > "$LOG/ops_cuda.log" 2>&1; echo "ops rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/ops_cuda.log" | head -40; tail -2 "$LOG/ops_cuda.log"
grep -E "wgmma" "$LOG/ops_cuda.log" | grep -E "metric" | head -40
echo "== $(date +%T) ops-attention"
timeout 25 "$D/flash_layers" --ops-attention > "$LOG/attn_ops.log" 2>&1; echo "attn rc=$?"
grep -E "attention_mode" "$LOG/attn_ops.log"
echo "== $(date +%T) layers 8K: prefill 8192, batch 256"
timeout 72 "$D/flash_layers" --contexts 8192 --batches 256 --steps 2 --prefill 8192 --activations bf16 \
  --bf16-weights on --engram-compare 0 --budget-s 60 > "$LOG/layers.log" 2>&1; echo "layers rc=$?"
grep -E "^(setup|prefill|decode |decode_graph |skip)" "$LOG/layers.log" | cut -c1-240
echo "== $(date +%T) done"
