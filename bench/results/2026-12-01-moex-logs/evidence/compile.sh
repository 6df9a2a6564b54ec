#!/bin/bash
# usage: compile.sh SRCROOT OUTPREFIX  -> OUTPREFIX.o (timed), OUTPREFIX.ptx
S=$1; O=$2
NV="/usr/local/cuda/bin/nvcc -forward-unknown-to-host-compiler -I$S -isystem=/usr/local/cuda/include -O3 -DNDEBUG --generate-code=arch=compute_90a,code=[compute_90a,sm_90a] -Wall -Wextra -Wno-unused-parameter -std=c++20 -x cu"
export CCACHE_DISABLE=1
/usr/bin/time -f "%e s wall %U s user" $NV -c $S/kernels/cuda/smxx_moe_wgmma.cu -o $O.o 2> $O.time.log
uptime >> $O.time.log
ls -l $O.o >> $O.time.log
$NV -ptx --generate-code=arch=compute_90a,code=compute_90a $S/kernels/cuda/smxx_moe_wgmma.cu -o $O.ptx 2>$O.ptx.log || $NV -ptx -arch=compute_90a $S/kernels/cuda/smxx_moe_wgmma.cu -o $O.ptx 2>>$O.ptx.log
