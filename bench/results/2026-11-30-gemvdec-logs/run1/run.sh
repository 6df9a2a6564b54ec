#!/usr/bin/env bash
# Helper gemvdec's one device call (NOTES 27): the x-in-shared-memory FP8 gemv at one token
# (kXs), its integer-decode form (kXsi) and its next-step-ahead form (kXsp) against the former kernel: op tests (bitwise A/B),
# op timings at n = 1, ncu sections on the op harness, layers at batch 1 (auto vs xs / xsi),
# torch _scaled_mm baselines if time is left. Carry .gpubin-gemvdec (gd.tar.xz: flash_layers
# + test_ops_cuda + libs; tok.tar.xz).   bash bench/results/2026-11-30-gemvdec-logs/run.sh LOG_DIR
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
T0=$(date +%s)
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*"; }
left() { echo $((258 - ($(date +%s) - T0))); }
P=.gpubin-gemvdec
tar -xJf $P/gd.tar.xz || echo "untar gd failed"
tar -xJf $P/tok.tar.xz || echo "untar tok failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"
export LD_LIBRARY_PATH="$PWD/gd/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; cat gd/commit.txt; } > "$LOG/machine.txt" 2>&1
cat "$LOG/machine.txt"
FL=gd/flash_layers
st "tests"
DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" timeout 70 gd/test_ops_cuda \
  --gtest_filter='Ops/CudaVsCpu.MatchesOracle/gemv_xs*:LinearGemv.*:Ops/CudaVsCpu.MatchesOracle/gemv_ab_*' > "$LOG/tests.log" 2>&1
echo "tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/tests.log" | head -30; tail -1 "$LOG/tests.log"
st "ops gemv n=1"
timeout 60 $FL --ops-gemv --gemv-ns 1 --gemv-variants stream,xs,xsi,xsp,xsip,bulk \
  --gemv-shapes wq_a,wkv,wq_b,wo_a,wo_b,shared_w1,shared_w2,idx_wq_b > "$LOG/gemv.log" 2>&1
echo "gemv rc=$?"; grep -E "^op gemv" "$LOG/gemv.log" | sed -E 's/ rows=[0-9]+ cols=[0-9]+//' | cut -c1-150
# The layers' A/B: auto (the former kernel at n = 1) and the fastest xs variant on wq_b under bf16 x.
best=$(grep -E "^op gemv kernel=xs[a-z]* name=wq_b .*act=bf16" "$LOG/gemv.log" | sed -E 's/.*kernel=([a-z]+) .* ms=([0-9.]+).*/\2 \1/' | sort -n | head -1 | cut -d' ' -f2)
best=${best:-xs}; echo "best=$best"
st "ncu sections"
NCU=/usr/local/cuda/bin/ncu
timeout 80 $NCU --profile-from-start off --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section InstructionStats --section Occupancy --section SchedulerStats -k regex:gemv -c 20 -o "$LOG/gemv_prof" \
  $FL --ops-gemv --gemv-profile --gemv-ns 1 --gemv-variants stream,xs,xsi,xsp,xsip --gemv-shapes wq_b,wo_b > "$LOG/ncu.out" 2> "$LOG/ncu.err"
echo "ncu rc=$?"; tail -n 3 "$LOG/ncu.err"
if [ -f "$LOG/gemv_prof.ncu-rep" ]; then
  timeout 20 $NCU -i "$LOG/gemv_prof.ncu-rep" --csv --page details > "$LOG/ncu_details.csv" 2>&1; echo "details rc=$?"
  timeout 20 $NCU -i "$LOG/gemv_prof.ncu-rep" --csv --page raw > "$LOG/ncu_raw.csv" 2>&1; echo "raw rc=$?"
  grep -E '"(Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Executed Ipc Active|Issue Slots Busy|Registers Per Thread|Achieved Occupancy|L1/TEX Hit Rate|Mem Pipes Busy|No Eligible|Warp Cycles Per Issued Instruction|Executed Instructions)"' "$LOG/ncu_details.csv" \
    | awk -F'","' '{print $1" | "$5" | "$(NF-2)" | "$NF}' | sed -E 's/"$//; s/deepinfer::kernels::gemv:://; s/\(deepinfer::kernels::LinearArgs, int, int\)//' | cut -c1-130
  rm -f "$LOG/gemv_prof.ncu-rep"; gzip -f "$LOG/ncu_details.csv" "$LOG/ncu_raw.csv"
fi
A=(--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 25)
for g in auto $best; do
  [ "$(left)" -gt 40 ] || { echo "skip layers $g: time"; continue; }
  st "layers b1 --gemv $g"
  timeout 40 $FL "${A[@]}" --gemv $g > "$LOG/b1_$g.log" 2>&1; echo "b1_$g rc=$?"
  grep -E "^(decode_graph |skip)" "$LOG/b1_$g.log" | cut -c1-220
done
if [ "$(left)" -gt 25 ]; then
  st "torch"; timeout $(( $(left) - 5 )) python3 bench/flash/torch_baselines.py --gemv-only > "$LOG/torch.log" 2>&1; echo "torch rc=$?"; tail -n 20 "$LOG/torch.log"
fi
gzip -f "$LOG/tests.log"
st "done"
