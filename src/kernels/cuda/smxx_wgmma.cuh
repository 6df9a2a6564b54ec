// Hopper warpgroup MMA (wgmma, sm_90a) for the kernels: bf16 x bf16 -> fp32 with A from
// registers (RS form: every warp of the warpgroup holds its 16 rows of the 64 exactly as an
// mma.sync m16n8k16 A fragment) and B from shared memory through a matrix descriptor.
// An asm statement needs its registers enumerated: the lists come from the DI_WGMMA_*
// macros below; only the N the kernels use are instantiated.
//
// Accumulator layout (m64nNk16, fp32): thread (warp w of the group, lane = 4 g + c) holds
// d[4 i + {0, 1}] = rows 16 w + g, columns 8 i + 2 c + {0, 1} and d[4 i + {2, 3}] = row
// 16 w + g + 8, the same columns: per 8 columns, an mma.sync m16n8 fragment.
#pragma once

#include <cstdint>

namespace deepinfer::kernels::wgmma {

// Shared-memory matrix descriptor of a K-major operand in the 128-byte swizzle: rows of
// 64 bf16 (128 bytes) whose 16-byte granules are permuted by granule ^ (row % 8), in atoms
// of 8 rows (1024 bytes, 1024-byte aligned); consecutive 8-row groups 1024 bytes apart
// (stride byte offset); the leading byte offset is unused in this mode (1 by convention).
// addr: the shared-window address of the first row's k-slice (the atom base + 32 bytes
// per 16-element step of K inside the 128-byte row).
__device__ __forceinline__ uint64_t desc_k_sw128(uint32_t addr) {
  return (uint64_t(1) << 62) | (uint64_t(1024 >> 4) << 32) | (uint64_t(1) << 16) | uint64_t((addr >> 4) & 0x3fff);
}

// The asm is emitted for sm_90a only (__CUDA_ARCH_FEAT_SM90_ALL), so a translation unit
// that also targets another architecture still compiles (the project builds 90a,
// CMakeLists.txt; the FP8 GEMM's launcher falls back to mma.sync off sm_90).
// Before the first wgmma that reads registers written by ordinary instructions.
__device__ __forceinline__ void fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
// Waits until at most kPending of this warpgroup's committed wgmma groups are in flight.
template <int kPending>
__device__ __forceinline__ void wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
#endif
}
// Ties a register to this point of the program: the compiler neither reads it earlier
// (an accumulator the wgmma is still writing) nor reuses it before (an A fragment a
// wgmma in flight still reads).
__device__ __forceinline__ void keep(float& r) { asm volatile("" : "+f"(r)::"memory"); }
__device__ __forceinline__ void keep(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }

// Writes by ordinary (generic-proxy) stores and cp.async into shared memory, made
// visible to the wgmma operand reads (async proxy) that follow a barrier.
__device__ __forceinline__ void fence_proxy_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// d (+)= a b for one m64nNk16 step: scale_d == 0 starts from zero (d's old value ignored).
template <int N>
struct WgmmaRS;

}  // namespace deepinfer::kernels::wgmma

// The operand lists of a wgmma asm statement with accumulators d[0 .. K): DI_WGMMA_R<K> the
// register names "%0, .. %<K-1>", DI_WGMMA_ACC<K>(c) the operands c(d[0]), .. with c the
// constraint ("+f": accumulate, "=f": scale-d 0 and nothing kept). The kernels' own
// wgmma wrappers (attention, FP8 GEMMs) use them too.
#define DI_WGMMA_R8 "%0, %1, %2, %3, %4, %5, %6, %7"
#define DI_WGMMA_R16 DI_WGMMA_R8 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define DI_WGMMA_R24 DI_WGMMA_R16 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define DI_WGMMA_R32 DI_WGMMA_R24 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define DI_WGMMA_R40 DI_WGMMA_R32 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define DI_WGMMA_R48 DI_WGMMA_R40 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define DI_WGMMA_R56 DI_WGMMA_R48 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define DI_WGMMA_R64 DI_WGMMA_R56 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define DI_WGMMA_R72 DI_WGMMA_R64 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define DI_WGMMA_R80 DI_WGMMA_R72 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define DI_WGMMA_ACC_AT8(c, i) c(d[i]), c(d[i + 1]), c(d[i + 2]), c(d[i + 3]), c(d[i + 4]), c(d[i + 5]), c(d[i + 6]), c(d[i + 7])
#define DI_WGMMA_ACC8(c) DI_WGMMA_ACC_AT8(c, 0)
#define DI_WGMMA_ACC16(c) DI_WGMMA_ACC8(c), DI_WGMMA_ACC_AT8(c, 8)
#define DI_WGMMA_ACC24(c) DI_WGMMA_ACC16(c), DI_WGMMA_ACC_AT8(c, 16)
#define DI_WGMMA_ACC32(c) DI_WGMMA_ACC24(c), DI_WGMMA_ACC_AT8(c, 24)
#define DI_WGMMA_ACC40(c) DI_WGMMA_ACC32(c), DI_WGMMA_ACC_AT8(c, 32)
#define DI_WGMMA_ACC48(c) DI_WGMMA_ACC40(c), DI_WGMMA_ACC_AT8(c, 40)
#define DI_WGMMA_ACC56(c) DI_WGMMA_ACC48(c), DI_WGMMA_ACC_AT8(c, 48)
#define DI_WGMMA_ACC64(c) DI_WGMMA_ACC56(c), DI_WGMMA_ACC_AT8(c, 56)
#define DI_WGMMA_ACC72(c) DI_WGMMA_ACC64(c), DI_WGMMA_ACC_AT8(c, 64)
#define DI_WGMMA_ACC80(c) DI_WGMMA_ACC72(c), DI_WGMMA_ACC_AT8(c, 72)

namespace deepinfer::kernels::wgmma {

// One WgmmaRS<N> per instantiated N: the asm text names the A registers, the descriptor and
// scale_d by their operand numbers, which follow the H = N / 2 accumulators (A0 .. SC).
#define DI_WGMMA_RS(N, H, A0, A1, A2, A3, DS, SC)                                                    \
  template <>                                                                                        \
  struct WgmmaRS<N> {                                                                                \
    static __device__ __forceinline__ void mma(float (&d)[H], const uint32_t (&a)[4], uint64_t desc, \
                                               int scale_d) {                                        \
      asm volatile("{\n.reg .pred p;\n"                                                              \
                   "setp.ne.b32 p, %" #SC ", 0;\n"                                                   \
                   "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" DI_WGMMA_R##H        \
                   "}, {%" #A0 ", %" #A1 ", %" #A2 ", %" #A3 "}, %" #DS ", p, 1, 1, 0;\n}\n"         \
                   : DI_WGMMA_ACC##H("+f")                                                           \
                   : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(scale_d));           \
    }                                                                                                \
  };
DI_WGMMA_RS(16, 8, 8, 9, 10, 11, 12, 13)
DI_WGMMA_RS(32, 16, 16, 17, 18, 19, 20, 21)
DI_WGMMA_RS(48, 24, 24, 25, 26, 27, 28, 29)
DI_WGMMA_RS(64, 32, 32, 33, 34, 35, 36, 37)
DI_WGMMA_RS(80, 40, 40, 41, 42, 43, 44, 45)
DI_WGMMA_RS(96, 48, 48, 49, 50, 51, 52, 53)
DI_WGMMA_RS(112, 56, 56, 57, 58, 59, 60, 61)
DI_WGMMA_RS(128, 64, 64, 65, 66, 67, 68, 69)
#undef DI_WGMMA_RS

}  // namespace deepinfer::kernels::wgmma
