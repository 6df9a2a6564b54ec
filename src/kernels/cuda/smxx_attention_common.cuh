// Internal to the sink attention kernels (smxx_attention*.cu), not part of their
// interface (smxx_attention.cuh): the device helpers that several kernel families share,
// and each family's launcher, which sink_attention() (smxx_attention.cu) picks from:
//   simt  (smxx_attention_simt.cu):  the f32 mode, batch-invariant (path 0);
//   tc    (smxx_attention_tc.cu):    the bf16 mode on mma.sync, batch-invariant;
//   wg    (smxx_attention_wgmma.cu): the bf16 mode on wgmma from a bf16 copy of the pool,
//                                    bitwise tc's output;
//   small (smxx_attention_small.cu): small batches, both modes (paths 1 and 2).
// The small kernel's former version (NOTES section 13), the reference of its bitwise A/B
// cases, lives with the tests (tests/ops_cuda/former_kernels.cu) and shares the small
// helpers below.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/smxx_attention.cuh"
#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear_mma.cuh"

namespace deepinfer::kernels::attn {

// cp.async of 16 bytes into shared memory (simt, tc, wg).
__device__ __forceinline__ void cp_async16(float* dst, const float* src) {
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// The bf16 mode's pieces that the mma.sync kernel (tc) shares with the wgmma kernel (wg),
// so that their bits stay equal by construction, and pow2_int with the small kernel.

// Barrier of the two warps of head group g (ids 1..4; 0 is __syncthreads).
__device__ __forceinline__ void pair_sync(int g) { asm volatile("bar.sync %0, 64;" ::"r"(g + 1) : "memory"); }

// 2^k for an integer-valued k <= 0 (the ratio of two integer maxima): exact, 0 below
// the normal range (and for -inf or NaN).
__device__ __forceinline__ float pow2_int(float k) {
  if (!(k >= -126.0f)) return 0.0f;
  return __int_as_float((int(k) + 127) << 23);
}

// The output of heads h0 .. h0 + heads - 1 of query t set to zero (a query with no entries:
// only the sink, which carries no value), by the block's threads.
__device__ __forceinline__ void zero_heads(const SinkAttentionArgs& a, int64_t t, int64_t h0, int heads, int dim,
                                           int tid, int threads) {
  for (int i = tid; i < heads * dim; i += threads) {
    const int64_t h = h0 + i / dim;
    if (h < a.heads) a.out[(t * a.heads + h) * a.dim + i % dim] = 0.0f;
  }
}

// Channels d, d + 1 of an output row: one 8-byte store where both exist and the row is
// 8-byte aligned (even dim), else each that exists.
__device__ __forceinline__ void store_pair(float* dst, int d, int dim, float v0, float v1) {
  if (d + 1 < dim && (dim & 1) == 0) {
    *reinterpret_cast<float2*>(dst + d) = make_float2(v0, v1);
  } else {
    if (d < dim) dst[d] = v0;
    if (d + 1 < dim) dst[d + 1] = v1;
  }
}

// Steps 2-3 of a 32-entry tile, shared by the mma.sync kernel and the wgmma one:
// 2. Exchange with the partner warp (same heads, the other channel half): both then hold
//    own + other, the same bits (fp32 addition commutes). Each thread owns its 16 slots
//    in `mine`; the partner reads them from its `theirs`.
// 3. Online softmax in base 2 with an integer running max: slot (nt, k) is head row
//    g + 8 (k / 2), entry nt * 8 + 2 qd + k % 2 of the tile, valid below c. Out: corr (the
//    factor for the running accumulators) and pa, the bf16 A fragments of the two PV
//    k-steps (regs 0, 1 = entries 0..7 of the step, rows g, g + 8; regs 2, 3 = 8..15).
__device__ __forceinline__ void exchange_softmax(float (&s)[4][4], float* mine, const float* theirs, int hg, int lane,
                                                 int qd, int c, float log2_scale, float (&m_run)[2], float (&l_run)[2],
                                                 float (&corr)[2], uint32_t (&pa)[2][4]) {
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int k = 0; k < 4; ++k) mine[(nt * 4 + k) * 32 + lane] = s[nt][k];
  pair_sync(hg);
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int k = 0; k < 4; ++k) s[nt][k] = __fadd_rn(s[nt][k], theirs[(nt * 4 + k) * 32 + lane]);
  float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int nt = 0; nt < 4; ++nt)
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const bool valid = nt * 8 + 2 * qd + (k & 1) < c;
      s[nt][k] = valid ? __fmul_rn(s[nt][k], log2_scale) : -INFINITY;
      mx[k >> 1] = fmaxf(mx[k >> 1], s[nt][k]);
    }
  float rs[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 1));
    mx[i] = fmaxf(mx[i], __shfl_xor_sync(0xffffffffu, mx[i], 2));
    const float m_new = fmaxf(m_run[i], ceilf(mx[i]));
    corr[i] = pow2_int(__fsub_rn(m_run[i], m_new));
    m_run[i] = m_new;
  }
