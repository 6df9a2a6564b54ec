#!/usr/bin/env bash
# Final run of session 4 (lead): GPU tests + CLI checks, the MoE op A/B (fused small tiles vs
# former), the layers in bf16 mode with and without the bf16 weight copies.
#   bash .gpubin-int/run2.sh LOG_DIR     (carry .gpubin and .gpubin-int)
set -uo pipefail
LOG="$1"; mkdir -p "$LOG/g" "$LOG/f"
tar -xJf .gpubin-int/flash.tar.xz && tar -xJf .gpubin-int/tok.tar.xz || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"; export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "== $(date +%T) gpu_run"
SANITIZE=1 timeout 210 bash scripts/gpu_run.sh "$LOG/g" > "$LOG/g/gpu_run.out" 2>&1; echo "gpu_run rc=$?"
tail -4 "$LOG/g/steps.log" 2>/dev/null
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/g/model_cuda.log" "$LOG/g/ops_cuda.log" | head -30
grep -E "memcheck" "$LOG/g/gpu_run.out"
echo "== $(date +%T) moe ops"
timeout 60 .gpubin-flash/flash_layers --ops-moe --batches 1,8,128,256 > "$LOG/f/ops_moe.log" 2>&1; echo "ops-moe rc=$?"
grep "op moe_grouped" "$LOG/f/ops_moe.log" | grep -v "T=4096\|T=8192" | cut -c1-150
echo "== $(date +%T) layers bf16, copies off and on"
timeout 150 .gpubin-flash/flash_layers --contexts 8192 --batches 1,256 --steps 4 --prefill 8192 --activations bf16 \
  --bf16-weights off,on --engram-compare 0 --budget-s 140 > "$LOG/f/flash.log" 2>&1; echo "layers rc=$?"
grep -E "^(prefill|decode_graph |setup act|skip)" "$LOG/f/flash.log" | cut -c1-200
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > "$LOG/f/machine.txt" 2>&1; cat .gpubin-flash/commit.txt >> "$LOG/f/machine.txt"
echo "== $(date +%T) done"
tar -C "$LOG" -czf "$LOG.tgz" . && rm -rf "$LOG" && mkdir -p "$LOG" && mv "$LOG.tgz" "$LOG/logs.tgz"
