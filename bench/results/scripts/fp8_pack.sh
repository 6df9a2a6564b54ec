#!/usr/bin/env bash
# The FP8-activation GEMM run (bench/results/2026-11-30-fp8-gemm.md): builds HERE the GPU op
# tests and flash_layers (static cudart / libstdc++, sm_90a, as scripts/gpu_build.sh;
# cuBLASLt stays dynamic and unpacked) and packs them with the scripts the device needs
# into DEST/fp8.tar.xz (DEST: a .gpubin-* folder of the checkout the GPU machine copies;
# carry it). On the device:
#   mkdir -p /tmp/f && tar -C /tmp/f -xJf DEST/fp8.tar.xz && /tmp/f/fp8_device.sh $OUT/logs
#   BUILD=build-fp8 DEST=/work/main/.gpubin-fp8 bench/results/scripts/fp8_pack.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
BUILD="${BUILD:-build-fp8}"
DEST="${DEST:-.gpubin-fp8}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON -DDEEPINFER_CUDART_STATIC=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
ninja -C "$BUILD" -j"${JOBS:-2}" test_ops_cuda flash_layers
stage="$BUILD/pack-fp8"
rm -rf "$stage" && mkdir -p "$stage/lib"
for b in tests/ops_cuda/test_ops_cuda flash_layers; do
  strip -o "$stage/$(basename "$b")" "$BUILD/$b"
  for l in $(ldd "$BUILD/$b" | awk '/utf8proc|pcre2/ { print $3 }'); do cp -L "$l" "$stage/lib/"; done
done
cp scripts/cublaslt_dir.sh bench/results/scripts/fp8_device.sh bench/flash/torch_baselines.py bench/flash/report.py "$stage/"
{ git rev-parse HEAD; git status --short --untracked-files=no; } >"$stage/commit.txt"
mkdir -p "$DEST"
tar -C "$stage" -cJf "$DEST/fp8.tar.xz" .
ls -l "$DEST/fp8.tar.xz"
