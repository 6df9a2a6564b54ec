#!/usr/bin/env bash
# rout's one device call (NOTES 48, <= 270 s): kDmmaSplit router logits (--router dmmasplit) and
# the lean plan (--moe-plan lean). Op cases (router / route, incl. the new ones), the routed MoE op
# and the router op at T = 1, 8, 4096 (old vs new configs), the layers at batch 1 old / new twice
# each, test_model_cuda, then ncu sections of the router and plan kernels (op harness, T = 1, 8).
#   bash .gpubin-rout/run.sh $OUT/r   (carry .gpubin-rout)
set -uo pipefail
PACK=.gpubin-rout source bench/flash/device_lib.sh "$1"
NCU=/usr/local/cuda/bin/ncu
cat "$LOG/machine.txt"
st "op cases: router / route"
gtest test_ops_cuda 100 '*router*:*route*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
grep -E "split|lean|differ|FAIL" "$LOG/test_ops_cuda.log" | grep -vE "^\[       OK|^\[ RUN" | head -20
st "routed MoE op + router op, T = 1, 8, 4096"
flash route 60 --ops-moe-route --batches 1,8,4096
grep -E "^op moe_route|^op moe_router" "$LOG/route.log"
LA=(--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20)
for i in 1 2; do
  st "layers batch 1 old ($i)"
  flash layers_old$i 40 "${LA[@]}"
  st "layers batch 1 new ($i): --router dmmasplit --moe-plan lean"
  flash layers_new$i 40 "${LA[@]}" --router dmmasplit --moe-plan lean
done
st "test_model_cuda"
gtest test_model_cuda 100
st "ncu: router + plan kernels (op harness, T = 1, 8)"
timeout 45 $NCU --profile-from-start off --section SpeedOfLight --section WarpStateStats --section LaunchStats \
  --section Occupancy -k regex:"router_logits|moe_plan" .gpubin-flash/flash_layers --ops-moe-route-profile --batches 1,8 \
  > "$LOG/ncu.txt" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
tail -n 2 "$LOG/ncu.err"
grep -E "^  [a-z_]+.*\(|^profile|Duration|Registers Per|Issue Slots Busy|Warp Cycles Per Issued|DRAM Throughput|Achieved Occupancy|Block Size|Grid Size" "$LOG/ncu.txt" | sed 's/  */ /g' | cut -c1-110 | head -150
st "done"
tar -C "$LOG" -czf "$LOG/layers.tar.gz" layers_old1.log layers_old2.log layers_new1.log layers_new2.log 2>/dev/null && rm -f "$LOG"/layers_*.log
gzip "$LOG/test_ops_cuda.log" "$LOG/test_model_cuda.log" "$LOG/ncu.txt" "$LOG/route.log" 2>/dev/null
rm -f "$LOG/ncu.err"
