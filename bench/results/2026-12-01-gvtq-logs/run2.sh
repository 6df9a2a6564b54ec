#!/usr/bin/env bash
# Helper gvtq (NOTES 57), the suggested follow-up call (binaries a763b01, NOT yet run): the op cases
# (*fast*, 35), the one-token gemv with evict-first / the epilogue / 6 stages on the default start, the
# per-CTA time stamps of one call in the graph chain (--gemv-trace), torch._scaled_mm, and the layers
# at batch 1 if a mask beats kAuto.
#   bash .gpubin-gvtq/run2.sh LOG_DIR   (carry .gpubin-gvtq; ~60-100 s)
set -uo pipefail
PACK=.gpubin-gvtq source bench/flash/device_lib.sh "$1"
left() { echo $((106 - ($(date +%s) - T0))); }
st "op cases (*fast*)"
gtest test_ops_cuda 60 '*fast*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
st "ops-gemv n = 1, graph timing, with per-CTA stamps ($(left)s left)"
flash ops_gemv 40 --ops-gemv --gemv-graph --gemv-acts bf16 --gemv-ns 1 --gemv-shapes wq_b,wo_a,wo_b \
  --gemv-variants auto,auto_f8,auto_f4,auto_f12,auto_f8_s6,auto_f0_s6,auto_f7,auto_f0 --gemv-trace "$LOG/trace.csv"
grep -E "^op gemv" "$LOG/ops_gemv.log" | sed -E 's/ fmt=[^ ]+//; s/ rows=[^ ]+ cols=[^ ]+//; s/ timing=graph//; s/ GBps=[^ ]+//; s/ act=bf16 n=1//' | cut -c1-260
st "torch _scaled_mm ($(left)s left)"
timeout 20 python3 .gpubin-gvtq/torch_gemv.py time wq_b,wo_a,wo_b > "$LOG/torch.log" 2>&1; grep "^torch" "$LOG/torch.log"
best=$(python3 - "$LOG/ops_gemv.log" <<'PY'
import re, sys
t = {}
for line in open(sys.argv[1]):
    m = re.match(r"op gemv kernel=(\S+) name=(wq_b|wo_a|wo_b) .* ms=([0-9.]+)", line)
    if m and (m.group(1) == "auto" or re.fullmatch(r"auto_f\d+", m.group(1))):
        t.setdefault(m.group(1), {})[m.group(2)] = float(m.group(3)) * 1e3
full = {k: sum(v.values()) for k, v in t.items() if len(v) == 3}
base = min(full.get("auto", 1e9), full.get("auto_f0", 1e9))
cand = {k: s for k, s in full.items() if k not in ("auto", "auto_f0")}
k = min(cand, key=cand.get) if cand else None
print(k[len("auto_f"):] if k and cand[k] < base - 0.3 else "none", f"{cand.get(k, 0):.2f}", f"{base:.2f}")
PY
)
echo "best mask (sum us, base): $best"; mask=${best%% *}
B1="--contexts 8192 --batches 1 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
if [ "$mask" != "none" ] && [ "$(left)" -ge 46 ]; then
  flash b1_on 26 $B1 --gemv-tmap-auto-fast "$mask"
  flash b1_off 26 $B1 --gemv-tmap-auto-fast 0
fi
st "done"
cd "$LOG" && gzip trace.csv test_ops_cuda.log ops_gemv.log 2>/dev/null; ls -la
