#!/usr/bin/env bash
# Prints the directory holding libcublasLt.so.13 on this machine (empty if none). The
# CUDA binaries link cuBLASLt dynamically (the bf16 GEMM path of linear) and the packs
# never carry it (541 MB): the GPU machine's image has a copy, not always on the loader
# path. Known places first, then a search of the filesystem.
#   export LD_LIBRARY_PATH="$(scripts/cublaslt_dir.sh)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
  if [ -e "$d/libcublasLt.so.13" ]; then echo "$d"; exit 0; fi
done
if ldconfig -p 2>/dev/null | grep -q 'libcublasLt.so.13 '; then exit 0; fi  # the loader finds it already
f=$(find / -name 'libcublasLt.so.13*' -not -path '/proc/*' 2>/dev/null | head -1)
[ -n "$f" ] && dirname "$f"
exit 0
