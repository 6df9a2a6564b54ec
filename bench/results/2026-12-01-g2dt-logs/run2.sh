#!/usr/bin/env bash
# Proposed follow-up call for helper g2dt (NOTES 38, "after the measurement"; NOT run in session 10):
# the tensor-map gemv's consumer variants (16 consumer warps; the f16 decode; both) against xs and
# the ring-only probe, 4-stage rings; the layers with tmap on the >= 30 MB weights only and on all.
#   bash .gpubin-g2dt/run2.sh LOG_DIR   (pack of wt-g2dt's HEAD in .gpubin-g2dt; carry .gpubin-g2dt)
set -uo pipefail
PACK=.gpubin-g2dt source bench/flash/device_lib.sh "$1"
st "test_ops_cuda: the tmap cases (59) + the PDL chain"
gtest test_ops_cuda 100 '*gemv_tmap*:LinearGemv.PdlChains*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -20
st "ops-gemv n = 1"
flash ops_gemv 70 --ops-gemv --gemv-variants xs,tmap4,tmapprobe4,tmapw16s4,tmapf16s4,tmapw16f16s4,tmapw16f16 \
  --gemv-shapes wq_a,wq_b,wo_a,wo_b,shared_w1,shared_w2 --gemv-ns 1
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//' | cut -c1-170
for g in auto big all; do
  case $g in auto) a="--gemv auto";; big) a="--gemv tmap --gemv-tmap 4,16,1,30";; all) a="--gemv tmap --gemv-tmap 4,16,1";; esac
  st "layers bf16 + copies, 8K, batch 1, $a"
  flash flash_b1_$g 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on $a \
    --engram-compare 0 --budget-s 25
  python3 bench/flash/report.py "$LOG/flash_b1_$g.log" 2>&1 | grep -E "^\| 8192 \| 1 \||tokens/s =" | head -4
done
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/ops_gemv.log" "$LOG"/flash_b1_*.log 2>/dev/null
