#!/usr/bin/env bash
# NOT RUN (proposed follow-up to run.sh, NOTES 31): the lean variant of fp8 mode's decode kernel
# (DEEPINFER_FP8_GEMV_LEAN=1) -- its op cases (bitwise vs the first kernel, oracle, invariance),
# the op timings (path=new / lean / old), and the layers at batch 1 / 8 with the kernel at every
# n (DEEPINFER_FP8_GEMV=1), first and lean variants, against the default (from n = 4).
#   bash .gpubin-gv8a/run2.sh LOG_DIR   (after BUILD=build-gpu OUTDIR=/work/main/.gpubin-gv8a bench/flash/pack_all.sh
#                                       at 974b9fe or later; carry .gpubin-gv8a only)
set -uo pipefail
PACK=.gpubin-gv8a source bench/flash/device_lib.sh "$1"
st "test_ops_cuda (fp8 cases)"; gtest test_ops_cuda 60 '*fp8gemv*:*linear_fp8_auto_*_n1_*:*linear_fp8_auto_*_n8_*'
st "ops fp8gemv"; flash ops_fp8gemv 60 --ops-fp8gemv --gemv-ns 1,2,4,8
grep -E "^op fp8gemv" "$LOG/ops_fp8gemv.log" | sed -e 's/ rows=[0-9]* cols=[0-9]*//' | cut -c1-150
lay() {  # NAME ENV...: the layers, fp8 + copies, batch 1 / 8
  local name="$1"; shift
  env "$@" timeout 55 .gpubin-flash/flash_layers --contexts 8192 --batches 1,8 --steps 3 --activations fp8 \
    --bf16-weights on --engram-compare 0 --budget-s 50 > "$LOG/$name.log" 2>&1
  echo "$name rc=$?"; grep -E "^(decode_graph |fp8gemv_launches)" "$LOG/$name.log" | cut -c1-160
}
st "layers"; lay layers_default DEEPINFER_FP8_GEMV= ; lay layers_all DEEPINFER_FP8_GEMV=1
lay layers_all_lean DEEPINFER_FP8_GEMV=1 DEEPINFER_FP8_GEMV_LEAN=1
st "test_model_cuda (lean, every n)"; DEEPINFER_FP8_GEMV=1 DEEPINFER_FP8_GEMV_LEAN=1 gtest test_model_cuda 75
st "done"; gzip "$LOG"/*.log 2>/dev/null
