#!/usr/bin/env bash
# moedec's one device call: MoE op tests (bitwise A/B of every small-tile kernel and plan,
# CPU oracle), flash_layers --ops-moe (former vs lean / fused / plan / pdl / f32big lines),
# an ncu profile of the moe_tc kernels at T = 1 and 256, memcheck of small FP4 cases.
set -uo pipefail
O="${OUT:-/tmp/moedec_out}"; mkdir -p "$O"
B=/tmp/moedec_bin; rm -rf "$B" && mkdir -p "$B" && tar -C "$B" -xJf .gpubin-moedec/moedec.tar.xz || { echo untar failed; exit 1; }
LT=""; for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  [ -e "$d/libcublasLt.so.13" ] && LT="$d/libcublasLt.so.13" && break; done
[ -z "$LT" ] && LT="$(find / -name 'libcublasLt.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)"
export LD_LIBRARY_PATH="$B/lib:/usr/local/cuda/lib64${LT:+:$(dirname "$LT")}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
stamp() { echo "== $(date +%T) $*" | tee -a "$O/steps.log"; }
stamp machine
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv; cat "$B/commit.txt"; } > "$O/machine.txt" 2>&1
cat "$O/machine.txt"
stamp tests
timeout 80 "$B/test_ops_cuda" --gtest_filter='*moe*' > "$O/ops_moe_tests.log" 2>&1; echo "tests rc=$?" | tee -a "$O/steps.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|differ.*mismatches=[1-9]" "$O/ops_moe_tests.log" | head -30
stamp flash
timeout 95 "$B/flash_layers" --ops-moe --batches 1,8,128,256,1024 > "$O/ops_moe.log" 2>&1; echo "flash rc=$?" | tee -a "$O/steps.log"
grep "op moe_grouped" "$O/ops_moe.log" | grep -v "T=4096\|T=8192\|T=1024" | sed 's/ TFLOPs=[0-9.]*//; s/op moe_grouped //' | cut -c1-120
stamp ncu
NCU="$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)"
if [ -n "$NCU" ]; then
  timeout 70 "$NCU" --profile-from-start off --kernel-name regex:moe_tc --section SpeedOfLight --section SchedulerStats \
    --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section Occupancy --csv --page details \
    "$B/flash_layers" --ops-moe-profile --batches 1,256 > "$O/ncu.csv" 2> "$O/ncu.err"; echo "ncu rc=$?" | tee -a "$O/steps.log"
  gzip -f "$O/ncu.csv"; tail -3 "$O/ncu.err"
else echo "no ncu"; fi
stamp memcheck
if command -v compute-sanitizer >/dev/null; then
  timeout 25 compute-sanitizer --tool memcheck --error-exitcode 3 "$B/test_ops_cuda" \
    --gtest_filter='*fp4tc_bf16_n3:*fp4tc_f32_n9:*fp4tc_bf16_n40_invariant' > "$O/memcheck.log" 2>&1
  echo "memcheck rc=$?" | tee -a "$O/steps.log"
  grep -E "ERROR SUMMARY|Invalid|PASSED|FAILED" "$O/memcheck.log" | head -8
else echo "no compute-sanitizer"; fi
stamp done
