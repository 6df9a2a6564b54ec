#!/usr/bin/env bash
# Builds and runs the CUDA op tests (every CUDA op against the CPU oracle) and the
# kernel benchmarks on a machine with an NVIDIA GPU and the CUDA toolkit. Needs
# neither the engine's other dependencies nor installed googletest / nlohmann_json:
# when those are missing it takes them from $DEPS (googletest/ and include/nlohmann/,
# e.g. copies of /usr/src/googletest and /usr/include/nlohmann).
#   scripts/gpu_test.sh [LOG_DIR]      (default build-gpu/logs)
# Env: JOBS (default 16), DEPS (default .gpudeps), SANITIZE=1 also runs a
# compute-sanitizer memcheck pass over the small cases, BENCH=0 skips benchmarks.
# Exit status: non-zero if the build or any test failed.
set -uo pipefail
cd "$(dirname "$0")/.."
LOG="${1:-build-gpu/logs}"
JOBS="${JOBS:-16}"
DEPS="$(realpath -m "${DEPS:-.gpudeps}")"
mkdir -p "$LOG"
stamp() { echo "== $(date +%T) $*" | tee -a "$LOG/steps.log"; }

stamp "machine"
{
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm,clocks.mem --format=csv
  nvcc --version | tail -2
  cmake --version | head -1
  git rev-parse HEAD 2>/dev/null || true
} 2>&1 | tee "$LOG/machine.txt"

stamp "configure + build (-j$JOBS)"
build_ok=1
{
  cmake -S tests/ops_cuda -B build-gpu/tests -G Ninja -DGTEST_SOURCE_DIR="$DEPS/googletest" \
    -DNLOHMANN_INCLUDE_DIR="$DEPS/include" >/dev/null &&
    cmake -S bench/kernels -B build-gpu/bench -G Ninja >/dev/null &&
    ninja -C build-gpu/tests -j"$JOBS" && ninja -C build-gpu/bench -j"$JOBS"
} >"$LOG/build.log" 2>&1 || build_ok=0
tail -5 "$LOG/build.log"
if [ "$build_ok" = 0 ]; then
  grep -E "error|FAILED" "$LOG/build.log" | head -40
  exit 1
fi

# Which machine code the kernels got (sm_90a expected) and whether the mma path
# really uses tensor cores (HMMA) with no local-memory traffic (LDL/STL).
if command -v cuobjdump >/dev/null; then
  lib=build-gpu/tests/libdeepinfer_cuda.a
  { cuobjdump --list-elf "$lib" | grep -oE 'sm_[0-9]+a?' | sort | uniq -c
    for k in mma_kernel gemv_kernel tiled_kernel; do
      echo "$k: $(cuobjdump --dump-sass "$lib" | awk -v k="$k" '/Function :/ { on = index($0, k) > 0 } on' |
        grep -oE "HMMA|LDSM|F2FP[.A-Z0-9]*|LDG\.E[.A-Z0-9]*|LDL|STL" | sort | uniq -c | tr '\n' ' ')"
    done; } >"$LOG/sass.txt" 2>&1
  cat "$LOG/sass.txt"
fi

stamp "op tests"
test_rc=0
build-gpu/tests/test_ops_cuda --gtest_output="xml:$LOG/ops_cuda.xml" >"$LOG/test.log" 2>&1 || test_rc=$?
grep -E "^\[  (PASSED|FAILED) |^\[==========\]|FAILED  \]" "$LOG/test.log" | tail -30
grep -E "Failure|error:|out of tolerance|mismatch at|differ" "$LOG/test.log" | head -30
# Worst error per case over its seeds (the accuracy record).
awk '/^\[ metric \]/ { key = $4; for (i = 5; i <= NF; ++i) if ($i ~ /^(err\/rms|mismatches)=/) {
       split($i, kv, "="); v = kv[2] + 0; if (!(key in worst) || v > worst[key]) { worst[key] = v; what[key] = kv[1] } } }
     END { for (k in worst) printf "%-60s worst %s=%.3e\n", k, what[k], worst[k] }' "$LOG/test.log" | sort >"$LOG/metrics.txt"

if [ "${BENCH:-1}" = 1 ]; then
  stamp "bench_linear"
  build-gpu/bench/bench_linear 2>&1 | tee "$LOG/bench_linear.txt"
  stamp "torch reference"
  PYTHONUNBUFFERED=1 timeout 180 python3 bench/kernels/bench_torch_fp8.py 2>&1 | tee "$LOG/bench_torch.txt"
fi
if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
  stamp "compute-sanitizer memcheck (small cases)"
  timeout "${SANITIZE_TIMEOUT:-60}" compute-sanitizer --tool memcheck --error-exitcode 3 build-gpu/tests/test_ops_cuda \
    --gtest_filter='*small*:*odd*:*take_all*:*slice*:*dim100*:*heads12*:*k0*:*all_blocks*:*nolimit*:*ties*' \
    >"$LOG/sanitizer.log" 2>&1 && echo "memcheck: clean" || { echo "memcheck: rc=$?"; [ "$test_rc" = 0 ] && test_rc=3; }
  grep -E "ERROR SUMMARY|Invalid|out of bounds" "$LOG/sanitizer.log" | head -10
fi

stamp "done (tests rc=$test_rc)"
exit "$test_rc"
