#!/usr/bin/env bash
# Packs the top-k run: binaries built in /work/wt-topk/build-gpu (static cudart /
# libstdc++ like scripts/gpu_build.sh), the torch baseline script and run.sh.
set -euo pipefail  # (run from /tmp/topkpack on the build machine; kept here as the record)
W=/work/wt-topk; B=$W/build-gpu; S=/tmp/topkpack/stage
rm -rf "$S" && mkdir -p "$S/lib"
strip -o "$S/test_ops_cuda" "$B/tests/ops_cuda/test_ops_cuda"
strip -o "$S/test_model_cuda" "$B/tests/test_model_cuda"
strip -o "$S/flash_layers" "$B/flash_layers"
for l in $(ldd "$B/flash_layers" "$B/tests/test_model_cuda" | awk '/utf8proc|pcre2/ { print $3 }' | sort -u); do cp -L "$l" "$S/lib/"; done
cp "$W/bench/flash/torch_baselines.py" /tmp/topkpack/run.sh "$S/"
{ git -C "$W" rev-parse HEAD; git -C "$W" status --short --untracked-files=no; } >"$S/commit.txt"
mkdir -p /work/main/.gpubin-topk
tar -C "$S" -cJf /work/main/.gpubin-topk/topk.tar.xz .
ls -l /work/main/.gpubin-topk/topk.tar.xz; cat "$S/commit.txt"
