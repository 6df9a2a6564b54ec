#!/usr/bin/env bash
# Session 6, lead call 3 (final): model tests (fp8 test fixed, gemv PDL), layers A/B of the gemv
# PDL at batch 1 (bf16 + copies) and with it batch 256 + the 8K prefill (the warp-specialized MoE
# tiles now kAuto), f32 batch 1 with PDL, then every op test.
#   bash .gpubin-int/run8.sh LOG_DIR    (carry .gpubin and .gpubin-int)
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
T0=$(date +%s)
tar -xJf .gpubin-int/flash.tar.xz && tar -xJf .gpubin-int/tok.tar.xz || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
BIN=/tmp/deepinfer_gpubin; rm -rf "$BIN" && mkdir -p "$BIN" && tar -C "$BIN" -xJf .gpubin/gpubin.tar.xz
{ nvidia-smi --query-gpu=name,driver_version --format=csv; cat .gpubin-flash/commit.txt "$BIN/commit.txt"; } > "$LOG/machine.txt" 2>&1
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*"; }
FL=".gpubin-flash/flash_layers --contexts 8192 --steps 3 --engram-compare 0"
st "test_model_cuda"
DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" LD_LIBRARY_PATH="$BIN/lib:$LD_LIBRARY_PATH" timeout 80 "$BIN/test_model_cuda" > "$LOG/model_cuda.log" 2>&1; echo "model rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/model_cuda.log" | head; tail -1 "$LOG/model_cuda.log"
st "layers bf16w batch 1, pdl 0"
timeout 40 $FL --batches 1 --activations bf16 --bf16-weights on --gemv-pdl 0 --budget-s 35 > "$LOG/b1_pdl0.log" 2>&1; echo "rc=$?"
grep -E "^decode_graph" "$LOG/b1_pdl0.log" | cut -c1-200
st "layers bf16w batch 1 + 256 + prefill, pdl 1"
timeout 60 $FL --batches 1,256 --prefill 8192 --activations bf16 --bf16-weights on --gemv-pdl 1 --budget-s 55 > "$LOG/flash_pdl1.log" 2>&1; echo "rc=$?"
grep -E "^(prefill|decode_graph)" "$LOG/flash_pdl1.log" | cut -c1-200
st "layers f32 batch 1, pdl 1"
timeout 40 $FL --batches 1 --activations f32 --gemv-pdl 1 --budget-s 35 > "$LOG/f32_pdl1.log" 2>&1; echo "rc=$?"
grep -E "^decode_graph" "$LOG/f32_pdl1.log" | cut -c1-200
st "test_ops_cuda"
DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" LD_LIBRARY_PATH="$BIN/lib:$LD_LIBRARY_PATH" timeout 200 "$BIN/test_ops_cuda" > "$LOG/ops_cuda.log" 2>&1; echo "ops rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/ops_cuda.log" | head -20; tail -1 "$LOG/ops_cuda.log"
st "done"
gzip "$LOG/ops_cuda.log"
