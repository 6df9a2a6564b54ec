#!/usr/bin/env bash
# On the GPU machine, from the repository root: the top-k bench (ours, both paths, and
# the indexer_select op), torch.topk at the same shapes, then test_model_cuda and
# test_ops_cuda (all). Each part under `timeout`, the run continues on failure; the op
# tests get what is left of a ~115 s budget. Logs to $1.
set -uo pipefail
OUT="${1:?log dir}"
B="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
T0=$(date +%s)
stamp() { echo "== $(date +%T) +$(( $(date +%s) - T0 ))s $*" | tee -a "$OUT/steps.log"; }
stamp machine
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; cat "$B/commit.txt"; } \
  >"$OUT/machine.txt" 2>&1
stamp "flash_layers --indexer-only"
timeout 20 "$B/flash_layers" --indexer-only >"$OUT/topk.log" 2>&1; echo "rc=$?" | tee -a "$OUT/steps.log"
stamp "torch_baselines.py --topk-only"
PYTHONUNBUFFERED=1 timeout 24 python3 "$B/torch_baselines.py" --topk-only >"$OUT/torch.log" 2>&1
echo "rc=$?" | tee -a "$OUT/steps.log"
stamp test_model_cuda
timeout 32 "$B/test_model_cuda" >"$OUT/model_cuda.log" 2>&1; echo "rc=$?" | tee -a "$OUT/steps.log"
left=$(( 114 - ($(date +%s) - T0) ))
[ "$left" -lt 20 ] && left=20
stamp "test_ops_cuda (timeout ${left}s)"
timeout "$left" "$B/test_ops_cuda" >"$OUT/ops_cuda.log" 2>&1; echo "rc=$?" | tee -a "$OUT/steps.log"
stamp done
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$OUT/model_cuda.log" "$OUT/ops_cuda.log" | head -30
grep -c "topk_kernel" "$OUT/topk.log"; grep -c "torch topk" "$OUT/torch.log"
