#!/usr/bin/env bash
# Helper gvn1 (NOTES 41): the lean tensor-map gemv consumer (kTmap + gemv_set_tmap_lean). Its op
# cases; the op bench at n = 1 by graph replay (as torch_baselines.py times torch) for xs, the
# 16-warp f16 consumer, lean at 4 / 3 stages and the ring-only probe; torch._scaled_mm; the layers
# at batch 1 (auto vs lean on the >= 30 MB weights); ncu of xs / w16f16s4 / lean / cuBLASLt at
# wq_b (source-level stall sampling exported as CSV); the other tmap cases in the time left.
#   bash .gpubin-gvn1/run.sh LOG_DIR   (carry .gpubin-gvn1)
set -uo pipefail
PACK=.gpubin-gvn1 source bench/flash/device_lib.sh "$1"
st "test_ops_cuda: the lean cases"
gtest test_ops_cuda 60 '*gemv_tmap*lean*'
grep -E "tmap plan|^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -24
mv "$LOG/test_ops_cuda.log" "$LOG/test_ops_lean.log"
st "ops-gemv n = 1, graph timing"
flash ops_gemv 80 --ops-gemv --gemv-graph --gemv-variants xs,tmapw16f16s4,tmaplean,tmaplean3,tmapprobe4 \
  --gemv-shapes wq_a,wq_b,wo_a,wo_b,shared_w1,shared_w2 --gemv-ns 1
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//' | cut -c1-150
st "ops-gemv wo_b: lean at forced splits, graph timing"
flash ops_wob 40 --ops-gemv --gemv-graph --gemv-shapes wo_b --gemv-ns 1 \
  --gemv-variants tmaplean,tmaplean_t64c1,tmaplean_t128c1,tmaplean_t64c3,tmaplean_t128c4,tmaplean_t128c6,tmaplean_t256c7
grep -E "^op gemv " "$LOG/ops_wob.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//' | cut -c1-150
st "torch _scaled_mm n = 1"
timeout 40 python3 .gpubin-gvn1/scaled_mm.py > "$LOG/torch.log" 2>&1; echo "torch rc=$?"; tail -7 "$LOG/torch.log"
for g in auto lean; do
  case $g in auto) a="--gemv auto";; lean) a="--gemv tmap --gemv-tmap 4,16,1,30,1";; esac
  st "layers bf16 + copies, 8K, batch 1, $a"
  flash flash_b1_$g 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on $a \
    --engram-compare 0 --budget-s 20
  python3 bench/flash/report.py "$LOG/flash_b1_$g.log" 2>&1 | grep -E "^\| 8192 \| 1 \||tokens/s =" | head -3
done
left=$((288 - ($(date +%s) - T0)))
st "ncu wq_b: xs, tmapw16f16s4, tmaplean (${left}s left)"
NCU=/usr/local/cuda/bin/ncu
SEC="--section SpeedOfLight --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy --section SourceCounters"
if [ "$left" -gt 50 ]; then
  timeout 40 $NCU --profile-from-start off -k regex:"gemv_tmap|gemv_xs" $SEC --import-source no -o "$LOG/ncu_gemv" \
    .gpubin-flash/flash_layers --ops-gemv --gemv-profile --gemv-variants xs,tmapw16f16s4,tmaplean --gemv-shapes wq_b \
    --gemv-ns 1 > "$LOG/ncu_gemv_run.txt" 2>&1
  echo "ncu rc=$?"
  $NCU --import "$LOG/ncu_gemv.ncu-rep" --page details > "$LOG/ncu_gemv.txt" 2>&1
  grep -E "gemv_tmap_kernel|gemv_xs|Duration|DRAM Through|Executed Ipc A|Issue Slots Busy|Warp Cycles Per Issued|No Eligible|Registers Per|Dynamic Shared" \
    "$LOG/ncu_gemv.txt" | grep -v "act=f32" | sed 's/  */ /g' | cut -c1-110 | head -60
  # per-SASS stall samples of every profiled kernel (CSV)
  timeout 20 $NCU --import "$LOG/ncu_gemv.ncu-rep" --page source --print-source sass --csv > "$LOG/ncu_src.csv" 2>&1
  echo "ncu source rc=$? lines=$(wc -l < "$LOG/ncu_src.csv")"
fi
left=$((288 - ($(date +%s) - T0)))
st "ncu torch scaled_mm wq_b (${left}s left)"
if [ "$left" -gt 35 ]; then
  timeout 30 $NCU -k regex:"nvjet|gemm|cutlass" --launch-skip 3 --launch-count 1 $SEC \
    python3 .gpubin-gvn1/scaled_mm_ncu.py > "$LOG/ncu_torch.txt" 2>&1
  echo "ncu torch rc=$?"
  grep -E "nvjet|gemm|Duration|DRAM Through|Executed Ipc A|Warp Cycles Per Issued|Block Size|Grid Size|Registers Per|Dynamic Shared|Cluster Size|Theoretical Occ" \
    "$LOG/ncu_torch.txt" | sed 's/  */ /g' | cut -c1-110 | head -24
fi
left=$((292 - ($(date +%s) - T0)))
if [ "$left" -gt 75 ]; then
  st "layers bf16 + copies, 8K, batch 1, lean on every weight it takes"
  flash flash_b1_leanall 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on \
    --gemv tmap --gemv-tmap 4,16,1,0,1 --engram-compare 0 --budget-s 20
  python3 bench/flash/report.py "$LOG/flash_b1_leanall.log" 2>&1 | grep -E "^\| 8192 \| 1 \||tokens/s =" | head -3
fi
left=$((292 - ($(date +%s) - T0)))
if [ "$left" -gt 15 ]; then
  st "test_ops_cuda: the other tmap cases + the PDL chain (${left}s)"
  gtest test_ops_cuda "$left" '*gemv_tmap*:LinearGemv.PdlChains*:-*lean*'
  grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
  grep -cE "^\[       OK \]" "$LOG/test_ops_cuda.log"
fi
st "done"
cd "$LOG"
tar -czf ncu.tgz ncu_* 2>/dev/null && rm -f ncu_*
gzip test_ops_lean.log ops_gemv.log 2>/dev/null
rest=$(ls | grep -vE '^(ncu.tgz|ops_gemv.log.gz|test_ops_lean.log.gz|machine.txt)$')
tar -czf rest.tgz $rest && rm -f $rest
ls -la
