#!/usr/bin/env bash
# Helper "host" (one GPU call): the model GPU tests on the new binaries, then flash_layers
# decode at batch 1 / 256 x 8K with the old binary (main 57ea040) and the new one, then
# the ops tests and a CLI generate cuda vs cpu. Logs in LOG (= $OUT).
set -uo pipefail
S=$(date +%s)
LOG="$1"; mkdir -p "$LOG"
H=.gpubin-host A=/tmp/host_bins/after Bf=/tmp/host_bins/before
rm -rf /tmp/host_bins && mkdir -p /tmp/host_bins && tar -C /tmp/host_bins -xJf "$H/bins.tar.xz" || echo "untar failed"
LT_DIR="$(scripts/cublaslt_dir.sh)"
export LD_LIBRARY_PATH="$A/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures"
{ date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; nproc;
  lscpu | grep -E "Model name|MHz" ; echo "after:"; cat "$A/commit.txt"; echo "before:"; cat "$Bf/commit.txt"; } \
  > "$LOG/machine.txt" 2>&1
echo "== $(date +%T) test_model_cuda"
timeout 100 "$A/test_model_cuda" > "$LOG/model_cuda.log" 2>&1; echo "test_model_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]|Failure|KeyedLists" "$LOG/model_cuda.log" | head -30
ARGS="--contexts 8192 --batches 1,256 --steps 4 --prefill 0 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 150"
flash() {  # flash NAME BINARY
  echo "== $(date +%T) flash $1"
  timeout 70 "$2" $ARGS > "$LOG/flash_$1.log" 2>&1; echo "$1 rc=$?"
  grep -E "^(decode|setup act|skip|done)" "$LOG/flash_$1.log" | cut -c1-250
}
flash before "$Bf/flash_layers"
flash after "$A/flash_layers"
echo "== $(date +%T) generate cuda vs cpu"
printf '%s\n' '{"id":"a","prompt_ids":[0,297,252,170,167,330,35,268],"max_tokens":24,"temperature":0,"ignore_eos":true}' \
  '{"id":"b","prompt_ids":[5,6,7],"max_tokens":16,"temperature":0.9,"seed":3,"ignore_eos":true}' \
  '{"id":"e","prompt_ids":[3,1,4,1,5,9,2,6,5,3,5],"max_tokens":12,"temperature":0.8,"seed":6,"n":3,"ignore_eos":true}' >/tmp/in.jsonl
for dev in cpu cuda; do
  timeout 30 "$A/deepinfer" generate --model tests/fixtures/v41_tiny_quant --input /tmp/in.jsonl --output "/tmp/gen_$dev.jsonl" \
    --device $dev --max-num-batched-tokens 8 2>>"$LOG/cli.log"
done
cmp -s /tmp/gen_cpu.jsonl /tmp/gen_cuda.jsonl && echo "generate: cuda == cpu" | tee -a "$LOG/cli.log" || echo "generate: DIFFERENT" | tee -a "$LOG/cli.log"
# A second before / after pair (run-to-run spread) if the time allows.
if [ $(( $(date +%s) - S )) -lt 140 ]; then flash before2 "$Bf/flash_layers"; flash after2 "$A/flash_layers"; fi
left=$(( 280 - ($(date +%s) - S) ))
echo "== $(date +%T) test_ops_cuda"
[ "$left" -gt 20 ] && timeout "$left" "$A/test_ops_cuda" > "$LOG/ops_cuda.log" 2>&1; echo "test_ops_cuda rc=$?"
grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/ops_cuda.log" | head
echo "== $(date +%T) done"
