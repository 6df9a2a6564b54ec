#!/usr/bin/env bash
# Session 7, lead call 6: kAuto takes the tensor-core gemv from 2 tokens under bf16 x (not in
# the batch-invariant mode): the gemv / linear op cases, every model test, layers at batch 1 / 8
# (bf16 + copies) against the former policy (--gemv auto0).
#   bash bench/results/2026-11-30-h200-flash-logs/run24/run.sh LOG_DIR   (carry .gpubin, .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops gemv / linear"; gtest test_ops_cuda 60 '*gemv*:*linear*:LinearGemv.*'
st "test_model_cuda"; gtest test_model_cuda 100
st "layers batch 1, 8"
flash b18 45 --contexts 8192 --batches 1,8 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 40
flash b18_auto0 45 --contexts 8192 --batches 1,8 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 \
  --gemv auto0 --budget-s 40
st "done"
