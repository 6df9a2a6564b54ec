#!/usr/bin/env bash
# Builds the CUDA engine, the CLI and the GPU tests HERE (a machine with nvcc and the
# project's dependencies) and packs them for the GPU machine, whose image has the
# CUDA driver and toolkit but not the engine's other dependencies:
#   - static cudart, libstdc++ and libgcc, so only glibc and the driver are needed;
#   - libutf8proc / libpcre2-8 copied next to the binaries;
#   - cuBLASLt NOT packed (541 MB, over the 64 MiB carry limit): scripts/gpu_run.sh puts
#     the GPU machine's own copy on LD_LIBRARY_PATH (scripts/cublaslt_dir.sh).
# Output: .gpubin/gpubin.tar.xz (ignore .gpubin via .git/info/exclude), run there by
# scripts/gpu_run.sh.   Env: BUILD (default build-gpu), JOBS (default 2), PACK_CLI (default 1;
# 0 leaves the deepinfer binary out of the pack: the GPU tests alone, ~6 MB smaller, for
# calls whose carry would otherwise pass the 64 MiB limit).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build-gpu}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON -DDEEPINFER_CUDART_STATIC=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
ninja -C "$BUILD" -j"${JOBS:-2}" deepinfer test_model_cuda test_ops_cuda
stage="$BUILD/pack"
rm -rf "$stage" && mkdir -p "$stage/lib"
bins="tests/test_model_cuda tests/ops_cuda/test_ops_cuda"
[ "${PACK_CLI:-1}" = 0 ] || bins="deepinfer $bins"
for b in $bins; do
  strip -o "$stage/$(basename "$b")" "$BUILD/$b"
done
for l in $(ldd "$BUILD/deepinfer" | awk '/utf8proc|pcre2/ { print $3 }'); do cp -L "$l" "$stage/lib/"; done
git rev-parse HEAD >"$stage/commit.txt"
git status --short --untracked-files=no >>"$stage/commit.txt"
mkdir -p .gpubin
# xz -9e: its 64 MB window spans both test binaries, which share the engine: ~7 MB instead of ~12
tar -C "$stage" -cf - . | xz -9e -T2 > .gpubin/gpubin.tar.xz
ls -l .gpubin/gpubin.tar.xz
