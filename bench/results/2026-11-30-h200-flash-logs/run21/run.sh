#!/usr/bin/env bash
# Session 7, lead call 3 (integration of the session's helpers and the fp8-via-cuBLASLt change):
# model tests, layers (bf16 + copies: batch 1 / 256 / prefill 8K; fp8 + copies prefill; f32
# batch 1), attention / gemv / linear ops, then every op test.
#   bash bench/results/2026-11-30-h200-flash-logs/run21/run.sh LOG_DIR   (carry .gpubin, .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_model_cuda"; gtest test_model_cuda 100
st "layers bf16 + copies, 8K"
flash flash 110 --contexts 8192 --batches 1,256 --steps 3 --prefill 8192 --activations bf16 --bf16-weights on \
  --engram-compare 0 --budget-s 100
st "layers fp8 + copies prefill, f32 batch 1"
flash flash_fp8 50 --contexts 8192 --batches 1 --steps 1 --prefill 8192 --activations fp8 --bf16-weights on \
  --engram-compare 0 --budget-s 45
flash flash_f32 40 --contexts 8192 --batches 1 --steps 3 --activations f32 --engram-compare 0 --budget-s 32
st "ops: attention n = 1, 2, 4; gemv; linear fp8 / bf16"
flash ops_attn 30 --ops-attention --attn-ns 1,2,4,8 --attn-entries 640,128
grep -E "^op attention" "$LOG/ops_attn.log" | cut -c1-170 | head -40
flash ops_gemv 30 --ops-gemv --gemv-variants stream,tc --gemv-shapes wq_a,wq_b,wo_a,wo_b,shared_w1,shared_w2 \
  --gemv-ns 1,2,4,8
grep -E "^op gemv" "$LOG/ops_gemv.log" | cut -c1-170 | head -40
flash ops_linear 32 --ops-linear --fp8-kinds wgmmap --linear-ns 256,8192
grep -E "^op linear .*(act=fp8|gemm_bf16w)" "$LOG/ops_linear.log" | cut -c1-170 | head -40
flash flash_b1_tc 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 \
  --gemv tensor --budget-s 35
st "test_ops_cuda"; gtest test_ops_cuda 230
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/flash.log" 2>/dev/null
