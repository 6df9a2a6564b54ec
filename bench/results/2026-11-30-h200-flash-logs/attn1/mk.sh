#!/usr/bin/env bash
# Manual build: the lead's 882f73a libraries with this worktree's changed objects.
set -euo pipefail
W=/work/wt-attn1; M=$W/build-attn1/manual; L=/work/main/build-gpu; F=/work/main/build-flash
cd $M
NV="/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -I$W/src -isystem=/usr/local/cuda/include -O3 -DNDEBUG --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] -Wall -Wextra -Wno-unused-parameter -std=c++20"
CX="/usr/bin/c++ -DBOOST_ALL_NO_LIB -DDEEPINFER_HAVE_CUDA=1 -I$W/src -I$W/include -isystem /usr/local/cuda/include -O3 -DNDEBUG -Wall -Wextra -Wno-unused-parameter -DUTF8PROC_EXPORTS -std=gnu++20"
what="${1:-all}"
if [ "$what" = all ] || [ "$what" = cu ]; then
  $NV -x cu -c $W/src/kernels/cuda/smxx_attention.cu -o smxx_attention.cu.o &
  $NV -x cu -c $W/src/ops/cuda/attention.cu -o attention.cu.o
  wait
  cp $L/libdeepinfer_cuda.a libdeepinfer_cuda.a
  ar r libdeepinfer_cuda.a smxx_attention.cu.o attention.cu.o
fi
if [ "$what" = all ] || [ "$what" = cxx ]; then
  $CX -DGTEST_HAS_PTHREAD=1 -c $W/tests/ops_cuda/cases_hc_attention.cpp -o cases_hc_attention.cpp.o &
  $CX -c $W/bench/flash/flash_layers.cpp -o flash_layers.cpp.o
  wait
fi
LIBS="-Wl,-rpath,/usr/local/cuda/lib $L/libdeepinfer_core.a /usr/lib/x86_64-linux-gnu/libgtest.a /usr/lib/x86_64-linux-gnu/libgtest_main.a /usr/lib/x86_64-linux-gnu/libutf8proc.so /usr/lib/x86_64-linux-gnu/libpcre2-8.so $M/libdeepinfer_cuda.a /usr/local/cuda/lib/libcudart_static.a -ldl /usr/lib/x86_64-linux-gnu/librt.a /usr/local/cuda/lib/libcublasLt.so /usr/lib/x86_64-linux-gnu/libgtest.a -lcudadevrt -lcudart_static -lrt -lpthread -ldl"
T=$L/tests/ops_cuda/CMakeFiles/test_ops_cuda.dir
objs=""
for o in cases_elementwise cases_former cases_fused cases_indexer cases_linear_bf16 cases_linear_fp8 cases_linear_gemv cases_linear_moe cases_linear_paths harness ops_cuda_test; do objs="$objs $T/$o.cpp.o"; done
/usr/bin/c++ -O3 -DNDEBUG -static-libstdc++ -static-libgcc $objs $M/cases_hc_attention.cpp.o $T/former_kernels.cu.o -o test_ops_cuda -L/usr/local/cuda/targets/x86_64-linux/lib $LIBS
/usr/bin/c++ -O3 -DNDEBUG -static-libstdc++ -static-libgcc $L/tests/CMakeFiles/test_model_cuda.dir/model_cuda/model_cuda_test.cpp.o -o test_model_cuda -L/usr/local/cuda/targets/x86_64-linux/lib $LIBS
/usr/bin/c++ -O3 -DNDEBUG -static-libstdc++ -static-libgcc $M/flash_layers.cpp.o -o flash_layers -L/usr/local/cuda/targets/x86_64-linux/lib $LIBS
ls -la test_ops_cuda test_model_cuda flash_layers
