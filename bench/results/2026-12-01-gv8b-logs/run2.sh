#!/usr/bin/env bash
# NOT RUN (proposed follow-up to run.sh, NOTES 35): HEAD's variant 2 (one consumer warp per
# chunk) -- the fp8gemv op cases of every variant (their summary printed LAST, so the stdout tail
# keeps it; run.sh lost it), the op timings new / lean / bulk / old, ncu of the bulk kernel, the
# layers at batch 1 / 8 with bulk at every n against the default, test_model_cuda with bulk.
# Leaves at most 6 files under LOG (the device returns ~8).
#   bash .gpubin-gv8b/run2.sh LOG_DIR   (after BUILD=build-gpu OUTDIR=/work/main/.gpubin-gv8b bench/flash/pack_all.sh
#                                       at 66017b6 or later; carry .gpubin-gv8b only)
set -uo pipefail
PACK=.gpubin-gv8b source bench/flash/device_lib.sh "$1"
st "test_ops_cuda (fp8gemv cases, all variants)"; gtest test_ops_cuda 45 '*fp8gemv*' > "$LOG/ops_summary.txt"
st "ops fp8gemv"; DEEPINFER_FP8_GEMV_VARIANT=0 flash ops_fp8gemv 50 --ops-fp8gemv --gemv-ns 1,8
grep -E "^op fp8gemv" "$LOG/ops_fp8gemv.log" | sed -e 's/ rows=[0-9]* cols=[0-9]*//' -e 's/ var=0:0//' | cut -c1-130
lay() {
  local name="$1"; shift
  env "$@" timeout 30 .gpubin-flash/flash_layers --contexts 8192 --batches 1,8 --steps 3 --activations fp8 \
    --bf16-weights on --engram-compare 0 --budget-s 25 > "$LOG/$name.log" 2>&1
  echo "$name rc=$?"; grep -E "^decode_graph " "$LOG/$name.log" | cut -c1-150
}
st "layers"; lay layers_default DEEPINFER_FP8_GEMV_VARIANT=0; lay layers_bulk DEEPINFER_FP8_GEMV=1 DEEPINFER_FP8_GEMV_VARIANT=2
st "test_model_cuda (bulk)"; DEEPINFER_FP8_GEMV=1 DEEPINFER_FP8_GEMV_VARIANT=2 gtest test_model_cuda 60 > "$LOG/model_summary.txt"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  st "ncu bulk"
  DEEPINFER_FP8_GEMV_VARIANT=2 timeout 30 "$NCU" --profile-from-start off --csv --metrics \
gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum,launch__grid_size \
    .gpubin-flash/flash_layers --ops-fp8gemv --gemv-profile --gemv-ns 1,8 2>/dev/null \
    | grep -E '^"' | awk -F'","' '{print $1, $5, $(NF-2), $NF}' | cut -c1-120 | tail -48
fi
cat "$LOG"/*.log | gzip > "$LOG/all_logs.gz"; rm -f "$LOG"/*.log
st "summaries"; cat "$LOG/ops_summary.txt" "$LOG/model_summary.txt"
grep -E "^\[ fp8 \]" <(zcat "$LOG/all_logs.gz") | grep -i bulk | cut -c1-140 | head -30
