#!/usr/bin/env bash
# Helper gvn1 (NOTES 41), PROPOSED follow-up call (not run in session 11): the slim tensor-map gemv
# consumer (kTmap + gemv_set_tmap_slim: 107 SASS instructions per warp-stage instead of 257). Its op
# cases; the op bench at n = 1 by graph replay; the layers at batch 1 (auto / slim on the >= 30 MB
# weights / slim on every weight it takes); ncu of w16f16s4 and slim at wq_b; the other tmap cases.
#   bash .gpubin-gvn1/run2.sh LOG_DIR   (pack of wt-gvn1's HEAD in .gpubin-gvn1; carry .gpubin-gvn1)
set -uo pipefail
PACK=.gpubin-gvn1 source bench/flash/device_lib.sh "$1"
st "test_ops_cuda: the slim cases"
gtest test_ops_cuda 60 '*gemv_tmap*slim*'
grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -20
mv "$LOG/test_ops_cuda.log" "$LOG/test_ops_slim.log"
st "ops-gemv n = 1, graph timing"
flash ops_gemv 80 --ops-gemv --gemv-graph --gemv-variants xs,tmapw16f16s4,tmapslim,tmapslim3,tmapslim_t64c1,tmapslim_t128c4,tmapprobe4 \
  --gemv-shapes wq_a,wq_b,wo_a,wo_b,shared_w1,shared_w2 --gemv-ns 1
grep -E "^op gemv " "$LOG/ops_gemv.log" | grep "act=bf16" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//' | cut -c1-150
for g in auto big all; do
  case $g in auto) a="--gemv auto";; big) a="--gemv tmap --gemv-tmap 4,16,1,30,1";; all) a="--gemv tmap --gemv-tmap 4,16,1,0,1";; esac
  st "layers bf16 + copies, 8K, batch 1, $a"
  flash flash_b1_$g 40 --contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on $a \
    --engram-compare 0 --budget-s 20
  python3 bench/flash/report.py "$LOG/flash_b1_$g.log" 2>&1 | grep -E "^\| 8192 \| 1 \||tokens/s =" | head -3
done
left=$((288 - ($(date +%s) - T0)))
st "ncu wq_b: tmapw16f16s4, tmapslim (${left}s left)"
if [ "$left" -gt 40 ]; then
  timeout 30 /usr/local/cuda/bin/ncu --profile-from-start off -k regex:"gemv_tmap" --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section InstructionStats --section SourceCounters -o "$LOG/ncu_slim" \
    .gpubin-flash/flash_layers --ops-gemv --gemv-profile --gemv-variants tmapw16f16s4,tmapslim --gemv-shapes wq_b \
    --gemv-ns 1 > "$LOG/ncu_run.txt" 2>&1
  /usr/local/cuda/bin/ncu --import "$LOG/ncu_slim.ncu-rep" --page details > "$LOG/ncu_slim.txt" 2>&1
  grep -E "gemv_tmap|Duration|DRAM Through|Issued Warp|Warp Cycles Per Issued|Executed Instructions  " "$LOG/ncu_slim.txt" \
    | sed 's/  */ /g' | cut -c1-110 | head -20
fi
left=$((292 - ($(date +%s) - T0)))
if [ "$left" -gt 15 ]; then
  st "test_ops_cuda: the other tmap cases + the PDL chain (${left}s)"
  gtest test_ops_cuda "$left" '*gemv_tmap*:LinearGemv.PdlChains*:-*slim*'
  grep -E "^\[  FAILED  \]" "$LOG/test_ops_cuda.log" | head -10
fi
st "done"
cd "$LOG"
gzip -f test_ops_slim.log ops_gemv.log 2>/dev/null
rest=$(ls | grep -vE '^(ops_gemv.log.gz|test_ops_slim.log.gz|machine.txt)$')
tar -czf rest.tgz $rest && rm -f $rest
ls -la
