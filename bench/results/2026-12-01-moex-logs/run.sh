#!/usr/bin/env bash
# helper moex (NOTES 45): the MoE big-tile kinds measured slower than kWgmmaWsS deleted (MoeTcBig =
# kWide, kWgmmaWsS, kAuto). Checks that kAuto is unchanged: every MoE op case (kWide and kWgmmaWsS
# bitwise against the default, kWgmmaWsS also against the CPU), the model tests, the op bench at
# T = 2048 / 4096 / 8192 (two passes; run 32: kWgmmaWsS 5.59 / 6.62 / 10.99 ms) and, time allowing,
# the 8K prefill's logits hash against run 33's (937193b75da5297d, same command).
#   PACK=.gpubin-moex bash .gpubin-moex/run.sh $OUT/r      (carry .gpubin-moex; timeout 300)
set -uo pipefail
PACK=.gpubin-moex source bench/flash/device_lib.sh "$1"
el() { echo $(($(date +%s) - T0)); }
st "ops: *moe*:*Moe*"
gtest test_ops_cuda 120 '*moe*:*Moe*'
echo "cases passed: $(grep -c '^\[       OK \]' "$LOG/test_ops_cuda.log")"
for k in wide wgmmawss; do
  echo "$k: $(grep -cE "${k}_vs_default_differ .*mismatches=0" "$LOG/test_ops_cuda.log") ok, $(grep -cE "${k}_vs_default_differ .*mismatches=[1-9]" "$LOG/test_ops_cuda.log") bad"
done
grep -E "y_wgmmawss " "$LOG/test_ops_cuda.log" | head -3
for p in 1 2; do
  st "ops-moe-bigs 2048,4096,8192, pass $p"
  timeout 60 .gpubin-flash/flash_layers --ops-moe-bigs --batches 2048 > "$LOG/bigs$p.log" 2>&1; echo "bigs rc=$?"
  grep -E "^op moe_grouped" "$LOG/bigs$p.log" | sed 's/ active=[0-9]*//; s/ mode=auto act=bf16//; s/ small=auto plan=3 pdl=0//' | cut -c1-100
done
st "test_model_cuda"
gtest test_model_cuda 100
left=$((280 - $(el)))
if [ "$left" -gt 45 ]; then
  st "8K prefill, indexer A/B (run 33's command; logits_fnv 937193b75da5297d there), timeout $left"
  flash prefill "$left" --contexts 8192 --batches 1 --steps 1 --prefill 8192 --activations bf16 --bf16-weights on \
    --indexer-wgmma-ab --engram-compare 0 --budget-s $((left - 15))
  grep -E "^prefill" "$LOG/prefill.log" | grep -oE "wall_ms=[0-9.]+|logit0=[0-9.]+|indexer_wgmma=[01] logits_fnv=[0-9a-f]+" | paste -sd' '
fi
st "done"
gzip "$LOG/test_ops_cuda.log" "$LOG/prefill.log" 2>/dev/null
