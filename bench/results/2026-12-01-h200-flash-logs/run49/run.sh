#!/usr/bin/env bash
# Session 14, lead call 3: main with run 48's defaults (hc site 3, source chain 2, Engram wkv 1) and no
# switch set: the whole test_model_cuda, the layers at batch 1 twice, the full layers (batch 1 / 8 / 256
# and the 8K prefill) for the record, and an ncu pass of the routed expert tiles at T = 1 with the warp
# stall reasons and the L1 / L2 request counters (moe5's open question, NOTES 53).
#   bash bench/results/2026-12-01-h200-flash-logs/run49/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_model_cuda (all), no switch"
gtest test_model_cuda 100
B="--contexts 8192 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0"
st "layers b1 x2"
flash b1_1 30 $B --batches 1 --budget-s 20
flash b1_2 30 $B --batches 1 --budget-s 20
st "layers 1 / 8 / 256 + prefill 8192"
flash full 150 $B --batches 1,8,256 --prefill 8192 --budget-s 120
python3 bench/flash/report.py "$LOG/full.log" > "$LOG/report.md" 2>&1
st "ncu: lean tiles at T = 1, stall reasons and request counters"
timeout 40 /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none -k regex:"moe_tc_lean" \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__warps_active.avg.per_cycle_active,smsp__issue_active.avg.per_cycle_active,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ldgsts.sum,l1tex__m_xbar2l1tex_read_bytes.sum,lts__t_requests_srcunit_tex.sum,lts__t_sectors_srcunit_tex.sum,l1tex__throughput.avg.pct_of_peak_sustained_active,lts__throughput.avg.pct_of_peak_sustained_elapsed \
  --csv .gpubin-flash/flash_layers --ops-moe-route-profile --batches 1 > "$LOG/ncu.out" 2> "$LOG/ncu.err"; echo "ncu rc=$?"
tail -n 3 "$LOG/ncu.err"; grep -c moe_tc_lean "$LOG/ncu.out"
tar -C "$LOG" -czf "$LOG/layers.tgz" $(cd "$LOG" && ls b1_*.log full.log) && rm -f "$LOG"/b1_*.log "$LOG"/full.log
st "done"
gzip "$LOG/test_model_cuda.log" "$LOG/ncu.out" 2>/dev/null
