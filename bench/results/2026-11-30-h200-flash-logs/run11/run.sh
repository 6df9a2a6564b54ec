#!/usr/bin/env bash
# Integration run (lead): GPU tests + CLI checks, then the Flash layers in both
# activation modes (decode 4K/8K at batch 1, 8, 256 eager + graph; prefill 4K and 8K).
#   bash .gpubin-int/run.sh LOG_DIR      (carry .gpubin and .gpubin-int: it holds flash_layers and the tokenizer as .tar.xz)
set -uo pipefail
LOG="$1"; mkdir -p "$LOG/g" "$LOG/f"
tar -xJf .gpubin-int/flash.tar.xz && tar -xJf .gpubin-int/tok.tar.xz || echo "untar failed"
echo "== $(date +%T) gpu_run"
SANITIZE=${SANITIZE:-1} timeout ${GPU_T:-200} bash scripts/gpu_run.sh "$LOG/g" > "$LOG/g/gpu_run.out" 2>&1; echo "gpu_run rc=$?"
tail -5 "$LOG/g/steps.log" 2>/dev/null
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/g/model_cuda.log" "$LOG/g/ops_cuda.log" | head -40
echo "== $(date +%T) flash layers"
OPS=${OPS:-1} TORCH=${TORCH:-1} LAYERS_T=${LAYERS_T:-225} OPS_T=${OPS_T:-110} TORCH_T=${TORCH_T:-90} bash bench/flash/run_h200.sh "$LOG/f" --contexts 4096,8192 --batches 1,8,256 \
  --steps 4 --prefill 4096,8192 --activations f32,bf16 --engram-compare 0 --budget-s 215 > "$LOG/f/run.out" 2>&1
echo "flash rc=$?"
grep -E "^(prefill|decode|skip|setup)" "$LOG/f/flash.log" | cut -c1-160 | head -40
if [ -n "${EXTRA:-}" ]; then echo "== $(date +%T) extra"; eval "$EXTRA"; fi
echo "== $(date +%T) done"
# one tarball of everything (file count limit)
tar -C "$LOG" -czf "$LOG.tgz" . && rm -rf "$LOG" && mkdir -p "$LOG" && mv "$LOG.tgz" "$LOG/logs.tgz"
