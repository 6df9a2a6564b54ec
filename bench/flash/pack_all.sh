#!/usr/bin/env bash
# Builds flash_layers and the GPU test binaries HERE in ONE build dir (same flags as
# scripts/gpu_build.sh and bench/flash/pack.sh, so the kernels compile once, not twice) and
# packs them into one xz stream, .gpubin-int/all.tar.xz: .gpubin-flash/ (flash_layers + the
# libraries the GPU machine lacks) and .gpubin-tests/ (test_model_cuda, test_ops_cuda).
# The three binaries link the same kernels, so xz -9e's 64 MB window packs all three in
# ~2 MB more than the test binaries alone: with the tokenizer pack this stays within the
# carry limit (64 MiB with the ~52 MB tracked tree), where gpubin.tar.xz + flash.tar.xz
# do not. bench/flash/device_lib.sh unpacks it when present.
#   BUILD=build-gpu bench/flash/pack_all.sh      (then carry .gpubin-int only)
# OUTDIR (an absolute path, or relative to the repository root) puts the pack elsewhere,
# e.g. a worktree's helper packs into /work/main/.gpubin-<name> (then PACK=.gpubin-<name> on the device).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build-gpu}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON -DDEEPINFER_CUDART_STATIC=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
ninja -C "$BUILD" -j"${JOBS:-2}" flash_layers test_model_cuda test_ops_cuda
stage="$BUILD/pack_all"
rm -rf "$stage" && mkdir -p "$stage/.gpubin-flash/lib" "$stage/.gpubin-tests/lib"
strip -o "$stage/.gpubin-flash/flash_layers" "$BUILD/flash_layers"
strip -o "$stage/.gpubin-tests/test_ops_cuda" "$BUILD/tests/ops_cuda/test_ops_cuda"
strip -o "$stage/.gpubin-tests/test_model_cuda" "$BUILD/tests/test_model_cuda"
for l in $(ldd "$BUILD/flash_layers" | awk '/utf8proc|pcre2/ { print $3 }'); do
  cp -L "$l" "$stage/.gpubin-flash/lib/"
  cp -L "$l" "$stage/.gpubin-tests/lib/"
done
# TRACE=1: CUPTI too, for flash_layers --trace-csv (kernel_trace.h dlopens it only under that flag):
# 4.1 MB, ~1.1 MB in the xz stream. Opt-in because the carry (~55 MB tree + all.tar.xz ~7.4 MB +
# tok.tar.xz 1.3 MB) is within ~1 MB of its 64 MiB with it. The toolkit's own copy, so its record
# layouts match the header flash_layers compiled with.
if [ "${TRACE:-0}" = 1 ]; then
  CUPTI="${CUPTI:-$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")/../lib64/libcupti.so.13}"
  if [ -f "$CUPTI" ]; then cp -L "$CUPTI" "$stage/.gpubin-flash/lib/"; else echo "no $CUPTI: --trace-csv will not load"; fi
fi
{ git rev-parse HEAD; git status --short --untracked-files=no; } > "$stage/.gpubin-flash/commit.txt"
cp "$stage/.gpubin-flash/commit.txt" "$stage/.gpubin-tests/commit.txt"
OUTDIR="${OUTDIR:-.gpubin-int}"
mkdir -p "$OUTDIR"
# Binaries next to each other in the stream, so the shared kernels fall inside xz's window.
tar -C "$stage" -cf - .gpubin-flash/flash_layers .gpubin-tests/test_ops_cuda .gpubin-tests/test_model_cuda \
  .gpubin-flash/lib .gpubin-tests/lib .gpubin-flash/commit.txt .gpubin-tests/commit.txt | xz -9e -T2 > "$OUTDIR/all.tar.xz"
ls -l "$OUTDIR/all.tar.xz"
