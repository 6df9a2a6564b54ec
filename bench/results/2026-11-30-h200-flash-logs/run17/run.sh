#!/usr/bin/env bash
# Session 6, lead call 2 (integration of the session's helpers): layers (bf16 + copies: batch
# 1 / 256 / prefill 8K; fp8 prefill; f32 batch 1), router + attention ops, then the GPU tests.
#   bash .gpubin-int/run7.sh LOG_DIR [OPS_FILTER]    (carry .gpubin and .gpubin-int)
set -uo pipefail
LOG="$1"; FILTER="${2:-*}"; mkdir -p "$LOG/g" "$LOG/f"
T0=$(date +%s)
tar -xJf .gpubin-int/flash.tar.xz && tar -xJf .gpubin-int/tok.tar.xz || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$LOG/f/machine.txt" 2>&1; cat .gpubin-flash/commit.txt >> "$LOG/f/machine.txt"
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*"; }
BIN=/tmp/deepinfer_gpubin; rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf .gpubin/gpubin.tar.xz
cat "$BIN/commit.txt" >> "$LOG/f/machine.txt"
st "test_model_cuda"
DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" LD_LIBRARY_PATH="$BIN/lib:$LD_LIBRARY_PATH" timeout 90 "$BIN/test_model_cuda" > "$LOG/g/model_cuda.log" 2>&1; echo "model rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/g/model_cuda.log" | head -30; tail -2 "$LOG/g/model_cuda.log"
st "layers bf16w 8K"
timeout 110 .gpubin-flash/flash_layers --contexts 8192 --batches 1,256 --steps 3 --prefill 8192 --activations bf16 \
  --bf16-weights on --engram-compare 0 --budget-s 100 > "$LOG/f/flash.log" 2>&1; echo "layers rc=$?"
grep -E "^(prefill|decode_graph |skip|setup)" "$LOG/f/flash.log" | cut -c1-200
st "layers fp8 prefill + f32 batch 1"
timeout 45 .gpubin-flash/flash_layers --contexts 8192 --batches 1 --steps 1 --prefill 8192 --activations fp8 \
  --bf16-weights on --engram-compare 0 --budget-s 40 > "$LOG/f/flash_fp8.log" 2>&1; echo "fp8 rc=$?"
grep -E "^(prefill|skip)" "$LOG/f/flash_fp8.log" | cut -c1-200
timeout 45 .gpubin-flash/flash_layers --contexts 8192 --batches 1 --steps 3 --activations f32 \
  --engram-compare 0 --budget-s 40 > "$LOG/f/flash_f32.log" 2>&1; echo "f32 rc=$?"
grep -E "^(decode_graph |skip)" "$LOG/f/flash_f32.log" | cut -c1-200
st "ops router + attention"
timeout 25 .gpubin-flash/flash_layers --ops-attention --batches 1,8,256 > "$LOG/f/ops_attn.log" 2>&1; echo "attn rc=$?"
grep -E "^op attention_mode" "$LOG/f/ops_attn.log" | cut -c1-160
st "ops linear fp8 (wgmmap vs wgmma) + torch _scaled_mm"
timeout 30 .gpubin-flash/flash_layers --ops-linear --fp8-kinds wgmmap,wgmma --linear-ns 256,8192 > "$LOG/f/ops_linear.log" 2>&1; echo "linear rc=$?"
grep -E "^op linear.*act=fp8" "$LOG/f/ops_linear.log" | cut -c1-170 | head -40
PYTHONUNBUFFERED=1 timeout 30 python3 bench/flash/torch_baselines.py --linear-only --linear-ns 256,8192 > "$LOG/f/torch_linear.log" 2>&1; echo "torch rc=$?"
tail -20 "$LOG/f/torch_linear.log" | cut -c1-170
st "test_ops_cuda $FILTER"
DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" LD_LIBRARY_PATH="$BIN/lib:$LD_LIBRARY_PATH" timeout 200 "$BIN/test_ops_cuda" --gtest_filter="$FILTER" > "$LOG/g/ops_cuda.log" 2>&1; echo "ops rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/g/ops_cuda.log" | head -30; tail -2 "$LOG/g/ops_cuda.log"
st "done"
gzip "$LOG/g/ops_cuda.log" "$LOG/f/flash.log" 2>/dev/null
