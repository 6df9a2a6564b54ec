#!/usr/bin/env bash
# Helper gv8a (NOTES 31), one device call: fp8 mode's decode kernel (kernels::linear_fp8_gemv:
# x quantized in the kernel, mma.sync m16n8k32 e4m3) -- its op tests, every model test, the op
# timings new vs old path at n = 1, 2, 4, 8 against torch._scaled_mm, the layers at batch 1 / 8
# (8K, fp8 + bf16 copies) with the kernel off (DEEPINFER_FP8_GEMV=0) and on (+ bf16 mode), then
# ncu counters of the new kernel on the op harness.
#   bash .gpubin-gv8a/run.sh LOG_DIR   (after BUILD=build-gpu OUTDIR=/work/main/.gpubin-gv8a bench/flash/pack_all.sh;
#                                      carry .gpubin-gv8a only)
set -uo pipefail
PACK=.gpubin-gv8a source bench/flash/device_lib.sh "$1"
st "test_ops_cuda (fp8 cases)"
gtest test_ops_cuda 50 '*fp8gemv*:*linear_fp8_auto_*_n1_*:*linear_fp8_auto_*_n8_*:*linear_fp8_quant*:*linear_fp8_rejects*:*linear_fp8_auto_kragged*:*linear_fp8_gemv_*'
grep -E "^\[ fp8 \]" "$LOG/test_ops_cuda.log" | sed -e "s/ (bound 2^-9 = 1.953e-03)//" | head -60
st "test_model_cuda"; gtest test_model_cuda 75
st "ops fp8gemv"
flash ops_fp8gemv 60 --ops-fp8gemv --gemv-ns 1,2,4,8 --fp8gemv-splits 0:0,4096:264,1024:264,4096:528
grep -E "^op fp8gemv" "$LOG/ops_fp8gemv.log" | sed -e 's/ rows=[0-9]* cols=[0-9]*//' | cut -c1-170
st "torch _scaled_mm"
timeout 45 python3 .gpubin-gv8a/torch_fp8gemv.py > "$LOG/torch.log" 2>&1; echo "torch rc=$?"
grep -E "^torch" "$LOG/torch.log" | sed -e 's/ rows=[0-9]* cols=[0-9]*//' | head -60
st "layers fp8 + copies, 8K, kernel OFF"
DEEPINFER_FP8_GEMV=0 flash layers_off 55 --contexts 8192 --batches 1,8 --steps 3 --activations fp8 --bf16-weights on \
  --engram-compare 0 --budget-s 50
grep -E "^fp8gemv_launches" "$LOG/layers_off.log"
st "layers fp8 + copies (kernel ON) and bf16 + copies, 8K"
flash layers_on 80 --contexts 8192 --batches 1,8 --steps 3 --activations fp8,bf16 --bf16-weights on \
  --engram-compare 0 --budget-s 75
grep -E "^fp8gemv_launches" "$LOG/layers_on.log"
st "ncu (new kernel, n = 1 and 8)"
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
if [ -n "$NCU" ]; then
  timeout 40 "$NCU" --profile-from-start off --metrics \
gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum,lts__t_bytes.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__cluster_dim_y,launch__grid_size,launch__registers_per_thread \
    --csv .gpubin-flash/flash_layers --ops-fp8gemv --gemv-profile --gemv-ns 1,8 > "$LOG/ncu.csv" 2> "$LOG/ncu.err"
  echo "ncu rc=$?"
  python3 - "$LOG/ncu.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
if rows:
    h = rows[0]; iid, ikn, imn, iv = h.index("ID"), h.index("Kernel Name"), h.index("Metric Name"), h.index("Metric Value")
    by = {}
    for r in rows[1:]:
        by.setdefault((int(r[iid]), r[ikn][:28]), {})[r[imn]] = r[iv]
    for (i, k), m in sorted(by.items()):
        print(i, k, " ".join(f"{n.split('__')[1][:22]}={v}" for n, v in sorted(m.items())))
PY
else
  echo "no ncu"
fi
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/layers_off.log" "$LOG/layers_on.log" "$LOG/test_model_cuda.log" 2>/dev/null
