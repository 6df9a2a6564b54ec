#!/usr/bin/env bash
# moelean's one device call (<= 150 s): MoE op tests (lean4p vs every small kernel bitwise, the
# folded router selection vs the separate ops, CPU oracle), model tests (fixtures, batch
# invariance, graphs), flash_layers --ops-moe at T = 1, 8, the layers at batch 1 / 8 (graph),
# ncu of the lean kernels and the router / plan at T = 1, 8, then the former config's layers.
#   bash .gpubin-moelean/run.sh $OUT    (carry .gpubin-moelean)
set -uo pipefail
O="$1"; mkdir -p "$O"
T0=$(date +%s)
B=/tmp/moelean_bin; rm -rf "$B" && mkdir -p "$B" && tar -C "$B" -xJf .gpubin-moelean/bin.tar.xz || { echo untar failed; exit 1; }
LT_DIR="$(scripts/cublaslt_dir.sh 2>/dev/null)"
export LD_LIBRARY_PATH="$B/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*" | tee -a "$O/steps.log"; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv; cat "$B/commit.txt"; } >> "$O/steps.log" 2>&1
st "ops tests"
timeout 40 "$B/test_ops_cuda" --gtest_filter='*moe_route_experts*:*moe_experts_v41_fp4_n1:*moe_experts_v41_fp4_n8:*moe_experts_v41_fp4_bf16_n1:*moe_experts_v41_fp4_bf16_n8:*moe_experts_fp4tc_*_n1:*moe_experts_fp4tc_*_n3:*moe_experts_fp4tc_*_n8:*moe_experts_fp4tc_*_n9:*moe_experts_fp4tc_*_n40_invariant:*moe_router*:*router_logits_dmma*' \
  > "$O/ops_tests.log" 2>&1; echo "ops rc=$?" | tee -a "$O/steps.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|differ.*mismatches=[1-9]" "$O/ops_tests.log" | head -20; tail -n1 "$O/ops_tests.log"
st "model tests"
DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" timeout 40 "$B/test_model_cuda" \
  --gtest_filter='CudaModel.Fixtures*:CudaModel.BatchInvariant*:CudaModel.RaggedBatch*:CudaGraphs.DecodeReplay*:CudaEngine.*:CudaModelBf16.Fixtures*:CudaModelBf16.Ragged*:CudaModelBf16.DecodeGraphs*' \
  > "$O/model_tests.log" 2>&1; echo "model rc=$?" | tee -a "$O/steps.log"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$O/model_tests.log" | head; tail -n1 "$O/model_tests.log"
st "ops-moe T = 1, 8"
timeout 25 "$B/flash_layers" --ops-moe --batches 1,8 > "$O/ops_moe.log" 2>&1; echo "opsmoe rc=$?" | tee -a "$O/steps.log"
grep "op moe_grouped" "$O/ops_moe.log" | grep "act=bf16" | grep "mode=auto" | sed 's/ TFLOPs=[0-9.]*//; s/op moe_grouped //' | cut -c1-110
st "layers batch 1, 8 (new defaults)"
timeout 35 "$B/flash_layers" --contexts 8192 --batches 1,8 --steps 3 --prefill 0 --activations bf16 --bf16-weights on \
  --engram-compare 0 --tokenizer "$B/tokenizer.json" --budget-s 30 > "$O/layers_new.log" 2>&1; echo "layers rc=$?" | tee -a "$O/steps.log"
grep -E "^(decode_graph |graph_nodes)" "$O/layers_new.log" | cut -c1-200
LEFT=$(( 143 - ($(date +%s) - T0) ))
st "ncu of one eager batch-1 step, MoE kernels (${LEFT} s left)"
if [ "$LEFT" -gt 30 ]; then
  timeout $(( LEFT > 40 ? 38 : LEFT - 2 )) /usr/local/cuda/bin/ncu --profile-from-start off --clock-control none \
    --kernel-name regex:'moe|router|swiglu' --metrics gpu__time_duration.sum --csv \
    "$B/flash_layers" --contexts 8192 --batches 1 --steps 1 --prefill 0 --activations bf16 --bf16-weights on \
    --engram-compare 0 --tokenizer "$B/tokenizer.json" --profile --graphs 0 --budget-s 30 > "$O/ncu.csv" 2> /tmp/moelean_ncu.err
  echo "ncu rc=$?" | tee -a "$O/steps.log"; tail -n 4 /tmp/moelean_ncu.err >> "$O/steps.log"
  python3 bench/flash/ncu_summary.py "$O/ncu.csv" 40 > "$O/ncu_summary.md" 2>&1; grep -A16 "Profiled step" "$O/ncu_summary.md"
  gzip "$O/ncu.csv"
fi
LEFT=$(( 143 - ($(date +%s) - T0) ))
st "layers batch 1, former config (${LEFT} s left)"
if [ "$LEFT" -gt 22 ]; then
  timeout $(( LEFT - 2 )) "$B/flash_layers" --contexts 8192 --batches 1 --steps 2 --prefill 0 --activations bf16 --bf16-weights on \
    --engram-compare 0 --tokenizer "$B/tokenizer.json" --moe-small lean4 --moe-select 0 --budget-s $(( LEFT - 6 )) > "$O/layers_old.log" 2>&1; echo "old rc=$?" | tee -a "$O/steps.log"
  grep -E "^(decode_graph |graph_nodes)" "$O/layers_old.log" | cut -c1-200
fi
st done
