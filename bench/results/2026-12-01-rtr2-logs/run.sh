#!/usr/bin/env bash
# rtr2's one device call (NOTES 56, <= 110 s): the router head (--router-head 1 / DEEPINFER_ROUTER_HEAD=1).
# Op cases (router_head_*, moe_route_experts_*), the model's env check + graph replay with the head on
# (the tiny fixtures' dims fall back: plumbing only), the layers at batch 1 off / on alternating twice
# (decode_graph logits_fnv must agree), then the routed MoE op at T = 1, 8 (splitlean vs head) in what is left.
#   bash .gpubin-rtr2/run.sh $OUT/r   (carry .gpubin-rtr2)
set -uo pipefail
PACK=.gpubin-rtr2 source bench/flash/device_lib.sh "$1"
cat "$LOG/machine.txt"
st "op cases: router head, route op"
gtest test_ops_cuda 25 '*router_head*:*moe_route_experts*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
grep -E "head|FAIL" "$LOG/test_ops_cuda.log" | grep -E "mismatches=[1-9]|FAIL|err" | head -12
st "test_model_cuda (DEEPINFER_ROUTER_HEAD=1): env check, graph replay"
DEEPINFER_ROUTER_HEAD=1 gtest test_model_cuda 15 'CudaFp8Gemv.BadEnvironmentValueIsAnInputError:CudaGraphs.DecodeReplayEqualsEagerSteps'
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
for i in 1 2; do
  st "layers b1 off ($i)"
  flash b1_off_$i 25 $B1 --router-head 0
  st "layers b1 on ($i)"
  flash b1_on_$i 25 $B1 --router-head 1
done
grep -ho "logits_fnv=[0-9a-f]*" "$LOG"/b1_*.log | sort | uniq -c
left=$((104 - $(date +%s) + T0))
st "route op T = 1, 8 (timeout ${left}s)"
if [ "$left" -gt 8 ]; then
  flash route "$left" --ops-moe-route --batches 1,8
  grep -E "^op moe_route " "$LOG/route.log" | grep -E "splitlean|head|cfg=new"
fi
st "done"
tar -C "$LOG" -czf "$LOG/layers_b1.tgz" $(cd "$LOG" && ls b1_*.log) && rm -f "$LOG"/b1_*.log
gzip "$LOG/test_ops_cuda.log" "$LOG/test_model_cuda.log" "$LOG/route.log" 2>/dev/null
