#!/usr/bin/env bash
# Session 15, lead call 4 (traces in the Engram path added): run 53 found batch 1's decode fill (128 tokens at 8K) differing between runs;
# its traced runs traced the setup prefill (4096 tokens, slow) and never reached the decode. Now the
# trace covers the decode fill and eager steps only (--step-fnv 2), and batch 1 with one stream
# (DEEPINFER_OVERLAP=0); each twice, the first differing lines printed (NOTES 61).
#   bash bench/results/2026-12-01-h200-flash-logs/run55/run.sh LOG_DIR   (after bench/flash/pack_all.sh; carry .gpubin-int)
set -uo pipefail
source bench/flash/device_lib.sh "$1"
B="--contexts 8192 --steps 3 --activations bf16 --bf16-weights on --engram-compare 0 --budget-s 20"
firstdiff() {  # the first differing step_fnv / trace_fnv lines of two logs
  for k in step_fnv trace_fnv; do  # separately: stdout is buffered, stderr not, so their order varies
    diff <(grep "^$k" "$LOG/$1.log") <(grep "^$k" "$LOG/$2.log") | head -${3:-8}
  done
  echo "lines: $(grep -cE '^(step_fnv|trace_fnv)' "$LOG/$1.log") / $(grep -cE '^(step_fnv|trace_fnv)' "$LOG/$2.log")"
}
run2() {  # NAME ENV ARGS...
  local name=$1 envs=$2; shift 2
  for r in 1 2; do env $envs .gpubin-flash/flash_layers "$@" > "$LOG/${name}_$r.log" 2>&1; echo "$name $r rc=$?"; done
  st "$name: first differences"; firstdiff ${name}_1 ${name}_2 12
}
run2 b1_trace "DEEPINFER_X=0" $B --batches 1 --step-fnv 2
tar -C "$LOG" -czf "$LOG/logs.tgz" $(cd "$LOG" && ls b*.log) && rm -f "$LOG"/b*.log
st "done"
