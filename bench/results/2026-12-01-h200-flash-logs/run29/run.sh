#!/usr/bin/env bash
# Session 10, lead call 1: the host-only changes since run 28 on a GPU (e9920df's engram_project,
# the shared env-digit parser and its model check, linear_multi's shared fp8-gemv predicate):
# every model test, the fp8 / hc op cases; the layers at batch 1 / 8 (no-regression check); and a
# fresh per-kernel ncu breakdown (eager, one step: prefill 8K, batch 1, batch 256) of where the time
# goes now (run 15's table is from session 5).
#   bash bench/results/2026-12-01-h200-flash-logs/run29/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_model_cuda"; gtest test_model_cuda 100
st "test_ops_cuda (fp8, hc, norm)"; gtest test_ops_cuda 100 '*fp8*:*hc_*:*norm*:*LinearGemv*'
st "layers bf16 + copies, 8K, batch 1 / 8"
flash flash 70 --contexts 8192 --batches 1,8 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 60
python3 bench/flash/report.py "$LOG/flash.log" 2>&1 | grep -E "^\| 8192 \| (1|8) \|" | head -4
st "ncu per kernel: prefill 8K, batch 1, batch 256 (eager)"
timeout 110 /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
  .gpubin-flash/flash_layers --contexts 8192 --batches 1,256 --steps 1 --prefill 8192 --activations bf16 \
  --bf16-weights on --engram-compare 0 --profile --graphs 0 --budget-s 90 > "$LOG/ncu.csv" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
python3 bench/flash/ncu_summary.py "$LOG/ncu.csv" 40 > "$LOG/ncu_summary.md" 2>&1; grep -c . "$LOG/ncu_summary.md"; head -c 1500 "$LOG/ncu_summary.md"
st "done"
gzip "$LOG/ncu.csv" "$LOG/flash.log" "$LOG/test_ops_cuda.log" 2>/dev/null
tail -5 "$LOG/ncu.err" > "$LOG/ncu.err.tail"; rm -f "$LOG/ncu.err"
