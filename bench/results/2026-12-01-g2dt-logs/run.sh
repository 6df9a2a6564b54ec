#!/usr/bin/env bash
# Session 10, helper g2dt (NOTES 38): the one-token FP8 gemv fed by 2-D tensor-map TMA
# (GemvKind::kTmap). Its op cases first (each prints its plan), the gemv op bench at n = 1
# (stream / xs / tmap at 6, 4 stages / the ring-only probe at 6, 4 stages), torch._scaled_mm
# at the same shapes, the layers at batch 1 (8K, bf16 + copies) with --gemv auto and tmap,
# one ncu pass (xs, tmap, probe at wq_b and wo_b), then the other gemv op cases in the time left.
#   bash .gpubin-g2dt/run.sh LOG_DIR   (after BUILD=build-gpu OUTDIR=/work/main/.gpubin-g2dt bench/flash/pack_all.sh; carry .gpubin-g2dt)
set -uo pipefail
PACK=.gpubin-g2dt source bench/flash/device_lib.sh "$1"
st "test_ops_cuda: the tmap cases + the PDL chain"
gtest test_ops_cuda 50 '*gemv_tmap*:LinearGemv.PdlChains*'
grep -E "tmap plan|^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -30
mv "$LOG/test_ops_cuda.log" "$LOG/test_ops_tmap.log"
st "ops-gemv n = 1"
flash ops_gemv 80 --ops-gemv --gemv-variants stream,xs,tmap,tmap4,tmapprobe,tmapprobe4 \
  --gemv-shapes wq_a,wkv,wq_b,wo_a,wo_b,shared_w1,shared_w2,idx_wq_b --gemv-ns 1
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//' | cut -c1-170
st "torch _scaled_mm n = 1"
timeout 45 python3 .gpubin-g2dt/scaled_mm.py > "$LOG/torch.log" 2>&1; echo "torch rc=$?"; cat "$LOG/torch.log" | tail -9
for g in auto tmap; do
  st "layers bf16 + copies, 8K, batch 1, --gemv $g"
  flash flash_b1_$g 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --gemv $g \
    --engram-compare 0 --budget-s 25
  python3 bench/flash/report.py "$LOG/flash_b1_$g.log" 2>&1 | grep -E "^\| 8192 \| 1 \||tokens/s =" | head -4
done
left=$((290 - ($(date +%s) - T0)))
st "ncu wq_b / wo_b: xs, tmap, tmapprobe (${left}s left)"
if [ "$left" -gt 60 ]; then
  timeout 45 /usr/local/cuda/bin/ncu --profile-from-start off -k regex:"gemv_tmap|gemv_xs" \
    --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats \
    .gpubin-flash/flash_layers --ops-gemv --gemv-profile --gemv-variants xs,tmap,tmapprobe --gemv-shapes wq_b,wo_b \
    --gemv-ns 1 > "$LOG/ncu_gemv.txt" 2>&1
  echo "ncu rc=$?"
  grep -E "gemv_tmap|gemv_xs|Duration|DRAM Through|Memory Through|Executed Ipc A|Issue Slots Busy|Warp Cycles Per Issued|Stall|Grid Size|Registers|Dynamic Shared|L1/TEX Hit|Mem Busy|Max Bandwidth" \
    "$LOG/ncu_gemv.txt" | sed 's/  */ /g' | cut -c1-120 | head -100
fi
left=$((292 - ($(date +%s) - T0)))
if [ "$left" -gt 15 ]; then
  st "test_ops_cuda: the other gemv cases (${left}s)"
  gtest test_ops_cuda "$left" '*gemv_tc*:*gemv_xs*:LinearGemv.*:*gemv_ab*'
  grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
  grep -cE "^\[       OK \]" "$LOG/test_ops_cuda.log"
fi
st "done"
gzip "$LOG/ops_gemv.log" "$LOG"/flash_b1_*.log "$LOG/ncu_gemv.txt" "$LOG/test_ops_cuda.log" 2>/dev/null
