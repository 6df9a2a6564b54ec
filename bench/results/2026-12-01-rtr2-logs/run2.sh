#!/usr/bin/env bash
# NOT RUN (prepared for a later call, NOTES 56): the router head's untested modes 2 (spread clusters)
# and 3 (spread + 96 registers, so the shared pair's CTA fits beside a head block), ~100 s.
#   bash .gpubin-rtr2/run2.sh $OUT/r   (carry .gpubin-rtr2; pack of the commit that adds modes 2 / 3)
set -uo pipefail
PACK=.gpubin-rtr2 source bench/flash/device_lib.sh "$1"
cat "$LOG/machine.txt"
st "op cases: router head (modes 1..3), route op"
gtest test_ops_cuda 25 '*router_head*:*moe_route_experts*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
for r in off_1:0 m3_1:3 m2_1:2 m3_2:3 off_2:0; do
  st "layers b1 ${r%%:*}"
  flash b1_${r%%:*} 19 $B1 --router-head ${r##*:}
done
st "done"
tar -C "$LOG" -czf "$LOG/layers_b1.tgz" $(cd "$LOG" && ls b1_*.log) && rm -f "$LOG"/b1_*.log
gzip "$LOG/test_ops_cuda.log" 2>/dev/null
