#!/usr/bin/env bash
# The test command (README, .ci/run): builds the CPU targets and runs every CPU test,
# runs the suites listed in scripts/sanitize.sh again under ASan + UBSan (SANITIZE=0 skips
# them), checks that the CUDA build configures and compiles where the toolkit exists, and
# runs the four fuzz targets for a bounded time (scripts/fuzz.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
if [ "${SANITIZE:-1}" != 0 ]; then
  echo "== CPU test suites under ASan + UBSan"
  ./scripts/sanitize.sh
fi
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "== CUDA build (compile only)"
  cmake -S . -B build-cuda -G Ninja -DDEEPINFER_CUDA=ON -DDEEPINFER_TESTS=ON \
    -DCMAKE_CUDA_COMPILER="$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)" >/dev/null
  # The engine with the CUDA runner and the GPU tests (label gpu; they run on a GPU
  # machine: scripts/gpu_build.sh + scripts/gpu_run.sh, or `ctest -L gpu` there).
  ninja -C build-cuda deepinfer test_ops_cuda test_model_cuda
fi
if [ -x scripts/fuzz.sh ]; then
  echo "== fuzz (bounded)"
  FUZZ_SECONDS="${FUZZ_SECONDS:-60}" ./scripts/fuzz.sh
fi
echo "test: all passed"
