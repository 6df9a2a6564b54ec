#!/usr/bin/env bash
# Session 8, lead call 3 (review mend): test_model_cuda after the host-side cleanup of the
# fused q / kv norm launch (CudaModel::Impl::nrq_args; no kernel changed).
#   bash bench/flash/pack_all.sh; then carry .gpubin-int: bash .../run27/run.sh $OUT/r
set -uo pipefail
source bench/flash/device_lib.sh "$1"
st "test_model_cuda"; gtest test_model_cuda 100
st "done"
