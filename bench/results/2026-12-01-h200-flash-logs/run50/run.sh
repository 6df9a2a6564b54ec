#!/usr/bin/env bash
# Session 14, lead call 4: rtr2's router head modes 2 (spread clusters) and 3 (spread + 96 registers)
# that its call did not reach (NOTES 56), against the defaults at batch 1; and the source chain at batch
# 256 (mode 0 vs the default 2, alternating: run 49's batch 256 was 2.4% slower than run 45's, in
# every layer kind, the prefill too: machine spread or the chain's branch at 256 rows?).
#   bash bench/results/2026-12-01-h200-flash-logs/run50/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: router head, route"
gtest test_ops_cuda 40 '*router_head*:*moe_route_experts*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
B="--contexts 8192 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
for r in off_1:0 m3_1:3 m2_1:2 m3_2:3 off_2:0; do
  st "layers b1 router head ${r%%:*}"
  flash b1_${r%%:*} 30 $B --batches 1 --router-head ${r##*:}
done
for r in s0_1:0 s2_1:2 s0_2:0 s2_2:2; do
  st "layers b256 src chain ${r%%:*}"
  flash b256_${r%%:*} 40 $B --batches 256 --src-chain ${r##*:}
done
tar -C "$LOG" -czf "$LOG/layers.tgz" $(cd "$LOG" && ls b1_*.log b256_*.log) && rm -f "$LOG"/b1_*.log "$LOG"/b256_*.log
st "done"
gzip "$LOG/test_ops_cuda.log" 2>/dev/null
