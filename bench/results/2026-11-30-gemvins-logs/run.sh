#!/usr/bin/env bash
# Helper gemvins' one device call (NOTES 30): gemv_xs2_kernel (kXs2: fewer instructions per
# weight byte, several tiles per block sharing one x copy) against the former kernel and xs:
# op timings at n = 1 (tiles per block swept), ncu instruction counts on wq_b / wo_b, layers at
# batch 1 (auto vs xs2), the full test_ops_cuda. Carry .gpubin-gemvins (all.tar.xz from
# bench/flash/pack_all.sh + tok.tar.xz).   bash bench/results/2026-11-30-gemvins-logs/run.sh LOG_DIR
set -uo pipefail
LOG="$1"; mkdir -p "$LOG"
T0=$(date +%s)
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*"; }
left() { echo $((265 - ($(date +%s) - T0))); }
P=.gpubin-gemvins
BIN=/tmp/deepinfer_gpubin; rm -rf "$BIN" && mkdir -p "$BIN"
tar -xJf $P/all.tar.xz || echo "untar all failed"
mv .gpubin-tests/* "$BIN"/ && rmdir .gpubin-tests
tar -xJf $P/tok.tar.xz || echo "untar tok failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"
export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; cat .gpubin-flash/commit.txt; } > "$LOG/machine.txt" 2>&1
cat "$LOG/machine.txt"
FL=.gpubin-flash/flash_layers
st "ops gemv n=1"
timeout 60 $FL --ops-gemv --gemv-ns 1 --gemv-variants stream,xs,xs2,xs2t1,xs2t2,xs2t4,xs2t8,bulk \
  --gemv-shapes wq_a,wkv,wq_b,wo_a,wo_b,shared_w1,shared_w2,idx_wq_b > "$LOG/gemv.log" 2>&1
echo "gemv rc=$?"; grep -E "^op gemv" "$LOG/gemv.log" | sed -E 's/ rows=[0-9]+ cols=[0-9]+//; s/ fmt=8//; s/ frac=[0-9.]+//' | cut -c1-120
A=(--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 25)
for g in auto xs2; do
  st "layers b1 --gemv $g"
  timeout 40 $FL "${A[@]}" --gemv $g > "$LOG/b1_$g.log" 2>&1; echo "b1_$g rc=$?"
  grep -E "^(decode_graph |skip)" "$LOG/b1_$g.log" | cut -c1-220
done
st "tests (full test_ops_cuda)"
TT=$(left); [ "$TT" -gt 170 ] && TT=170
DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" LD_LIBRARY_PATH="$BIN/lib:$LD_LIBRARY_PATH" \
  timeout "$TT" "$BIN/test_ops_cuda" > "$LOG/test_ops_cuda.log" 2>&1
echo "test_ops_cuda rc=$? (timeout $TT)"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/test_ops_cuda.log" | head -30; tail -1 "$LOG/test_ops_cuda.log"
grep -c "gemv_xs2" "$LOG/test_ops_cuda.log" | sed 's/^/xs2 lines: /'
if [ "$(left)" -gt 22 ]; then
  st "ncu instructions"
  NCU=/usr/local/cuda/bin/ncu
  timeout $(( $(left) - 4 )) $NCU --profile-from-start off --section SpeedOfLight --section InstructionStats --section Occupancy -k regex:gemv -c 10 -o "$LOG/p" \
    $FL --ops-gemv --gemv-profile --gemv-ns 1 --gemv-variants xs,xs2 --gemv-shapes wq_b,wo_b > "$LOG/ncu.out" 2> "$LOG/ncu.err"
  echo "ncu rc=$?"
  if [ -f "$LOG/p.ncu-rep" ]; then
    timeout 10 $NCU -i "$LOG/p.ncu-rep" --csv --page details > "$LOG/ncu_details.csv" 2>&1
    grep -E '"(Duration|DRAM Throughput|Executed Ipc Active|Registers Per Thread|Achieved Occupancy|Executed Instructions)"' "$LOG/ncu_details.csv" \
      | awk -F'","' '{print $1" | "$5" | "$(NF-2)" | "$NF}' | sed -E 's/"$//; s/deepinfer::kernels::gemv:://' | cut -c1-140
    rm -f "$LOG/p.ncu-rep"; gzip -f "$LOG/ncu_details.csv"
  fi
fi
gzip -f "$LOG/test_ops_cuda.log" "$LOG"/b1_*.log
st "done"
