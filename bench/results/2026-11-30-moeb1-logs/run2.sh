#!/usr/bin/env bash
# moeb1's retry of the part of run.sh whose logs did not come back (13 files > the 8-file limit):
# the op tests and the routed-MoE op timings only; 2 files.
set -uo pipefail
O="$1"; mkdir -p "$O"
B=/tmp/moeb1_bin; [ -x "$B/flash_layers" ] || { rm -rf "$B" && mkdir -p "$B" && tar -C "$B" -xJf .gpubin-moeb1/bin.tar.xz; }
LT_DIR="$(scripts/cublaslt_dir.sh 2>/dev/null)"
export LD_LIBRARY_PATH="$B/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
T0=$(date +%s)
timeout 50 "$B/test_ops_cuda" --gtest_filter='*moe_route_experts*:*router_logits_dmma*:*moe_router*:*moe_experts_v41_fp4_n1:*moe_experts_v41_fp4_n8:*moe_experts_v41_fp4_bf16_n1:*moe_experts_v41_fp4_bf16_n5:*moe_experts_v41_fp4_bf16_n8:*moe_experts_fp4tc_*_n1:*moe_experts_fp4tc_*_n3:*moe_experts_fp4tc_*_n8:*moe_experts_fp4tc_*_n40_invariant' \
  > "$O/ops_tests.log" 2>&1; echo "ops rc=$? $(( $(date +%s) - T0 ))s"
grep -E "FAILED|mismatches=[1-9]" "$O/ops_tests.log" | head -20; grep -E "^\[  PASSED|^\[==========\]" "$O/ops_tests.log" | tail -2
timeout 30 "$B/flash_layers" --ops-moe-route --batches 1,8 > "$O/route.log" 2>&1; echo "route rc=$? $(( $(date +%s) - T0 ))s"
grep "^op moe_route" "$O/route.log"
