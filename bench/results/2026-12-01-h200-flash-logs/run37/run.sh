#!/usr/bin/env bash
# Session 12, lead call 2: kAuto's slim gemv at start order 2 (NOTES 44) in its op cases, and the
# stage arithmetic's timing diagnostics (no decode / no MMAs / the integer decode) at n = 1.
#   bash bench/results/2026-12-01-h200-flash-logs/run37/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: kAuto's tensor-map cases, the slim order cases, LinearGemv"
gtest test_ops_cuda 120 '*gemv_auto_tmap*:*slim_order*:LinearGemv.*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "gemv n = 1 op bench, graph timing: the arithmetic diagnostics"
flash ops_gemv 150 --ops-gemv --gemv-graph --gemv-shapes wq_b,wo_a,wo_b,shared_w1 --gemv-ns 1 \
  --gemv-variants auto,tmapslim_o2,tmapslim_o2_nd,tmapslim_o2_nm,tmapslim_o2_ndnm,tmapslim_o2_id,tmapslim_ncnx,tmapslim_ncnx_nd,tmapslim_ncnx_ndnm,tmapslimprobe,tmapslim_t64c1_o2,tmapslim_t64c1_o2_nd,tmapslim_t64c1_o2_nm,tmapslim_t64c1_o2_id
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//; s/ GBps=[^ ]+//' | cut -c1-130
st "done"
gzip test_ops_cuda.log ops_gemv.log 2>/dev/null
