# The common part of a device call's script (sourced, from the repository root on the GPU
# machine, with .gpubin and .gpubin-int carried):
#   source bench/flash/device_lib.sh LOG_DIR
# .gpubin/gpubin.tar.xz is scripts/gpu_build.sh's pack (GPU tests); .gpubin-int/flash.tar.xz
# (or .gpubin-int/all.tar.xz from bench/flash/pack_all.sh, both in one stream, instead of both)
# a tar of bench/flash/pack.sh's .gpubin-flash (flash_layers), .gpubin-int/tok.tar.xz the
# tokenizer the Engram hash reads (optional). Unpacks them, puts the packs' libraries and
# the image's cuBLASLt (scripts/cublaslt_dir.sh) on the loader path, writes LOG/machine.txt
# (GPU, driver, both packs' commits) and defines:
#   st MSG                         a step line with the wall time since the start
#   gtest NAME TIMEOUT [FILTER]    runs the GPU test binary NAME (test_model_cuda,
#                                  test_ops_cuda) into LOG/NAME.log, prints rc and summary
#   flash LOGNAME TIMEOUT ARGS...  runs flash_layers ARGS into LOG/LOGNAME.log, prints rc and
#                                  its result lines (prefill, decode_graph, op, skip)
# Each run's own script is then a list of such calls; bench/results/*-logs/*/run.sh keep
# them with the logs. PACK (default .gpubin-int) names the carried folder that holds
# all.tar.xz / flash.tar.xz and tok.tar.xz, so helpers carry their own .gpubin-<name>.
LOG="$1"; mkdir -p "$LOG"
PACK="${PACK:-.gpubin-int}"
T0=$(date +%s)
st() { echo "== $(date +%T) +$(($(date +%s) - T0))s $*"; }
BIN=/tmp/deepinfer_gpubin; rm -rf "$BIN" && mkdir -p "$BIN"
if [ -f "$PACK/all.tar.xz" ]; then
  # One xz stream for flash_layers and the test binaries (bench/flash/pack_all.sh): they link
  # the same kernels, so together they compress to ~2 MB more than the test binaries alone,
  # which keeps the carry under the 64 MiB limit next to the ~52 MB tracked tree.
  tar -xJf "$PACK/all.tar.xz" || echo "untar all failed"
  mv .gpubin-tests/* "$BIN"/ && rmdir .gpubin-tests
else
  tar -xJf "$PACK/flash.tar.xz" || echo "untar flash failed"
  tar -C "$BIN" -xJf .gpubin/gpubin.tar.xz
fi
[ -f "$PACK/tok.tar.xz" ] && { tar -xJf "$PACK/tok.tar.xz" || echo "untar tok failed"; }
LT_DIR="$(scripts/cublaslt_dir.sh)"
export LD_LIBRARY_PATH="$PWD/.gpubin-flash/lib${LT_DIR:+:$LT_DIR}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv; cat .gpubin-flash/commit.txt "$BIN/commit.txt"; } \
  > "$LOG/machine.txt" 2>&1
gtest() {
  local name="$1" to="$2" filter="${3:-*}"
  DEEPINFER_FIXTURES_DIR="$PWD/tests/fixtures" LD_LIBRARY_PATH="$BIN/lib:$LD_LIBRARY_PATH" \
    timeout "$to" "$BIN/$name" --gtest_filter="$filter" > "$LOG/$name.log" 2>&1
  echo "$name rc=$?"
  grep -E "^\[  (PASSED|FAILED) |FAILED  \]" "$LOG/$name.log" | head -30; tail -1 "$LOG/$name.log"
}
flash() {
  local name="$1" to="$2"; shift 2
  timeout "$to" .gpubin-flash/flash_layers "$@" > "$LOG/$name.log" 2>&1
  echo "$name rc=$?"
  grep -E "^(prefill|decode_graph |skip)" "$LOG/$name.log" | cut -c1-200
}
