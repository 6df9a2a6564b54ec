#!/usr/bin/env bash
# Helper gv8b (NOTES 35), one device call: fp8 mode's decode gemv, variant 2 (the weights
# streamed by cp.async.bulk into a shared-memory ring, ldmatrix + mma.sync m16n8k32 e4m3;
# DEEPINFER_FP8_GEMV_VARIANT=2) -- every fp8gemv op case (first, lean: never run before, bulk),
# the op timings path=new / lean / bulk / old at n = 1, 2, 4, 8, torch._scaled_mm at the same
# shapes, the layers at batch 1 / 8 (8K, fp8 + bf16 copies) default vs bulk at every n,
# test_model_cuda with bulk at every n; then, time permitting, the layers with lean at every n
# and ncu counters of the bulk kernel.
#   bash .gpubin-gv8b/run.sh LOG_DIR   (after BUILD=build-gpu OUTDIR=/work/main/.gpubin-gv8b bench/flash/pack_all.sh;
#                                      carry .gpubin-gv8b only)
set -uo pipefail
PACK=.gpubin-gv8b source bench/flash/device_lib.sh "$1"
el() { echo $(($(date +%s) - T0)); }
st "test_ops_cuda (fp8gemv cases, all variants)"
gtest test_ops_cuda 40 '*fp8gemv*'
grep -E "^\[ fp8 \]" "$LOG/test_ops_cuda.log" | grep -i "bulk\|lean" | sed -e "s/ (bound 2^-9 = 1.953e-03)//" | head -40
grep -E "FAILED|Failure|mismatch" "$LOG/test_ops_cuda.log" | head -20
st "ops fp8gemv"
DEEPINFER_FP8_GEMV_VARIANT=0 flash ops_fp8gemv 45 --ops-fp8gemv --gemv-ns 1,2,4,8
grep -E "^op fp8gemv" "$LOG/ops_fp8gemv.log" | sed -e 's/ rows=[0-9]* cols=[0-9]*//' -e 's/ var=0:0//' | cut -c1-150
st "torch _scaled_mm"
# (.gpubin-gv8b/torch_fp8gemv.py was a copy of bench/results/2026-12-01-gv8a-logs/torch_fp8gemv.py)
timeout 30 python3 .gpubin-gv8b/torch_fp8gemv.py > "$LOG/torch.log" 2>&1; echo "torch rc=$?"
grep -E "^torch.*scale=tensor" "$LOG/torch.log" | sed -e 's/ rows=[0-9]* cols=[0-9]*//' | head -30
lay() {  # NAME TIMEOUT ENV...: the layers, fp8 + copies, batch 1 / 8, 8K
  local name="$1" to="$2"; shift 2
  env "$@" timeout "$to" .gpubin-flash/flash_layers --contexts 8192 --batches 1,8 --steps 3 --activations fp8 \
    --bf16-weights on --engram-compare 0 --budget-s 25 > "$LOG/$name.log" 2>&1
  echo "$name rc=$?"; grep -E "^(decode_graph |fp8gemv_launches)" "$LOG/$name.log" | cut -c1-170
}
st "layers default / bulk at every n"
lay layers_default 30 DEEPINFER_FP8_GEMV_VARIANT=0
lay layers_bulk 30 DEEPINFER_FP8_GEMV=1 DEEPINFER_FP8_GEMV_VARIANT=2
st "test_model_cuda (bulk, every n)"
DEEPINFER_FP8_GEMV=1 DEEPINFER_FP8_GEMV_VARIANT=2 gtest test_model_cuda 60
if [ "$(el)" -lt 200 ]; then st "layers lean at every n"; lay layers_lean 25 DEEPINFER_FP8_GEMV=1 DEEPINFER_FP8_GEMV_VARIANT=1; fi
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ] && [ "$(el)" -lt 225 ]; then
  st "ncu (bulk kernel, n = 1 and 8)"
  DEEPINFER_FP8_GEMV_VARIANT=2 timeout 30 "$NCU" --profile-from-start off --metrics \
gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__grid_size,launch__cluster_dim_x \
    --csv .gpubin-flash/flash_layers --ops-fp8gemv --gemv-profile --gemv-ns 1,8 > "$LOG/ncu.csv" 2> "$LOG/ncu.err"
  echo "ncu rc=$?"
  python3 - "$LOG/ncu.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]; iid, ikn, imn, iv = h.index("ID"), h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
    by = {}
    for r in rows[1:]:
        by.setdefault((int(r[iid]), r[ikn][:20]), {})[r[imn]] = r[iv]
    for (i, k), m in sorted(by.items()):
        print(i, k, " ".join(f"{n.split('__')[1][:20]}={v}" for n, v in sorted(m.items())))
PY
fi
st "done"
gzip "$LOG"/*.log "$LOG"/ncu.csv 2>/dev/null
