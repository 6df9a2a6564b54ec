#!/usr/bin/env bash
# helper attn: the bf16 tensor-core attention on the H200 -- op tests, the attention op in
# both precisions, the Flash layers (prefill 8K, batch 1 / 256), the bf16 model tests,
# compute-sanitizer on small attention cases. Most important first (one 200 s call).
set -u
OUT="${OUT:-/tmp/attn_out}"; mkdir -p "$OUT"
B=/tmp/attn_bin; rm -rf "$B"; mkdir -p "$B"
tar -C "$B" -xJf .gpubin-attn2/pack.tar.xz || { echo untar failed; exit 1; }
LT="$(scripts/cublaslt_dir.sh)"
export LD_LIBRARY_PATH="$B/lib${LT:+:$LT}"
export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; cat "$B/commit.txt"; } >"$OUT/machine.txt" 2>&1
s() { echo "== $(date +%T) $*" | tee -a "$OUT/steps.log"; }
s ops_attention
timeout 40 "$B/test_ops_cuda" --gtest_filter='*sink_attention*' >"$OUT/ops_attention.log" 2>&1; echo "rc=$?" >>"$OUT/ops_attention.log"
grep -E "metric.*bf16|FAILED|rc=|tests ran" "$OUT/ops_attention.log" | tail -30
s attention_op_bench
timeout 30 "$B/flash_layers" --ops-attention >"$OUT/attention_ops.log" 2>&1; echo "rc=$?" >>"$OUT/attention_ops.log"
cat "$OUT/attention_ops.log"
s layers
timeout 75 "$B/flash_layers" --contexts 8192 --batches 1,256 --steps 3 --prefill 8192 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 60 >"$OUT/flash.log" 2>&1; echo "rc=$?" >>"$OUT/flash.log"
grep -E "^(prefill|decode |decode_graph |setup act|done)|rc=" "$OUT/flash.log"
s model_bf16
timeout 25 "$B/test_model_cuda" --gtest_filter='CudaModelBf16.*' >"$OUT/model_bf16.log" 2>&1; echo "rc=$?" >>"$OUT/model_bf16.log"
grep -E "OK|FAILED|rc=|Failure" "$OUT/model_bf16.log" | tail -12
s sanitizers
CS=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$CS" ]; then
  timeout 15 "$CS" --tool memcheck "$B/test_ops_cuda" --gtest_filter='*sink_attention_bf16_dim100*:*sink_attention_bf16_heads128_dim256*' >"$OUT/memcheck.log" 2>&1; echo "rc=$?" >>"$OUT/memcheck.log"
  timeout 12 "$CS" --tool racecheck "$B/test_ops_cuda" --gtest_filter='*sink_attention_bf16_dim100*' >"$OUT/racecheck.log" 2>&1; echo "rc=$?" >>"$OUT/racecheck.log"
  tail -3 "$OUT/memcheck.log" "$OUT/racecheck.log"
fi
s done
