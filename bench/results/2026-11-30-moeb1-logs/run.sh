#!/usr/bin/env bash
# moeb1's one device call (<= 265 s): batch-1 MoE kernels (NOTES 28). Op tests (router / plan /
# route cases: the new kernels bitwise vs the current ones and vs the CPU oracle), the routed
# MoE op (flash_layers --ops-moe-route, T = 1, 8: former vs new configs), ncu sections of the
# router / plan / tiles / combine on the op harness, the layers at batch 1, 8 (former vs new
# flags), then a single-pass ncu time breakdown of one eager batch-1 step with the new flags.
#   bash .gpubin-moeb1/run.sh $OUT   (carry .gpubin-moeb1)
set -uo pipefail
O="$1"; mkdir -p "$O"
T0=$(date +%s)
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*" | tee -a "$O/steps.log"; }
B=/tmp/moeb1_bin; rm -rf "$B" && mkdir -p "$B" && tar -C "$B" -xJf .gpubin-moeb1/bin.tar.xz || { echo untar failed; exit 1; }
tar -xJf .gpubin-moeb1/tok.tar.xz || echo "untar tok failed"
LT_DIR="$(scripts/cublaslt_dir.sh 2>/dev/null)"
export LD_LIBRARY_PATH="$B/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NCU=/usr/local/cuda/bin/ncu
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; cat "$B/commit.txt"; } >> "$O/steps.log" 2>&1
st "ops tests"
timeout 50 "$B/test_ops_cuda" --gtest_filter='*moe_route_experts*:*router_logits_dmma*:*moe_router*:*moe_experts_v41_fp4_n1:*moe_experts_v41_fp4_n8:*moe_experts_v41_fp4_bf16_n1:*moe_experts_v41_fp4_bf16_n5:*moe_experts_v41_fp4_bf16_n8:*moe_experts_fp4tc_*_n1:*moe_experts_fp4tc_*_n3:*moe_experts_fp4tc_*_n8:*moe_experts_fp4tc_*_n40_invariant' \
  > "$O/ops_tests.log" 2>&1; echo "ops rc=$?" | tee -a "$O/steps.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|mismatches=[1-9]" "$O/ops_tests.log" | head -30; tail -n1 "$O/ops_tests.log"
st "ops-moe-route T = 1, 8"
timeout 35 "$B/flash_layers" --ops-moe-route --batches 1,8 > "$O/route.log" 2>&1; echo "route rc=$?" | tee -a "$O/steps.log"
grep "^op moe_route" "$O/route.log"
st "ncu sections on the op harness"
timeout 75 $NCU --profile-from-start off --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section LaunchStats --section Occupancy -k regex:"router|moe" -o "$O/route_prof" \
  "$B/flash_layers" --ops-moe-route-profile --batches 1,8 > "$O/ncu_route.out" 2> "$O/ncu_route.err"; echo "ncu rc=$?" | tee -a "$O/steps.log"
tail -n 3 "$O/ncu_route.err"
if [ -f "$O/route_prof.ncu-rep" ]; then
  $NCU -i "$O/route_prof.ncu-rep" --csv --page details > "$O/route_prof_details.csv" 2>&1
  $NCU -i "$O/route_prof.ncu-rep" --csv --page raw > "$O/route_prof_raw.csv" 2>&1
  grep -E '"(Duration|DRAM Throughput|Memory Throughput|Registers Per Thread|Achieved Occupancy|Issue Slots Busy|Grid Size|Warp Cycles Per Issued Instruction)"' "$O/route_prof_details.csv" \
    | awk -F'","' '{print $5" | "$(NF-2)" | "$NF}' | sed 's/(deepinfer::[^)]*)//; s/"$//' | cut -c1-150 | head -150
  rm -f "$O/route_prof.ncu-rep"; gzip "$O/route_prof_details.csv" "$O/route_prof_raw.csv"
fi
LA=(--contexts 8192 --batches 1,8 --steps 3 --prefill 0 --activations bf16 --bf16-weights on --engram-compare 0)
st "layers batch 1, 8: new flags (lean4 tiles)"
timeout 40 "$B/flash_layers" "${LA[@]}" --router dmmadeep --moe-plan fast --moe-fold 1 --budget-s 34 > "$O/layers_new.log" 2>&1; echo "new rc=$?" | tee -a "$O/steps.log"
grep -E "^(decode_graph |graph_nodes)" "$O/layers_new.log" | cut -c1-220
st "layers batch 1, 8: new flags + leanw4 tiles"
timeout 40 "$B/flash_layers" "${LA[@]}" --router dmmadeep --moe-plan fast --moe-fold 1 --moe-small leanw4 --budget-s 34 > "$O/layers_w4.log" 2>&1; echo "w4 rc=$?" | tee -a "$O/steps.log"
grep -E "^(decode_graph |graph_nodes)" "$O/layers_w4.log" | cut -c1-220
st "layers batch 1, 8: former (defaults)"
timeout 40 "$B/flash_layers" "${LA[@]}" --budget-s 34 > "$O/layers_old.log" 2>&1; echo "old rc=$?" | tee -a "$O/steps.log"
grep -E "^(decode_graph |graph_nodes)" "$O/layers_old.log" | cut -c1-220
LEFT=$(( 258 - ($(date +%s) - T0) ))
st "ncu times, one eager batch-1 step, new flags (${LEFT} s left)"
if [ "$LEFT" -gt 25 ]; then
  timeout $(( LEFT - 3 )) $NCU --profile-from-start off --clock-control none --metrics gpu__time_duration.sum --csv \
    "$B/flash_layers" --contexts 8192 --batches 1 --steps 1 --prefill 0 --activations bf16 --bf16-weights on --engram-compare 0 \
    --profile --graphs 0 --budget-s 30 --router dmmadeep --moe-plan fast --moe-fold 1 --moe-small leanw4 > "$O/ncu_b1_new.csv" 2> "$O/ncu_b1_new.err"
  echo "ncu b1 rc=$?" | tee -a "$O/steps.log"
  python3 bench/flash/ncu_summary.py "$O/ncu_b1_new.csv" 40 > "$O/ncu_b1_new_summary.md" 2>&1
  grep -iE "router|moe|Profiled step" "$O/ncu_b1_new_summary.md" | head -20
  gzip "$O/ncu_b1_new.csv"
fi
st done
