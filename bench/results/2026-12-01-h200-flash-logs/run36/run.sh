#!/usr/bin/env bash
# Session 12, lead call 1: the slim tensor-map gemv's start order (NOTES 44: its producer gated until
# the consumers have issued their scale-code loads, o1, and x's, o2, so those are not queued behind the
# grid's first ring fill), with session 11's unrun store_row commit (02e4e6d): the tensor-map gemv
# cases (but the non-slim full-size oracle copies) with the new bitwise order cases, torch's gemv
# baselines, the op bench with the orders and timing diagnostics, and the layers at batch 1 with kAuto's
# order 0 / 2 and with the size floor lowered to 6 MiB.
#   bash bench/results/2026-12-01-h200-flash-logs/run36/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "ops: tensor-map gemv cases, kAuto's, LinearGemv"
gtest test_ops_cuda 200 '*gemv_tmap*:*gemv_auto_tmap*:LinearGemv.*-*gemv_tmap_fp8_n1_32768*:*gemv_tmap_fp8_n1_5120x8192*:*gemv_tmap_fp8_n1_8192x4096*:*gemv_tmap_w16_fp8_n1_32768*:*gemv_tmap_w16_fp8_n1_5120x8192*:*gemv_tmap_w16_fp8_n1_8192x4096*:*gemv_tmap_f16_fp8_n1_32768*:*gemv_tmap_f16_fp8_n1_5120x8192*:*gemv_tmap_f16_fp8_n1_8192x4096*:*gemv_tmap_s2_fp8_n1_5120x8192*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "torch gemv baselines"
timeout 90 python3 bench/flash/torch_baselines.py --gemv-only > "$LOG/torch_gemv.log" 2>&1; echo "torch rc=$?"
grep -E "op=scaled_mm .* n=1 " "$LOG/torch_gemv.log" | cut -c1-140
st "gemv n = 1 op bench, graph timing"
flash ops_gemv 150 --ops-gemv --gemv-graph --gemv-shapes wq_a,wq_b,wo_a,wo_b,shared_w1,shared_w2 --gemv-ns 1 \
  --gemv-variants auto,xs,tmapslim,tmapslim_o1,tmapslim_o2,tmapslim_t64c1,tmapslim_t64c1_o1,tmapslim_t64c1_o2,tmapslim6_o2,tmapprobe4,tmapslimprobe,tmapslimprobe_nc,tmapslim_nc,tmapslim_nx,tmapslim_ncnx
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//; s/ GBps=[^ ]+//' | cut -c1-130
i=0
for cfg in "0 0" "2 0" "2 6" "0 0" "2 0"; do
  set -- $cfg; i=$((i + 1))
  st "layers bf16 + copies, 8K, batch 1, kAuto order $1, floor ${2} MiB (0: 30)"
  flash flash_b1_$i 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on \
    --gemv-tmap-auto-order $1 --gemv-tmap-auto-min-mb $2 --engram-compare 0 --budget-s 15
done
st "done"
cd "$LOG" && tar -czf flash_b1.tgz flash_b1_*.log && rm -f flash_b1_*.log
gzip test_ops_cuda.log ops_gemv.log torch_gemv.log 2>/dev/null