#pragma unroll
  for (int nt = 0; nt < 4; ++nt) {
    float pv[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      pv[k] = s[nt][k] == -INFINITY ? 0.0f : exp2f(__fsub_rn(s[nt][k], m_run[k >> 1]));
      rs[k >> 1] = __fadd_rn(rs[k >> 1], pv[k]);
    }
    pa[nt >> 1][(nt & 1) * 2 + 0] = mma::pack_bf16(pv[0], pv[1]);
    pa[nt >> 1][(nt & 1) * 2 + 1] = mma::pack_bf16(pv[2], pv[3]);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    rs[i] = __fadd_rn(rs[i], __shfl_xor_sync(0xffffffffu, rs[i], 1));
    rs[i] = __fadd_rn(rs[i], __shfl_xor_sync(0xffffffffu, rs[i], 2));
    l_run[i] = __fmaf_rn(l_run[i], corr[i], rs[i]);
  }
}

// Launchers (cudaErrorInvalidValue where the shape does not fit the kernel; sink_attention
// has checked the common arguments).
namespace simt {
cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream);
}  // namespace simt

namespace tc {
cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream);
}  // namespace tc

namespace wg {
bool device_ok();  // compute capability 9.0 exactly (sm_90a code)
template <bool kOverlap>  // kOverlap: the next tile's QK under the current tile's softmax
cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream);
}  // namespace wg

// The small-batch kernel's shape and the pieces it shares with its former version.
namespace small {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 4;    // entries per warp step: 4 rows x 4 heads = 16 dot products
constexpr int kChunks = int(kAttnMaxDim) / 128;
constexpr int kSlice = int(kAttnMaxDim) / kAttnSplits;  // output channels stored per block

__device__ __forceinline__ float bf16r(float x) { return __bfloat162float(__float2bfloat16_rn(x)); }

// Sum of 16 per-lane slots across the warp: after the four scatter steps (lane bits 3..0)
// lane l holds slot l % 16 summed over the 16 lanes of its half, then the halves are
// added. Each slot is summed by the same tree whatever it holds.
__device__ __forceinline__ float reduce_scatter16(float (&v)[16], int lane) {
#pragma unroll
  for (int step = 0; step < 4; ++step) {
    const int off = 8 >> step;
    const bool up = (lane & off) != 0;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      if (i < off) {
        const float send = up ? v[i] : v[i + off];
        const float keep = up ? v[i + off] : v[i];
        v[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, off));
      }
    }
  }
  return __fadd_rn(v[0], __shfl_xor_sync(0xffffffffu, v[0], 16));
}

// Weight of a partial with max m against the common max M: exp(m - M), or 2^(m - M) for
// integer maxima in the bf16 mode (exact); 0 for an empty partial (m = -inf).
template <bool kBf16>
__device__ __forceinline__ float rescale(float m, float M) {
  if (m == -INFINITY) return 0.0f;
  return kBf16 ? pow2_int(__fsub_rn(m, M)) : expf(__fsub_rn(m, M));
}

cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream);

}  // namespace small

}  // namespace deepinfer::kernels::attn
