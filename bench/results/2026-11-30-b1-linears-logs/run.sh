#!/usr/bin/env bash
# helper b1lin, one device call: gemv ops tests, the gemv op bench, batch-1 layers both modes
# with the new gemv (default) and the former one (--gemv stream).   bash .gpubin-b1lin/run.sh
set -uo pipefail
L="$OUT"; mkdir -p "$L"
B=/tmp/b1; rm -rf "$B" && mkdir -p "$B" && tar -C "$B" -xJf .gpubin-b1lin/b1.tar.xz || echo "untar failed"
mkdir -p .cache/deepseek_tokenizer && cp "$B/tokenizer.json" .cache/deepseek_tokenizer/ 2>/dev/null
LT_DIR="$(bash scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$B/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$L/machine.txt" 2>&1; cat "$B/commit.txt" >> "$L/machine.txt"
echo "== $(date +%T) tests"
timeout 30 "$B/test_ops_cuda" --gtest_filter='Ops/CudaVsCpu.MatchesOracle/gemv_*:LinearGemv.*:Ops/CudaVsCpu.MatchesOracle/linear_path_*:Ops/CudaVsCpu.MatchesOracle/linear_f32_*:Ops/CudaVsCpu.MatchesOracle/swiglu*' > "$L/ops_cuda.log" 2>&1; echo "tests rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|tests ran" "$L/ops_cuda.log" | head -40
echo "== $(date +%T) gemv ops"
timeout 25 "$B/flash_layers" --ops-gemv > "$L/gemv.log" 2>&1; echo "gemv rc=$?"
grep -E "n=1 .*act=f32|n=1 |gemv_multi" "$L/gemv.log" | grep -E "act=f32 n=1 |gemv_multi" | cut -c1-200
echo "== $(date +%T) layers bulk"
timeout 35 "$B/flash_layers" --contexts 8192 --batches 1 --steps 3 --prefill 0 --activations f32,bf16 --bf16-weights on \
  --engram-compare 0 --budget-s 30 > "$L/layers_bulk.log" 2>&1; echo "layers rc=$?"
grep -E "^(decode|skip|setup act)" "$L/layers_bulk.log" | cut -c1-260
echo "== $(date +%T) layers stream"
timeout 35 "$B/flash_layers" --gemv stream --contexts 8192 --batches 1 --steps 3 --prefill 0 --activations f32,bf16 \
  --bf16-weights on --engram-compare 0 --budget-s 30 > "$L/layers_stream.log" 2>&1; echo "layers rc=$?"
grep -E "^(decode|skip|setup act)" "$L/layers_stream.log" | cut -c1-260
echo "== $(date +%T) done"
