#include <cooperative_groups.h>

#include <algorithm>
#include <atomic>
#include <climits>

#include "kernels/cuda/smxx_attention.cuh"
#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_linear_mma.cuh"
#include "kernels/cuda/smxx_rope.cuh"
#include "kernels/cuda/smxx_wgmma.cuh"

namespace deepinfer::kernels {
namespace {

namespace cg = cooperative_groups;

constexpr int kTile = 32;                          // entries per staged tile = lanes of the softmax step
constexpr int kStride = int(kAttnMaxDim);          // staged row width: fixed, so no per-chunk guards
constexpr int kChunks = kStride / 128;             // float4 chunks of a row per lane

// Shared memory of one block, in floats: two entry tiles [kTile][kStride] (double
// buffered; reused for the block's partial accumulator [HB][kStride] at the end),
// logits / probabilities [kTile][HB], the partial max and sum [HB] each, and the
// merge weights [HB][kAttnSplits] plus denominators [HB].
constexpr size_t smem_floats(int hb) {
  return size_t(2 * kTile * kStride) + size_t(kTile * hb) + size_t(2 * hb) + size_t(hb * kAttnSplits) + size_t(hb);
}

__device__ __forceinline__ void cp_async16(float* dst, const float* src) {
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Sum of 32 per-lane values across the warp, scattered: lane l ends with the full
// sum of slot l. Each step hands half of the remaining slots to the partner lane,
// so 31 shuffles replace 32 separate 5-step reductions. Every slot is summed by
// the same tree over the lanes (fp32 addition is commutative), so a dot product's
// value does not depend on which slot it occupied.
__device__ __forceinline__ float reduce_scatter32(float (&v)[32], int lane) {
#pragma unroll
  for (int step = 0; step < 5; ++step) {
    const int off = 16 >> step;
    const bool up = (lane & off) != 0;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      if (i < off) {
        const float send = up ? v[i] : v[i + off];
        const float keep = up ? v[i + off] : v[i];
        v[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, off));
      }
    }
  }
  return v[0];
}

__device__ __forceinline__ float butterfly_sum(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ __forceinline__ float butterfly_max(float v) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

// Grid: n * groups * kAttnSplits blocks, clusters of kAttnSplits along x; block
// (t, g, s) = query t, heads [g * HB, g * HB + HB), entry slice s. Warp w owns HPW
// heads; lane l owns channels 128 k + 4 l .. + 3 of every row (conflict-free float4
// reads of the staged rows, each read feeding HPW heads).
//
// All arithmetic on the values is spelled out (__fmaf_rn, __fadd_rn, ...) so that
// the compiler cannot contract it differently in the two instantiations: which one
// runs depends on the batch size, and the result must not.
template <int HPW, int WARPS>
__global__ void __cluster_dims__(kAttnSplits, 1, 1) __launch_bounds__(WARPS * 32, 1)
    mqa_attention_kernel(SinkAttentionArgs a, int groups, bool vec) {
  constexpr int HB = HPW * WARPS;  // heads per block
  constexpr int EG = 32 / HPW;     // entries per reduce-scatter (HPW x EG dot products)
  constexpr int kThreads = WARPS * 32;
  extern __shared__ float4 smem4[];
  float* tiles = reinterpret_cast<float*>(smem4);
  float* lp = tiles + 2 * kTile * kStride;  // [kTile][HB]
  float* pm = lp + kTile * HB;             // [HB]
  float* pl = pm + HB;                     // [HB]
  float* wts = pl + HB;                    // [HB][kAttnSplits]
  float* den = wts + HB * kAttnSplits;     // [HB]

  cg::cluster_group cluster = cg::this_cluster();
  const int s = int(cluster.block_rank());
  const int64_t qg = int64_t(blockIdx.x) / kAttnSplits;
  const int64_t t = qg / groups;
  const int g = int(qg % groups);
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int dim = int(a.dim);
  constexpr int slice = kStride / kAttnSplits;
  const int64_t b = a.offsets[t], e = a.offsets[t + 1];
  const int64_t cnt = e - b;

  if (cnt <= 0) {  // sink only: no value, so the output is zero (as the CPU op)
    for (int i = tid; i < HB * slice; i += kThreads) {
      const int lh = i / slice, d = s * slice + i % slice;
      const int64_t h = int64_t(g) * HB + lh;
      if (h < a.heads && d < dim) a.out[(t * a.heads + h) * a.dim + d] = 0.0f;
    }
    return;  // the whole cluster shares t, so every block of it leaves here
  }

  // This block's slice of the entries: a function of the count alone.
  const int64_t chunk = (cnt + kAttnSplits - 1) / kAttnSplits;
  const int64_t j0 = b + s * chunk < e ? b + s * chunk : e, j1 = j0 + chunk < e ? j0 + chunk : e;
  const int len = int(j1 - j0), ntiles = (len + kTile - 1) / kTile;

  float q[HPW][kChunks][4], acc[HPW][kChunks][4], m_run[HPW], l_run[HPW];
#pragma unroll
  for (int i = 0; i < HPW; ++i) {
    const int64_t h = int64_t(g) * HB + warp * HPW + i;
    const bool valid = h < a.heads;
    const float* qh = a.q + (t * a.heads + (valid ? h : 0)) * a.dim;
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int d = 128 * k + 4 * lane + c;
        q[i][k][c] = valid && d < dim ? qh[d] : 0.0f;
        acc[i][k][c] = 0.0f;
      }
    m_run[i] = -INFINITY;
    l_run[i] = 0.0f;
  }

  // Channels dim .. kStride of the tiles stay zero (the loads never write them):
  // q is zero there too, but 0 * stale NaN would not be.
  if (dim < kStride)
    for (int i = tid; i < 2 * kTile * (kStride - dim); i += kThreads)
      tiles[(i / (kStride - dim)) * kStride + dim + i % (kStride - dim)] = 0.0f;

  // Warp w copies rows w, w + WARPS, ...: one coalesced read of the tile's ids (lane
  // r holds row r's), then per row a shuffle and the row's 16-byte pieces, with no
  // division and no dependent global load per piece.
  auto load_tile = [&](int buf, int64_t j, int c) {
    float* dst = tiles + buf * kTile * kStride;
    const int64_t my_id = lane < c ? a.ids[j + lane] : 0;
    for (int r = warp; r < c; r += WARPS) {
      const int64_t id = __shfl_sync(0xffffffffu, my_id, r);
      const float* src = a.kv + id * a.dim;
      float* row = dst + r * kStride;
      if (vec) {
        for (int col = 4 * lane; col < dim; col += 128) cp_async16(row + col, src + col);
      } else {
        for (int col = lane; col < dim; col += 32) row[col] = src[col];
      }
    }
    cp_async_commit();
  };

  if (ntiles > 0) load_tile(0, j0, len < kTile ? len : kTile);
  for (int it = 0; it < ntiles; ++it) {
    const int c = len - it * kTile < kTile ? len - it * kTile : kTile;
    if (it + 1 < ntiles) {
      const int rest = len - (it + 1) * kTile;
      load_tile((it + 1) & 1, j0 + int64_t(it + 1) * kTile, rest < kTile ? rest : kTile);
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const float* tile = tiles + (it & 1) * kTile * kStride;

    // 1. Logits of the warp's heads for the tile's entries, EG entries at a time.
#pragma unroll
    for (int gi = 0; gi < HPW; ++gi) {
      if (gi * EG >= c) break;
      float part[32];
#pragma unroll
      for (int x = 0; x < 32; ++x) part[x] = 0.0f;
      // No per-row or per-chunk branch: rows c.. of the last group hold stale data
      // whose dots land in their own slots and are never stored, so the compiler
      // is free to issue all of a group's shared-memory reads ahead of the FMAs.
#pragma unroll
      for (int j = 0; j < EG; ++j) {
        const float* row = tile + (gi * EG + j) * kStride + 4 * lane;
        float4 v[kChunks];
#pragma unroll
        for (int k = 0; k < kChunks; ++k) v[k] = *reinterpret_cast<const float4*>(row + 128 * k);
#pragma unroll
        for (int k = 0; k < kChunks; ++k)
#pragma unroll
          for (int i = 0; i < HPW; ++i) {
            float& p = part[i * EG + j];
            p = __fmaf_rn(q[i][k][0], v[k].x, p);
            p = __fmaf_rn(q[i][k][1], v[k].y, p);
            p = __fmaf_rn(q[i][k][2], v[k].z, p);
            p = __fmaf_rn(q[i][k][3], v[k].w, p);
          }
      }
      const float dot = reduce_scatter32(part, lane);
      const int r = gi * EG + lane % EG;
      if (r < c) lp[r * HB + warp * HPW + lane / EG] = __fmul_rn(dot, a.scale);
    }
    __syncwarp();

    // 2. Online softmax per head over the tile (lane = entry).
    float corr[HPW];
#pragma unroll
    for (int i = 0; i < HPW; ++i) {
      const int lh = warp * HPW + i;
      const float x = lane < c ? lp[lane * HB + lh] : -INFINITY;
      const float m_new = fmaxf(m_run[i], butterfly_max(x));
      corr[i] = expf(__fsub_rn(m_run[i], m_new));
      const float p = lane < c ? expf(__fsub_rn(x, m_new)) : 0.0f;
      l_run[i] = __fmaf_rn(l_run[i], corr[i], butterfly_sum(p));
      m_run[i] = m_new;
      if (lane < c) lp[lane * HB + lh] = p;
    }
    __syncwarp();

    // 3. acc = acc * corr + sum_r p_r v_r, entries in order.
#pragma unroll
    for (int i = 0; i < HPW; ++i)
#pragma unroll
      for (int k = 0; k < kChunks; ++k)
#pragma unroll
        for (int x = 0; x < 4; ++x) acc[i][k][x] = __fmul_rn(acc[i][k][x], corr[i]);
#pragma unroll 4
    for (int r = 0; r < c; ++r) {
      const float* row = tile + r * kStride + 4 * lane;
      float pr[HPW];
#pragma unroll
      for (int i = 0; i < HPW; ++i) pr[i] = lp[r * HB + warp * HPW + i];
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        const float4 v = *reinterpret_cast<const float4*>(row + 128 * k);
#pragma unroll
        for (int i = 0; i < HPW; ++i) {
          acc[i][k][0] = __fmaf_rn(pr[i], v.x, acc[i][k][0]);
          acc[i][k][1] = __fmaf_rn(pr[i], v.y, acc[i][k][1]);
          acc[i][k][2] = __fmaf_rn(pr[i], v.z, acc[i][k][2]);
          acc[i][k][3] = __fmaf_rn(pr[i], v.w, acc[i][k][3]);
        }
      }
    }
    __syncthreads();  // this buffer is the target of the load issued next iteration
  }

  // Publish the partial (max, sum, acc) to the cluster: acc over the tile buffers.
  __syncthreads();
  float* xacc = tiles;  // [HB][kStride]
#pragma unroll
  for (int i = 0; i < HPW; ++i) {
    const int lh = warp * HPW + i;
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
      *reinterpret_cast<float4*>(xacc + lh * kStride + 128 * k + 4 * lane) =
          make_float4(acc[i][k][0], acc[i][k][1], acc[i][k][2], acc[i][k][3]);
    if (lane == 0) pm[lh] = m_run[i], pl[lh] = l_run[i];
  }
  cluster.sync();

  // Merge in slice order 0..kAttnSplits-1, the sink joining the max and the sum;
  // block s writes channels [s * slice, (s + 1) * slice) of the group's heads.
  if (tid < HB) {
    const int64_t h = int64_t(g) * HB + tid;
    if (h < a.heads) {
      const float sink = a.sink[h];
      float ms[kAttnSplits], M = sink;
#pragma unroll
      for (int r = 0; r < kAttnSplits; ++r) {
        ms[r] = *cluster.map_shared_rank(pm + tid, r);
        M = fmaxf(M, ms[r]);
      }
      float d = expf(__fsub_rn(sink, M));
#pragma unroll
      for (int r = 0; r < kAttnSplits; ++r) {
        const float w = expf(__fsub_rn(ms[r], M));  // 0 for an empty slice (max -inf)
        wts[tid * kAttnSplits + r] = w;
        d = __fmaf_rn(*cluster.map_shared_rank(pl + tid, r), w, d);
      }
      den[tid] = d;
    }
  }
  __syncthreads();
  for (int i = tid; i < HB * slice; i += kThreads) {
    const int lh = i / slice, d = s * slice + i % slice;
    const int64_t h = int64_t(g) * HB + lh;
    if (h >= a.heads || d >= dim) continue;
    float num = 0.0f;
#pragma unroll
    for (int r = 0; r < kAttnSplits; ++r)
      num = __fmaf_rn(*cluster.map_shared_rank(xacc + lh * kStride + d, r), wts[lh * kAttnSplits + r], num);
    a.out[(t * a.heads + h) * a.dim + d] = __fdiv_rn(num, den[lh]);
  }
  cluster.sync();  // peers may still be reading this block's partial
}

template <int HPW, int WARPS>
cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream) {
  constexpr int HB = HPW * WARPS;
  auto* kernel = mqa_attention_kernel<HPW, WARPS>;
  const size_t smem = smem_floats(HB) * sizeof(float);
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (attr != cudaSuccess) return attr;
  const bool vec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.kv) % 16 == 0;
  const int64_t groups = (a.heads + HB - 1) / HB;
  const int64_t per_launch = std::max<int64_t>(1, INT_MAX / (groups * kAttnSplits));
  for (int64_t t0 = 0; t0 < a.n; t0 += per_launch) {
    SinkAttentionArgs c = a;
    c.n = std::min(per_launch, a.n - t0);
    c.q += t0 * a.heads * a.dim;
    c.out += t0 * a.heads * a.dim;
    c.offsets += t0;  // absolute positions into ids: a sub-range needs no rebasing
    const dim3 grid(unsigned(c.n * groups * kAttnSplits));
    kernel<<<grid, WARPS * 32, smem, stream>>>(c, int(groups), vec);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// ---------------------------------------------------------------------------------
// The bf16 mode (SinkAttentionArgs::bf16; ops/attention.h has the arithmetic) on the
// tensor cores. One block per (query, group of 64 heads): the 64 heads are the M of both
// products (mma.sync m16n8k16, bf16 in, fp32 out), so each staged entry is read from
// shared memory once for all of them. 8 warps; warp w owns heads 16 (w % 4) .. + 15 and
// channels 256 (w / 4) .. + 255:
//   QK: the warp's partial logits over its 256 channels (16 heads x 32 entries), summed
//       with the partner warp's (same heads, other channels) through shared memory;
//       both warps then hold the same logits and run the same softmax on them;
//   PV: out[16 heads, 256 channels] += P (16 x 32, from the logits' registers) V.
// The entries of a query are walked in tiles of 32 in list order; every step (tiles,
// MMA chains, shuffles) depends only on the query's own count, so a query's result is
// the same bits alone or in any batch, and one kernel serves every n.
// Entries arrive as fp32 rows: cp.async copies the next tile's rows into an fp32
// staging buffer while the current tile computes; a pass then rounds them to bf16
// into the tile the MMAs read (rows padded to 520: ldmatrix rows on distinct banks).
// Measured on the H200 (bench/flash/NOTES.md §7): 3.7-3.9x the SIMT kernel from n = 256
// (8192-token prefill 34 -> 8.7 ms), but 3x slower at n = 1 (0.039 -> 0.119 ms): a block
// takes ~120-146 us at every n, latency-bound (2 warps per scheduler at 240 registers),
// and one SM walks all of a query's tiles.
namespace tc {

constexpr int kHeads = 64;                   // heads per block (4 warps x m16)
constexpr int kTileE = 32;                   // entries per tile
constexpr int kLd = int(kAttnMaxDim) + 8;    // bf16 per shared row
constexpr int kWarps = 8, kThreads = kWarps * 32;
constexpr int kHalf = int(kAttnMaxDim) / 2;  // channels per warp
constexpr size_t kQBytes = size_t(kHeads) * kLd * 2;          // q, bf16
constexpr size_t kKBytes = size_t(kTileE) * kLd * 2;          // the tile, bf16
constexpr size_t kStageBytes = size_t(kTileE) * kAttnMaxDim * 4;  // the next tile, fp32
constexpr size_t kXBytes = size_t(kWarps) * 16 * kTileE * 4;  // partial logits per warp
constexpr size_t kSmemBytes = kQBytes + kKBytes + kStageBytes + kXBytes;

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(mma::smem_addr(p)));
}

// d = a b + 0: the first MMA of a chain.
__device__ __forceinline__ void mma_bf16_zero(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();
#else
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%10, %10, %10, %10};"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.0f));
#endif
}

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

// Steps 2-3 of a 32-entry tile, shared by the mma.sync kernel and the wgmma one (namespace
// wg), so that their bits stay equal by construction:
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

__global__ void __launch_bounds__(kThreads, 1) mqa_attention_tc_kernel(SinkAttentionArgs a, bool vec) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  extern __shared__ float4 smem4[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(smem4);
  __nv_bfloat16* ks = reinterpret_cast<__nv_bfloat16*>(reinterpret_cast<char*>(smem4) + kQBytes);
  float* stage = reinterpret_cast<float*>(reinterpret_cast<char*>(smem4) + kQBytes + kKBytes);
  float* sx = reinterpret_cast<float*>(reinterpret_cast<char*>(smem4) + kQBytes + kKBytes + kStageBytes);

  const int64_t t = blockIdx.x;
  const int64_t h0 = int64_t(blockIdx.y) * kHeads;
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int hg = warp & 3, dh = warp >> 2;  // head group (16 heads), channel half
  const int g = lane >> 2, qd = lane & 3;   // fragment row / column pair
  const int dim = int(a.dim);
  const int64_t b = a.offsets[t], e = a.offsets[t + 1];
  const int64_t cnt = e - b;

  if (cnt <= 0) {  // sink only: no value, so the output is zero (as the CPU op)
    zero_heads(a, t, h0, kHeads, dim, tid, kThreads);
    return;
  }
  const int ntiles = int((cnt + kTileE - 1) / kTileE);

  // Warp w copies rows w, w + 8, w + 16, w + 24 of a tile; lane l its 16-byte pieces
  // l, l + 32, ... (columns below dim only; the rounding pass never reads the rest).
  auto load_tile = [&](int it) {
    const int64_t j0 = b + int64_t(it) * kTileE;
    const int c = int(e - j0 < kTileE ? e - j0 : kTileE);
    for (int r = warp; r < c; r += kWarps) {
      const float* src = a.kv + a.ids[j0 + r] * a.dim;
      float* row = stage + r * int(kAttnMaxDim);
      if (vec) {
        for (int col = 4 * lane; col < dim; col += 128) cp_async16(row + col, src + col);
      } else {
        for (int col = lane; col < dim; col += 32) row[col] = src[col];
      }
    }
    cp_async_commit();
  };
  load_tile(0);

  // q of the block's heads, rounded to bf16; zeros past dim and past the last head.
  for (int i = tid; i < kHeads * (kLd / 4); i += kThreads) {
    const int r = i / (kLd / 4), col = 4 * (i % (kLd / 4));
    const int64_t h = h0 + r;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (h < a.heads) {
      const float* src = a.q + (t * a.heads + h) * a.dim;
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (col + k < dim) v[k] = src[col + k];
    }
    *reinterpret_cast<uint2*>(qs + r * kLd + col) = make_uint2(mma::pack_bf16(v[0], v[1]), mma::pack_bf16(v[2], v[3]));
  }

  // Rows g and g + 8 of the warp's 16 heads: running integer max (from the sink), sum.
  float ys[2], m_run[2], l_run[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t h = h0 + hg * 16 + g + 8 * i;
    ys[i] = h < a.heads ? __fmul_rn(a.sink[h], kAttnLog2eDev) : 0.0f;
    m_run[i] = ceilf(ys[i]);
  }
  float o[kHalf / 8][4];
#pragma unroll
  for (int nt = 0; nt < kHalf / 8; ++nt)
#pragma unroll
    for (int k = 0; k < 4; ++k) o[nt][k] = 0.0f;

  // ldmatrix roles. A (q, 16 x 16): rows lane % 16, k half lane / 16. B of QK (entries x
  // channels, non-transposed): entries (lane % 8) + 8 (lane / 16), channel half (lane / 8) % 2.
  // B of PV (entries x channels, transposed): entries (lane % 8) + 8 ((lane / 8) % 2),
  // channel half lane / 16.
  const int a_row = hg * 16 + (lane & 15), a_k = (lane >> 4) * 8;
  const int b_ent = (lane & 7) + (lane >> 4) * 8, b_k = ((lane >> 3) & 1) * 8;
  const int v_ent = (lane & 7) + ((lane >> 3) & 1) * 8, v_ch = (lane >> 4) * 8;
  const int c0 = dh * kHalf;

  for (int it = 0; it < ntiles; ++it) {
    const int64_t j0 = b + int64_t(it) * kTileE;
    const int c = int(e - j0 < kTileE ? e - j0 : kTileE);
    cp_async_wait<0>();
    __syncthreads();  // the staged rows are in; every warp is done with the previous tile

    // Round the staged rows to bf16; rows c.. and channels dim.. are zeros (no NaN from
    // stale data under a zero probability).
    for (int i = tid; i < kTileE * (kLd / 4); i += kThreads) {
      const int r = i / (kLd / 4), col = 4 * (i % (kLd / 4));
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (r < c && col + 4 <= dim) {  // a whole 16-byte piece: one shared load
        const float4 w = *reinterpret_cast<const float4*>(stage + r * int(kAttnMaxDim) + col);
        v[0] = w.x, v[1] = w.y, v[2] = w.z, v[3] = w.w;
      } else if (r < c) {
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (col + k < dim) v[k] = stage[r * int(kAttnMaxDim) + col + k];
      }
      *reinterpret_cast<uint2*>(ks + r * kLd + col) = make_uint2(mma::pack_bf16(v[0], v[1]), mma::pack_bf16(v[2], v[3]));
    }
    __syncthreads();  // the tile is ready and the staging buffer free
    if (it + 1 < ntiles) load_tile(it + 1);

    // 1. Partial logits over the warp's channels: two chains of 8 k-steps, each summed
    //    into s in fp32 (short chains keep the tensor core's accumulation error small).
    float s[4][4];
#pragma unroll
    for (int chain = 0; chain < 2; ++chain) {
      float d[4][4];
#pragma unroll
      for (int kk = 0; kk < 8; ++kk) {
        const int k0 = c0 + (chain * 8 + kk) * 16;
        uint32_t af[4];
        mma::ldmatrix_x4(af, qs + a_row * kLd + k0 + a_k);
#pragma unroll
        for (int np = 0; np < 2; ++np) {
          uint32_t bf[4];
          mma::ldmatrix_x4(bf, ks + (np * 16 + b_ent) * kLd + k0 + b_k);
          if (kk == 0) {
            mma_bf16_zero(d[2 * np], af, bf[0], bf[1]);
            mma_bf16_zero(d[2 * np + 1], af, bf[2], bf[3]);
          } else {
            mma::mma_bf16(d[2 * np], af, bf[0], bf[1]);
            mma::mma_bf16(d[2 * np + 1], af, bf[2], bf[3]);
          }
        }
      }
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int k = 0; k < 4; ++k) s[nt][k] = chain == 0 ? d[nt][k] : __fadd_rn(s[nt][k], d[nt][k]);
    }
    // 2-3. Exchange with the partner warp, online softmax (exchange_softmax).
    float corr[2];
    uint32_t pa[2][4];
    exchange_softmax(s, sx + warp * (16 * kTileE), sx + (warp ^ 4) * (16 * kTileE), hg, lane, qd, c, a.log2_scale,
                     m_run, l_run, corr, pa);
#pragma unroll
    for (int nt = 0; nt < kHalf / 8; ++nt) {
      o[nt][0] = __fmul_rn(o[nt][0], corr[0]);
      o[nt][1] = __fmul_rn(o[nt][1], corr[0]);
      o[nt][2] = __fmul_rn(o[nt][2], corr[1]);
      o[nt][3] = __fmul_rn(o[nt][3], corr[1]);
    }

    // 4. out += P V over the warp's 256 channels.
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
      for (int np = 0; np < kHalf / 16; ++np) {
        uint32_t bf[4];
        ldmatrix_x4_trans(bf, ks + (kk * 16 + v_ent) * kLd + c0 + np * 16 + v_ch);
        mma::mma_bf16(o[2 * np], pa[kk], bf[0], bf[1]);
        mma::mma_bf16(o[2 * np + 1], pa[kk], bf[2], bf[3]);
      }
  }

  // out = acc / (sum + 2^(y_sink - M)).
  float den[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) den[i] = __fadd_rn(l_run[i], exp2f(__fsub_rn(ys[i], m_run[i])));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t h = h0 + hg * 16 + g + 8 * i;
    if (h >= a.heads) continue;
    float* dst = a.out + (t * a.heads + h) * a.dim;
#pragma unroll
    for (int nt = 0; nt < kHalf / 8; ++nt) {
      const int d = c0 + nt * 8 + 2 * qd;
      store_pair(dst, d, dim, __fdiv_rn(o[nt][2 * i], den[i]), __fdiv_rn(o[nt][2 * i + 1], den[i]));
    }
  }
}

cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(mqa_attention_tc_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  if (attr != cudaSuccess) return attr;
  const int64_t groups = (a.heads + kHeads - 1) / kHeads;
  if (groups > 65535) return cudaErrorInvalidValue;
  const bool vec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.kv) % 16 == 0;
  for (int64_t t0 = 0; t0 < a.n; t0 += INT_MAX) {
    SinkAttentionArgs c = a;
    c.n = std::min<int64_t>(INT_MAX, a.n - t0);
    c.q += t0 * a.heads * a.dim;
    c.out += t0 * a.heads * a.dim;
    c.offsets += t0;  // absolute positions into ids
    mqa_attention_tc_kernel<<<dim3(unsigned(c.n), unsigned(groups)), kThreads, kSmemBytes, stream>>>(c, vec);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

}  // namespace tc

// ---------------------------------------------------------------------------------
// Small batches outside the batch-invariant mode (SinkAttentionArgs::path): both
// precisions, one kernel, built for latency (the design below; the current kernel runs
// the same arithmetic with its rows staged ahead, see small_attention_kernel). At n = 1 the kernels above leave the GPU
// idle: the SIMT kernel runs 2 warps on each of 128 SMs (~33 us for 1.3 MB of entries),
// the tensor-core one walks all 20 tiles of a query on one SM (~120 us).
// Block (t, g, s): query t, heads 4g .. 4g + 3 (the staged kernel: 5g .. 5g + 4), entry slice s of kAttnSplits (a cluster,
// as the SIMT kernel: the same slices of the count, the same DSMEM merge in slice order).
// Inside a block the slice is cut again into 8 warp slices; warp w walks its entries 4 at
// a time straight from global memory (the 4 rows in registers, each read feeding the 4
// heads), keeping its own online softmax per head; the warps' partials are merged in warp
// order, then the cluster's in slice order. No staging, no block barrier per tile: the
// only serial chain is ~3 groups of 4 rows per warp at V4.1 (80 entries per slice).
// Every step depends on the query's own count only, so a query gets the same bits in any
// batch from this kernel too; but not the same bits as the kernels above (other sums), so
// the batch-invariant mode never mixes them (the choice depends on n).
// kBf16: the bf16 mode's arithmetic (ops/attention.h): q and the entries rounded to bf16
// (exact products), base-2 logits, integer running maxima (the merge weights are powers of
// two), probabilities rounded to bf16 for PV, the denominator from the unrounded ones.
namespace small {

constexpr int kHeads = 4;   // heads per block (a lane keeps 4 x 16 q and accumulator values)
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRows = 4;    // entries per warp step: 4 rows x 4 heads = 16 dot products
constexpr int kChunks = int(kAttnMaxDim) / 128;
constexpr int kSlice = int(kAttnMaxDim) / kAttnSplits;  // output channels stored per block
// Shared memory: the warps' accumulators [kWarps][kHeads][512], then the block's
// [kHeads][512] (read by the cluster), the warps' (max, sum) and the block's.
constexpr size_t kSmemFloats = size_t(kWarps + 1) * kHeads * kAttnMaxDim + 2 * kWarps * kHeads + 2 * kHeads;

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
  return kBf16 ? tc::pow2_int(__fsub_rn(m, M)) : expf(__fsub_rn(m, M));
}

// The former kernel (NOTES section 13), kept for the A/B cases and benchmarks (path 3):
// the rows of each step loaded from global memory into registers after the previous
// step, the warp merge's weights recomputed per channel.
template <bool kBf16>
__global__ void __cluster_dims__(kAttnSplits, 1, 1) __launch_bounds__(kThreads, 1)
    former_attention_kernel(SinkAttentionArgs a, int groups, bool vec) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  extern __shared__ float4 smem4[];
  float* wacc = reinterpret_cast<float*>(smem4);                 // [kWarps][kHeads][512]
  float* bacc = wacc + kWarps * kHeads * int(kAttnMaxDim);       // [kHeads][512]
  float* wm = bacc + kHeads * int(kAttnMaxDim);                  // [kWarps][kHeads]
  float* wl = wm + kWarps * kHeads;                              // [kWarps][kHeads]
  float* pm = wl + kWarps * kHeads;                              // [kHeads]
  float* pl = pm + kHeads;                                       // [kHeads]

  cg::cluster_group cluster = cg::this_cluster();
  const int s = int(cluster.block_rank());
  const int64_t qg = int64_t(blockIdx.x) / kAttnSplits;
  const int64_t t = qg / groups;
  const int g = int(qg % groups);
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int dim = int(a.dim);
  const int64_t b = a.offsets[t], e = a.offsets[t + 1];
  const int64_t cnt = e - b;

  if (cnt <= 0) {  // sink only: no value, so the output is zero (as the CPU op)
    for (int i = tid; i < kHeads * kSlice; i += kThreads) {
      const int lh = i / kSlice, d = s * kSlice + i % kSlice;
      const int64_t h = int64_t(g) * kHeads + lh;
      if (h < a.heads && d < dim) a.out[(t * a.heads + h) * a.dim + d] = 0.0f;
    }
    return;  // the whole cluster shares t
  }

  // The block's slice (as the SIMT kernel), then the warp's part of it.
  const int64_t chunk = (cnt + kAttnSplits - 1) / kAttnSplits;
  const int64_t j0 = b + s * chunk < e ? b + s * chunk : e, j1 = j0 + chunk < e ? j0 + chunk : e;
  const int64_t len = j1 - j0, sub = (len + kWarps - 1) / kWarps;
  const int64_t w0 = j0 + (warp * sub < len ? warp * sub : len);
  const int64_t w1 = j0 + ((warp + 1) * sub < len ? (warp + 1) * sub : len);

  // Lane l: channels 128 k + 4 l .. + 3 of every row, for the block's 4 heads.
  float q[kHeads][kChunks][4], acc[kHeads][kChunks][4], m_run[kHeads], l_run[kHeads];
#pragma unroll
  for (int i = 0; i < kHeads; ++i) {
    const int64_t h = int64_t(g) * kHeads + i;
    const bool valid = h < a.heads;
    const float* qh = a.q + (t * a.heads + (valid ? h : 0)) * a.dim;
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int d = 128 * k + 4 * lane + c;
        q[i][k][c] = valid && d < dim ? qh[d] : 0.0f;
        acc[i][k][c] = 0.0f;
      }
    m_run[i] = -INFINITY;
    l_run[i] = 0.0f;
  }
  // RoPE of q (SinkAttentionArgs::rope_dim): dim is even, so a pair (rope start + 2 p,
  // + 1) is channels c = 0, 1 or 2, 3 of one lane; cos / sin once per pair for the 4 heads.
  const int rope0 = dim - int(a.rope_dim);
  if (a.rope_dim > 0) {
    const int64_t pos = a.positions[t];
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
#pragma unroll
      for (int c = 0; c < 4; c += 2) {
        const int d = 128 * k + 4 * lane + c;
        if (d < rope0 || d >= dim) continue;
        float cs, sn;
        rope_cs(pos, a.inv_freq, (d - rope0) / 2, a.rope_factor, false, cs, sn);
#pragma unroll
        for (int i = 0; i < kHeads; ++i) {
          float pr[2] = {q[i][k][c], q[i][k][c + 1]};
          rope_pair(pr, cs, sn);
          q[i][k][c] = pr[0], q[i][k][c + 1] = pr[1];
        }
      }
  }
  if (kBf16) {
#pragma unroll
    for (int i = 0; i < kHeads; ++i)
#pragma unroll
      for (int k = 0; k < kChunks; ++k)
#pragma unroll
        for (int c = 0; c < 4; ++c) q[i][k][c] = bf16r(q[i][k][c]);
  }
  const float lscale = kBf16 ? a.log2_scale : a.scale;

  int64_t id_base = w0;
  int64_t my_id = lane < w1 - w0 ? a.ids[w0 + lane] : 0;  // the ids of the next 32 entries
  for (int64_t j = w0; j < w1; j += kRows) {
    if (j - id_base >= 32) {  // warp-uniform
      id_base = j;
      my_id = lane < w1 - j ? a.ids[j + lane] : 0;
    }
    const int c = int(w1 - j < kRows ? w1 - j : kRows);
    float v[kRows][kChunks][4];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const int64_t id = __shfl_sync(0xffffffffu, my_id, int(j - id_base) + r);
      const float* src = a.kv + id * a.dim;
#pragma unroll
      for (int k = 0; k < kChunks; ++k) {
        const int d = 128 * k + 4 * lane;
        if (r < c && vec && d < dim) {
          const float4 x = __ldg(reinterpret_cast<const float4*>(src + d));
          v[r][k][0] = x.x, v[r][k][1] = x.y, v[r][k][2] = x.z, v[r][k][3] = x.w;
        } else {
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) v[r][k][cc] = r < c && d + cc < dim ? src[d + cc] : 0.0f;
        }
      }
    }
    if (kBf16) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int k = 0; k < kChunks; ++k)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) v[r][k][cc] = bf16r(v[r][k][cc]);
    }

    // Dots: slot 4 i + r = head i . row r; after the reduce lane l holds slot l % 16.
    float part[16];
#pragma unroll
    for (int x = 0; x < 16; ++x) part[x] = 0.0f;
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
#pragma unroll
      for (int i = 0; i < kHeads; ++i)
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float& p = part[4 * i + r];
          p = __fmaf_rn(q[i][k][0], v[r][k][0], p);
          p = __fmaf_rn(q[i][k][1], v[r][k][1], p);
          p = __fmaf_rn(q[i][k][2], v[r][k][2], p);
          p = __fmaf_rn(q[i][k][3], v[r][k][3], p);
        }
    const float dot = reduce_scatter16(part, lane);
    const int my_h = (lane & 15) >> 2, my_r = lane & 3;
    const float x = my_r < c ? __fmul_rn(dot, lscale) : -INFINITY;

    // Online softmax per head over the step's rows (lanes 4 i .. 4 i + 3 hold head i).
    float gm = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    gm = fmaxf(gm, __shfl_xor_sync(0xffffffffu, gm, 2));
    float mh = 0.0f;  // this lane's head's running max
#pragma unroll
    for (int i = 0; i < kHeads; ++i) mh = my_h == i ? m_run[i] : mh;
    const float m_new = fmaxf(mh, kBf16 ? ceilf(gm) : gm);
    const float p = my_r < c ? (kBf16 ? exp2f(__fsub_rn(x, m_new)) : expf(__fsub_rn(x, m_new))) : 0.0f;
    float rs = __fadd_rn(p, __shfl_xor_sync(0xffffffffu, p, 1));
    rs = __fadd_rn(rs, __shfl_xor_sync(0xffffffffu, rs, 2));
    const float corr = rescale<kBf16>(mh, m_new);
    const float pv = kBf16 ? bf16r(p) : p;
#pragma unroll
    for (int i = 0; i < kHeads; ++i) {
      const float ci = __shfl_sync(0xffffffffu, corr, 4 * i);
      m_run[i] = __shfl_sync(0xffffffffu, m_new, 4 * i);
      l_run[i] = __fmaf_rn(l_run[i], ci, __shfl_sync(0xffffffffu, rs, 4 * i));
#pragma unroll
      for (int k = 0; k < kChunks; ++k)
#pragma unroll
        for (int cc = 0; cc < 4; ++cc) acc[i][k][cc] = __fmul_rn(acc[i][k][cc], ci);
    }
    // acc += p v, rows in order (a row past c has p = 0 and zero values).
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int i = 0; i < kHeads; ++i) {
        const float pr = __shfl_sync(0xffffffffu, pv, 4 * i + r);
#pragma unroll
        for (int k = 0; k < kChunks; ++k)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) acc[i][k][cc] = __fmaf_rn(pr, v[r][k][cc], acc[i][k][cc]);
      }
  }

  // The warps' partials, merged in warp order into the block's.
#pragma unroll
  for (int i = 0; i < kHeads; ++i) {
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
      *reinterpret_cast<float4*>(wacc + (warp * kHeads + i) * int(kAttnMaxDim) + 128 * k + 4 * lane) =
          make_float4(acc[i][k][0], acc[i][k][1], acc[i][k][2], acc[i][k][3]);
    if (lane == 0) wm[warp * kHeads + i] = m_run[i], wl[warp * kHeads + i] = l_run[i];
  }
  __syncthreads();
  for (int idx = tid; idx < kHeads * int(kAttnMaxDim); idx += kThreads) {
    const int i = idx / int(kAttnMaxDim), d = idx % int(kAttnMaxDim);
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wm[w * kHeads + i]);
    float num = 0.0f, den = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = rescale<kBf16>(wm[w * kHeads + i], M);
      num = __fmaf_rn(wacc[(w * kHeads + i) * int(kAttnMaxDim) + d], wt, num);
      den = __fmaf_rn(wl[w * kHeads + i], wt, den);
    }
    bacc[idx] = num;
    if (d == 0) pm[i] = M, pl[i] = den;
  }
  cluster.sync();

  // Merge the slices in order 0..kAttnSplits-1 with the sink; block s writes channels
  // [s * kSlice, (s + 1) * kSlice) of the 4 heads, a thread per channel pair (so that the
  // output's inverse RoPE has both values of its pair).
  constexpr int kPairs = kSlice / 2;
  for (int idx = tid; idx < kHeads * kPairs; idx += kThreads) {
    const int i = idx / kPairs, d = s * kSlice + 2 * (idx % kPairs);
    const int64_t h = int64_t(g) * kHeads + i;
    if (h >= a.heads || d >= dim) continue;
    const float ys = kBf16 ? __fmul_rn(a.sink[h], kAttnLog2eDev) : a.sink[h];
    float ms[kAttnSplits], M = kBf16 ? ceilf(ys) : ys;
#pragma unroll
    for (int r = 0; r < kAttnSplits; ++r) {
      ms[r] = *cluster.map_shared_rank(pm + i, r);
      M = fmaxf(M, ms[r]);
    }
    float den = kBf16 ? exp2f(__fsub_rn(ys, M)) : expf(__fsub_rn(ys, M)), num0 = 0.0f, num1 = 0.0f;
#pragma unroll
    for (int r = 0; r < kAttnSplits; ++r) {
      const float wt = rescale<kBf16>(ms[r], M);
      const float* peer = cluster.map_shared_rank(bacc + i * int(kAttnMaxDim) + d, r);
      den = __fmaf_rn(*cluster.map_shared_rank(pl + i, r), wt, den);
      num0 = __fmaf_rn(peer[0], wt, num0);
      num1 = __fmaf_rn(peer[1], wt, num1);  // d + 1 <= 511: inside the row (zero past dim)
    }
    float o[2] = {__fdiv_rn(num0, den), __fdiv_rn(num1, den)};
    if (a.rope_dim > 0 && d >= rope0) {  // d - rope0 even: a whole pair
      float cs, sn;
      rope_cs(a.positions[t], a.inv_freq, (d - rope0) / 2, a.rope_factor, true, cs, sn);
      rope_pair(o, cs, sn);
    }
    float* dst = a.out + (t * a.heads + h) * a.dim + d;
    dst[0] = o[0];
    if (d + 1 < dim) dst[1] = o[1];
  }
  cluster.sync();  // peers may still be reading this block's partial
}

template <bool kBf16>
cudaError_t launch_former_one(const SinkAttentionArgs& a, cudaStream_t stream) {
  auto* kernel = former_attention_kernel<kBf16>;
  const size_t smem = kSmemFloats * sizeof(float);
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (attr != cudaSuccess) return attr;
  const bool vec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.kv) % 16 == 0;
  const int64_t groups = (a.heads + kHeads - 1) / kHeads;
  const int64_t per_launch = std::max<int64_t>(1, INT_MAX / (groups * kAttnSplits));
  for (int64_t t0 = 0; t0 < a.n; t0 += per_launch) {
    SinkAttentionArgs c = a;
    c.n = std::min(per_launch, a.n - t0);
    c.q += t0 * a.heads * a.dim;
    c.out += t0 * a.heads * a.dim;
    c.offsets += t0;
    if (c.positions) c.positions += t0;
    kernel<<<dim3(unsigned(c.n * groups * kAttnSplits)), kThreads, smem, stream>>>(c, int(groups), vec);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t launch_former(const SinkAttentionArgs& a, cudaStream_t stream) {
  return a.bf16 ? launch_former_one<true>(a, stream) : launch_former_one<false>(a, stream);
}

// The current kernel: the former kernel's arithmetic, bit for bit (the same slices, warp
// slices, 4-row steps, lane channels, reduction trees and merge orders), scheduled for
// latency (NOTES section 23):
// - each warp stages its rows in its own shared-memory ring of kRing rows (3 steps) with
//   cp.async, so a V4.1 warp slice (<= 10 rows at 640 entries) is in flight from the
//   block's start instead of one 4-row step per global round trip; a lane copies exactly
//   the 4 x float4 of a row that it reads later, so its own cp.async.wait_group is the
//   only synchronization the ring needs;
// - the ids of the warp's next 32 rows are loaded one window ahead;
// - RoPE's cos / sin once per pair for the block (q's rotation and the output's inverse
//   share them: the inverse is the same values with sin negated, exactly rope_cs(.., true));
// - the merges' weights once per (warp, head) and (slice, head) instead of per channel;
// - a step skips acc *= corr where every head's corr is exactly 1 (x * 1 = x) and in the
//   first step (acc = +0, corr = 0).
// Heads per block: 5, so that a query is 13 clusters (12 x 5 + 4 heads at V4.1's 64) and
// n = 1 runs in one wave where the H200 holds 15 clusters of 8 one-SM blocks (4 heads: 16
// clusters, two waves; NOTES 23 / 25). Heads 0-3 of a block sit in the 16 dot slots of
// reduce_scatter16 as before, head 4 in 4 more slots summed by the same lane-bit tree
// (reduce_fifth), so a head's bits do not depend on its group (the A/B cases compare
// against the former kernel's groups of 4). q lives in shared memory: 5 heads of q and
// accumulators would not fit in 255 registers.
constexpr int kHeadsR = 5;
static_assert(kHeadsR == 4 || kHeadsR == 5, "the dot slots: 16 in reduce_scatter16, plus 4 for a fifth head");
constexpr int kRing = 12;                 // rows staged per warp: kAhead steps of kRows
constexpr int kAhead = kRing / kRows;     // steps in flight
constexpr int kRingFloats = kWarps * kRing * int(kAttnMaxDim);
constexpr int kMaxPairs = int(kAttnMaxDim) / 2;  // RoPE pairs of a head at most
// Shared memory (floats): the rings, which the merges reuse once every warp is done
// (wacc [kWarps][kHeadsR][512], then bacc [kHeadsR][512], the cluster's view); q [kHeadsR][512]
// (rotated and rounded); then wm, wl, wts [kWarps][kHeadsR]; pm, pl [kHeadsR];
// cwt [kAttnSplits][kHeadsR], cden [kHeadsR]; RoPE cos, sin [kMaxPairs].
constexpr int kOffQ = kRingFloats;  // 16-byte aligned: float4 reads
constexpr int kOffWm = kOffQ + kHeadsR * int(kAttnMaxDim), kOffWl = kOffWm + kWarps * kHeadsR, kOffWts = kOffWl + kWarps * kHeadsR;
constexpr int kOffPm = kOffWts + kWarps * kHeadsR, kOffPl = kOffPm + kHeadsR, kOffCwt = kOffPl + kHeadsR;
constexpr int kOffCden = kOffCwt + kAttnSplits * kHeadsR, kOffCos = kOffCden + kHeadsR, kOffSin = kOffCos + kMaxPairs;
constexpr size_t kSmemFloatsRing = size_t(kOffSin + kMaxPairs);
static_assert((kWarps + 1) * kHeadsR * int(kAttnMaxDim) <= kRingFloats, "the merge buffers must fit in the rings");
static_assert(kRing % kRows == 0 && 32 % kRows == 0, "ring and id windows hold whole steps");
static_assert(kMaxPairs <= kThreads, "one thread per RoPE pair");

// The fifth head's 4 dot slots (row r in v[r]) summed across the warp by the tree of
// reduce_scatter16 (lane bits 3, 2, 1, 0, then 4; a + b = b + a, so which lane keeps which
// half does not matter): scatter over bits 3 and 2 (row 2 b3 + b2 stays at the lane), then
// butterflies over 1, 0 and 4. Lane l returns row (l >> 2) & 3.
__device__ __forceinline__ float reduce_fifth(float (&v)[4], int lane) {
  {
    const bool up = (lane & 8) != 0;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float send = up ? v[i] : v[i + 2];
      const float keep = up ? v[i + 2] : v[i];
      v[i] = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, 8));
    }
  }
  const bool up = (lane & 4) != 0;
  const float send = up ? v[0] : v[1];
  const float keep = up ? v[1] : v[0];
  float x = __fadd_rn(keep, __shfl_xor_sync(0xffffffffu, send, 4));
  x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 2));
  x = __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return __fadd_rn(x, __shfl_xor_sync(0xffffffffu, x, 16));
}

// cp.async of 16 bytes; the "memory" clobbers keep the compiler from moving shared-memory
// reads of a slot past the copy that refills it (the copies into a slot are issued after
// the step that read it, in program order).
__device__ __forceinline__ void ring_copy16(float* dst, const float* src) {
  const unsigned d = unsigned(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void ring_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void ring_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

template <bool kBf16>
__global__ void __cluster_dims__(kAttnSplits, 1, 1) __launch_bounds__(kThreads, 1)
    small_attention_kernel(SinkAttentionArgs a, int groups, bool vec, bool qvec) {
  pdl_trigger();  // dependents launched with PDL (gemv_set_pdl) may start (no-op otherwise)
  extern __shared__ float4 smem4[];
  float* sm = reinterpret_cast<float*>(smem4);
  float* wacc = sm;                                   // after the walk: [kWarps][kHeadsR][512]
  float* bacc = sm + kWarps * kHeadsR * int(kAttnMaxDim);  // [kHeadsR][512]
  float* wm = sm + kOffWm;
  float* wl = sm + kOffWl;
  float* wts = sm + kOffWts;
  float* pm = sm + kOffPm;
  float* pl = sm + kOffPl;
  float* cwt = sm + kOffCwt;
  float* cden = sm + kOffCden;
  float* rcos = sm + kOffCos;
  float* rsin = sm + kOffSin;
  float* qs = sm + kOffQ;

  cg::cluster_group cluster = cg::this_cluster();
  const int s = int(cluster.block_rank());
  const int64_t qg = int64_t(blockIdx.x) / kAttnSplits;
  const int64_t t = qg / groups;
  const int g = int(qg % groups);
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int dim = int(a.dim);
  const int64_t b = a.offsets[t], e = a.offsets[t + 1];
  const int64_t cnt = e - b;

  if (cnt <= 0) {  // sink only: no value, so the output is zero (as the CPU op)
    for (int i = tid; i < kHeadsR * kSlice; i += kThreads) {
      const int lh = i / kSlice, d = s * kSlice + i % kSlice;
      const int64_t h = int64_t(g) * kHeadsR + lh;
      if (h < a.heads && d < dim) a.out[(t * a.heads + h) * a.dim + d] = 0.0f;
    }
    return;  // the whole cluster shares t
  }

  // The block's slice and the warp's part of it (as the former kernel).
  const int64_t chunk = (cnt + kAttnSplits - 1) / kAttnSplits;
  const int64_t j0 = b + s * chunk < e ? b + s * chunk : e, j1 = j0 + chunk < e ? j0 + chunk : e;
  const int64_t len = j1 - j0, sub = (len + kWarps - 1) / kWarps;
  const int64_t w0 = j0 + (warp * sub < len ? warp * sub : len);
  const int64_t w1 = j0 + ((warp + 1) * sub < len ? (warp + 1) * sub : len);
  const int64_t wlen = w1 - w0;  // rows of this warp, local index u = 0 .. wlen - 1

  // Rows u of the warp go to ring slot u % kRing; step k's rows are cp.async group k (one
  // group per step, empty past the list, so that group k is always the k-th committed).
  float* ring = sm + warp * kRing * int(kAttnMaxDim);
  int64_t id_base = 0;  // my_id: ids of rows id_base + lane; next_id: the window after
  int64_t my_id = lane < wlen ? a.ids[w0 + lane] : 0;
  int64_t next_id = 32 + lane < wlen ? a.ids[w0 + 32 + lane] : 0;
  auto issue_step = [&](int64_t k) {  // warp-uniform
    const int64_t u0 = k * kRows;
    if (u0 < wlen) {
      if (u0 - id_base >= 32) {
        id_base += 32;
        my_id = next_id;
        next_id = id_base + 32 + lane < wlen ? a.ids[w0 + id_base + 32 + lane] : 0;
      }
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (u0 + r >= wlen) break;
        const int64_t id = __shfl_sync(0xffffffffu, my_id, int(u0 + r - id_base));
        const float* src = a.kv + id * a.dim;
        float* dst = ring + int((u0 + r) % kRing) * int(kAttnMaxDim);
#pragma unroll
        for (int kk = 0; kk < kChunks; ++kk) {
          const int d = 128 * kk + 4 * lane;
          if (vec) {
            if (d < dim) ring_copy16(dst + d, src + d);
          } else {  // rows not 16-byte aligned: plain loads, zero past dim
#pragma unroll
            for (int cc = 0; cc < 4; ++cc) dst[d + cc] = d + cc < dim ? src[d + cc] : 0.0f;
          }
        }
      }
    }
    ring_commit();
  };
#pragma unroll
  for (int k = 0; k < kAhead; ++k) issue_step(k);

  // q of the block's heads into shared memory (zero past dim and for heads past a.heads),
  // while the rows come in; then RoPE (SinkAttentionArgs::rope_dim: cos / sin of pair p at
  // thread p, for q here and the output's inverse at the end) and the bf16 rounding, a
  // thread per channel pair: the values the former kernel kept in registers.
  if (qvec) {
    for (int idx = tid; idx < kHeadsR * int(kAttnMaxDim) / 4; idx += kThreads) {
      const int i = idx / (int(kAttnMaxDim) / 4), d = 4 * (idx % (int(kAttnMaxDim) / 4));
      const int64_t h = int64_t(g) * kHeadsR + i;
      *reinterpret_cast<float4*>(qs + i * int(kAttnMaxDim) + d) =
          h < a.heads && d < dim ? __ldg(reinterpret_cast<const float4*>(a.q + (t * a.heads + h) * a.dim + d))
                                 : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
  } else {
    for (int idx = tid; idx < kHeadsR * int(kAttnMaxDim); idx += kThreads) {
      const int i = idx / int(kAttnMaxDim), d = idx % int(kAttnMaxDim);
      const int64_t h = int64_t(g) * kHeadsR + i;
      qs[idx] = h < a.heads && d < dim ? a.q[(t * a.heads + h) * a.dim + d] : 0.0f;
    }
  }
  const int rope0 = dim - int(a.rope_dim);
  if (a.rope_dim > 0 && tid < int(a.rope_dim) / 2)
    rope_cs(a.positions[t], a.inv_freq, tid, a.rope_factor, false, rcos[tid], rsin[tid]);
  float acc[kHeadsR][kChunks][4], m_run[kHeadsR], l_run[kHeadsR];
#pragma unroll
  for (int i = 0; i < kHeadsR; ++i) {
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
#pragma unroll
      for (int c = 0; c < 4; ++c) acc[i][k][c] = 0.0f;
    m_run[i] = -INFINITY;
    l_run[i] = 0.0f;
  }
  if (a.rope_dim > 0 || kBf16) {
    __syncthreads();
    // A pair (d, d + 1), d even (dim and rope_dim even): rotated where d >= rope0, then rounded.
    for (int idx = tid; idx < kHeadsR * kMaxPairs; idx += kThreads) {
      const int i = idx / kMaxPairs, d = 2 * (idx % kMaxPairs);
      float* qp = qs + i * int(kAttnMaxDim) + d;
      float pr[2] = {qp[0], qp[1]};
      if (a.rope_dim > 0 && d >= rope0 && d < dim) rope_pair(pr, rcos[(d - rope0) / 2], rsin[(d - rope0) / 2]);
      if (kBf16) pr[0] = bf16r(pr[0]), pr[1] = bf16r(pr[1]);
      qp[0] = pr[0], qp[1] = pr[1];
    }
  }
  __syncthreads();
  const float lscale = kBf16 ? a.log2_scale : a.scale;

  const int64_t nsteps = (wlen + kRows - 1) / kRows;
  for (int64_t k = 0; k < nsteps; ++k) {
    ring_wait<kAhead - 1>();  // this lane's copies of step k have landed
    const int c = int(wlen - k * kRows < kRows ? wlen - k * kRows : kRows);
    float v[kRows][kChunks][4];
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      const float* row = ring + int((k * kRows + r) % kRing) * int(kAttnMaxDim);
#pragma unroll
      for (int kk = 0; kk < kChunks; ++kk) {
        const int d = 128 * kk + 4 * lane;
        if (r < c && d < dim) {
          const float4 x = *reinterpret_cast<const float4*>(row + d);
          v[r][kk][0] = x.x, v[r][kk][1] = x.y, v[r][kk][2] = x.z, v[r][kk][3] = x.w;
        } else {
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) v[r][kk][cc] = 0.0f;
        }
      }
    }
    if (kBf16) {
#pragma unroll
      for (int r = 0; r < kRows; ++r)
#pragma unroll
        for (int kk = 0; kk < kChunks; ++kk)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) v[r][kk][cc] = bf16r(v[r][kk][cc]);
    }

    // Dots: slot 4 i + r = head i . row r (head 4: part5[r]); after the reduces lane l holds
    // slot l % 16 (lanes 0-15: heads 0-3) and head 4's row l & 3 (lanes 16-31).
    float part[16], part5[4];
#pragma unroll
    for (int x = 0; x < 16; ++x) part[x] = 0.0f;
#pragma unroll
    for (int x = 0; x < 4; ++x) part5[x] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kChunks; ++kk)
#pragma unroll
      for (int i = 0; i < kHeadsR; ++i) {
        const float4 qv = *reinterpret_cast<const float4*>(qs + i * int(kAttnMaxDim) + 128 * kk + 4 * lane);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float& p = i < 4 ? part[4 * i + r] : part5[r];  // i is a constant here
          p = __fmaf_rn(qv.x, v[r][kk][0], p);
          p = __fmaf_rn(qv.y, v[r][kk][1], p);
          p = __fmaf_rn(qv.z, v[r][kk][2], p);
          p = __fmaf_rn(qv.w, v[r][kk][3], p);
        }
      }
    float dot = reduce_scatter16(part, lane);
    if (kHeadsR == 5) {
      const float d5 = __shfl_sync(0xffffffffu, reduce_fifth(part5, lane), 4 * (lane & 3));
      dot = lane < 16 ? dot : d5;
    }
    // Lanes 4 i + r: head i, row r (i < 4); lanes 16-31 head 4 (4 heads: a copy of 0-15).
    const int my_h = lane < 16 ? lane >> 2 : (kHeadsR == 5 ? 4 : (lane & 15) >> 2), my_r = lane & 3;
    const float x = my_r < c ? __fmul_rn(dot, lscale) : -INFINITY;

    // Online softmax per head over the step's rows (lanes 4 i .. 4 i + 3 hold head i).
    float gm = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
    gm = fmaxf(gm, __shfl_xor_sync(0xffffffffu, gm, 2));
    float mh = 0.0f;  // this lane's head's running max
#pragma unroll
    for (int i = 0; i < kHeadsR; ++i) mh = my_h == i ? m_run[i] : mh;
    const float m_new = fmaxf(mh, kBf16 ? ceilf(gm) : gm);
    const float p = my_r < c ? (kBf16 ? exp2f(__fsub_rn(x, m_new)) : expf(__fsub_rn(x, m_new))) : 0.0f;
    float rs = __fadd_rn(p, __shfl_xor_sync(0xffffffffu, p, 1));
    rs = __fadd_rn(rs, __shfl_xor_sync(0xffffffffu, rs, 2));
    const float corr = rescale<kBf16>(mh, m_new);
    const float pv = kBf16 ? bf16r(p) : p;
    float ci[kHeadsR];
    bool same = true;  // every head's corr is 1: acc * corr = acc
#pragma unroll
    for (int i = 0; i < kHeadsR; ++i) {
      ci[i] = __shfl_sync(0xffffffffu, corr, 4 * i);
      m_run[i] = __shfl_sync(0xffffffffu, m_new, 4 * i);
      l_run[i] = __fmaf_rn(l_run[i], ci[i], __shfl_sync(0xffffffffu, rs, 4 * i));
      same = same && ci[i] == 1.0f;
    }
    if (k > 0 && !same) {  // step 0: acc = +0 and corr = 0 (rescale of -inf), so acc * corr = acc
#pragma unroll
      for (int i = 0; i < kHeadsR; ++i)
#pragma unroll
        for (int kk = 0; kk < kChunks; ++kk)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) acc[i][kk][cc] = __fmul_rn(acc[i][kk][cc], ci[i]);
    }
    // acc += p v, rows in order (a row past c has p = 0 and zero values).
#pragma unroll
    for (int r = 0; r < kRows; ++r)
#pragma unroll
      for (int i = 0; i < kHeadsR; ++i) {
        const float pr = __shfl_sync(0xffffffffu, pv, 4 * i + r);
#pragma unroll
        for (int kk = 0; kk < kChunks; ++kk)
#pragma unroll
          for (int cc = 0; cc < 4; ++cc) acc[i][kk][cc] = __fmaf_rn(pr, v[r][kk][cc], acc[i][kk][cc]);
      }
    issue_step(k + kAhead);  // into this step's slots, which it no longer reads
  }
  ring_wait<0>();
  __syncthreads();  // every warp is done with its ring: the merge buffers reuse them

  // The warps' partials, merged in warp order into the block's.
#pragma unroll
  for (int i = 0; i < kHeadsR; ++i) {
#pragma unroll
    for (int k = 0; k < kChunks; ++k)
      *reinterpret_cast<float4*>(wacc + (warp * kHeadsR + i) * int(kAttnMaxDim) + 128 * k + 4 * lane) =
          make_float4(acc[i][k][0], acc[i][k][1], acc[i][k][2], acc[i][k][3]);
    if (lane == 0) wm[warp * kHeadsR + i] = m_run[i], wl[warp * kHeadsR + i] = l_run[i];
  }
  __syncthreads();
  if (warp < (kHeadsR + 3) / 4) {  // warp hw, lane 4 w + j: warp w's weight for head i = 4 hw + j;
    const int j = lane & 3, i = 4 * warp + j, w = lane >> 2;  // the common max and sum per head
    const bool hv = i < kHeadsR;
    float M = -INFINITY;
#pragma unroll
    for (int ww = 0; ww < kWarps; ++ww) M = hv ? fmaxf(M, wm[ww * kHeadsR + i]) : M;
    const float wt = hv ? rescale<kBf16>(wm[w * kHeadsR + i], M) : 0.0f;
    if (hv) wts[w * kHeadsR + i] = wt;
    float den = 0.0f;
#pragma unroll
    for (int ww = 0; ww < kWarps; ++ww)
      den = __fmaf_rn(hv ? wl[ww * kHeadsR + i] : 0.0f, __shfl_sync(0xffffffffu, wt, 4 * ww + j), den);
    if (lane < 4 && hv) pm[i] = M, pl[i] = den;
  }
  __syncthreads();
  for (int idx = tid; idx < kHeadsR * int(kAttnMaxDim) / 4; idx += kThreads) {
    const int i = idx / (int(kAttnMaxDim) / 4), d = 4 * (idx % (int(kAttnMaxDim) / 4));
    float4 num = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = wts[w * kHeadsR + i];
      const float4 x = *reinterpret_cast<const float4*>(wacc + (w * kHeadsR + i) * int(kAttnMaxDim) + d);
      num.x = __fmaf_rn(x.x, wt, num.x);
      num.y = __fmaf_rn(x.y, wt, num.y);
      num.z = __fmaf_rn(x.z, wt, num.z);
      num.w = __fmaf_rn(x.w, wt, num.w);
    }
    *reinterpret_cast<float4*>(bacc + i * int(kAttnMaxDim) + d) = num;
  }
  cluster.sync();

  // The slices' weights with the sink, once per (slice, head): lane 4 r + i.
  if (warp < (kHeadsR + 3) / 4) {  // warp hw, lane 4 r + j: head i = 4 hw + j
    const int j = lane & 3, i = 4 * warp + j, r = lane >> 2;
    const bool hv = i < kHeadsR;
    const int64_t h = int64_t(g) * kHeadsR + i;
    const float sk = hv && h < a.heads ? a.sink[h] : 0.0f;
    const float ys = kBf16 ? __fmul_rn(sk, kAttnLog2eDev) : sk;
    const float msr = hv ? *cluster.map_shared_rank(pm + i, r) : -INFINITY;
    const float plr = hv ? *cluster.map_shared_rank(pl + i, r) : 0.0f;
    float mx = msr;  // the max over the 8 slices (lanes i, i + 4, ..): exact in any order
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 8));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 16));
    const float M = fmaxf(kBf16 ? ceilf(ys) : ys, mx);
    const float wt = rescale<kBf16>(msr, M);
    if (hv) cwt[r * kHeadsR + i] = wt;
    float den = kBf16 ? exp2f(__fsub_rn(ys, M)) : expf(__fsub_rn(ys, M));
#pragma unroll
    for (int rr = 0; rr < kAttnSplits; ++rr)
      den = __fmaf_rn(__shfl_sync(0xffffffffu, plr, 4 * rr + j), __shfl_sync(0xffffffffu, wt, 4 * rr + j), den);
    if (lane < 4 && hv) cden[i] = den;
  }
  __syncthreads();

  // Block s writes channels [s * kSlice, (s + 1) * kSlice) of the 4 heads, a thread per
  // channel pair (the output's inverse RoPE needs both values of its pair).
  constexpr int kPairs = kSlice / 2;
  for (int idx = tid; idx < kHeadsR * kPairs; idx += kThreads) {
    const int i = idx / kPairs, d = s * kSlice + 2 * (idx % kPairs);
    const int64_t h = int64_t(g) * kHeadsR + i;
    if (h >= a.heads || d >= dim) continue;
    float num0 = 0.0f, num1 = 0.0f;
#pragma unroll
    for (int r = 0; r < kAttnSplits; ++r) {
      const float wt = cwt[r * kHeadsR + i];
      const float2 x = *reinterpret_cast<const float2*>(cluster.map_shared_rank(bacc + i * int(kAttnMaxDim) + d, r));
      num0 = __fmaf_rn(x.x, wt, num0);
      num1 = __fmaf_rn(x.y, wt, num1);  // d + 1 <= 511: inside the row (zero past dim)
    }
    const float den = cden[i];
    float o[2] = {__fdiv_rn(num0, den), __fdiv_rn(num1, den)};
    if (a.rope_dim > 0 && d >= rope0) {  // d - rope0 even: a whole pair; the inverse = sin negated
      const int pidx = (d - rope0) / 2;
      rope_pair(o, rcos[pidx], -rsin[pidx]);
    }
    float* dst = a.out + (t * a.heads + h) * a.dim + d;
    dst[0] = o[0];
    if (d + 1 < dim) dst[1] = o[1];
  }
  cluster.sync();  // peers may still be reading this block's partial
}

template <bool kBf16>
cudaError_t launch_one(const SinkAttentionArgs& a, cudaStream_t stream) {
  auto* kernel = small_attention_kernel<kBf16>;
  const size_t smem = kSmemFloatsRing * sizeof(float);
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
  if (attr != cudaSuccess) return attr;
  const bool vec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.kv) % 16 == 0;
  const bool qvec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.q) % 16 == 0;
  const int64_t groups = (a.heads + kHeadsR - 1) / kHeadsR;
  const int64_t per_launch = std::max<int64_t>(1, INT_MAX / (groups * kAttnSplits));
  for (int64_t t0 = 0; t0 < a.n; t0 += per_launch) {
    SinkAttentionArgs c = a;
    c.n = std::min(per_launch, a.n - t0);
    c.q += t0 * a.heads * a.dim;
    c.out += t0 * a.heads * a.dim;
    c.offsets += t0;
    if (c.positions) c.positions += t0;
    kernel<<<dim3(unsigned(c.n * groups * kAttnSplits)), kThreads, smem, stream>>>(c, int(groups), vec, qvec);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream) {
  return a.bf16 ? launch_one<true>(a, stream) : launch_one<false>(a, stream);
}

// cudaOccupancyMaxActiveClusters of a kernel at its launch shape (the benchmark prints it:
// a cluster of 8 blocks of one SM each must fit in one GPC).
template <class K>
int max_clusters(K* kernel, size_t smem) {
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)) != cudaSuccess) return -1;
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = kAttnSplits, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  cfg.gridDim = dim3(kAttnSplits * 64), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = smem;
  cfg.attrs = attr, cfg.numAttrs = 1;
  int n = -1;
  return cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) == cudaSuccess ? n : -1;
}

}  // namespace small

// The bf16 mode on Hopper's warpgroup MMA, for shapes where many queries share few kv
// rows (a prefill chunk: 8192 queries x ~640 entries over ~12K pool rows). The kv rows
// are first rounded to bf16 once into a scratch copy (rows padded to 512 channels with
// zeros), so the gather moves 1 KB per entry instead of 2 KB of fp32, straight into the
// tile the MMAs read: no fp32 staging buffer and no rounding pass per block.
//
// Why (bench/flash/NOTES.md §10 and §15): the mma.sync kernel spends ~12K clocks per
// 32-entry tile for ~1000 clocks of tensor work: 2 warps per scheduler at 240 registers
// wait out every dependent QK k-step, the rounding pass and the id loads run with no
// MMA in flight, and one cp.async stage ahead leaves the L2 latency exposed.
//
// Block: one query, 64 heads, 2 warpgroups; warpgroup d owns channels 256 d .. + 255 in
// both products and warp w of it the heads 16 w .. + 15 (the mma.sync kernel's warps
// w and w + 4, so the same softmax code and the same partner exchange run unchanged).
// Per tile of 32 entries, through a kStages-deep cp.async ring of bf16 tiles in the
// 128-byte-swizzled layout (64-channel slabs of 32 rows x 128 bytes):
//   QK: S = Q K^T over the warpgroup's 256 channels as two chains of 8 m64n32k16 (A = q
//       from shared memory, K-major; B = the tile, K-major), from zero, summed in fp32;
//   the partner exchange and the online softmax (base 2, integer max) as before;
//   PV: O[64 x 256] += P V as 2 k-steps x 2 m64n128k16 (A = P from registers, the
//       mma.sync A fragment; B = the same tile read N-major: 8-entry groups 1024 bytes
//       apart (SBO), 64-channel slabs 4096 bytes apart (LBO)).
// The same products, chains and summation order as mqa_attention_tc_kernel, so the two
// kernels give the same bits when the k16 step of wgmma rounds as mma.sync's (op case
// sink_attention_bf16_wgmma_vs_mma checks it).
namespace wg {

constexpr int kHeads = 64, kTileE = 32, kWarps = 8, kThreads = kWarps * 32;
constexpr int kDim = int(kAttnMaxDim);          // channels of a bf16 row (zeros past dim)
constexpr int kPieces = kDim / 8;               // 16-byte pieces per bf16 row
constexpr int kStages = 4;                      // tiles in the ring (3 loading while one computes)
constexpr int kQSlab = kHeads * 128;            // bytes of a 64-channel slab of q
constexpr int kTSlab = kTileE * 128;            // bytes of a 64-channel slab of a tile
constexpr int kQBytes = kHeads * kDim * 2;      // 64 KB
constexpr int kTBytes = kTileE * kDim * 2;      // 32 KB
constexpr int kXBytes = kWarps * 16 * kTileE * 4;  // partial logits per warp, 16 KB
// + alignment slack; kOverlap keeps two exchange buffers.
constexpr size_t smem_bytes(bool overlap) {
  return 1024 + size_t(kQBytes) + size_t(kStages) * kTBytes + size_t(overlap ? 2 : 1) * kXBytes;
}
static_assert(kQSlab % 1024 == 0 && kTSlab % 1024 == 0, "swizzle atoms must stay 1024-byte aligned");
constexpr int64_t kMaxRows = (int64_t(1) << 40) / kDim;  // keeps row * kPieces far from overflow
static_assert(kThreads % (kDim / 4) == 0 && (kHeads * (kDim / 4)) % (2 * kThreads) == 0, "q staging split");

// Byte offset of 16-byte granule `gran` (0..7) of row `row` inside a 128-byte-swizzled slab.
__device__ __forceinline__ uint32_t swz(int row, int gran) { return uint32_t(row * 128 + ((gran ^ (row & 7)) << 4)); }

__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}

// N-major (MN-major) B operand in the 128-byte swizzle: rows of 64 N-elements (128 bytes),
// consecutive 8-row K groups sbo bytes apart, consecutive 64-element N slabs lbo apart.
__device__ __forceinline__ uint64_t desc_mn_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return (uint64_t(1) << 62) | (uint64_t(sbo >> 4) << 32) | (uint64_t(lbo >> 4) << 16) | uint64_t((addr >> 4) & 0x3fff);
}

// d (+)= A B, m64n32k16, A and B from shared memory (both K-major).
__device__ __forceinline__ void mma_ss_n32(float (&d)[16], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {"
      DI_WGMMA_R16
      "}, %16, %17, p, 1, 1, 0, 0;\n}\n"
      : DI_WGMMA_ACC16("+f")
      : "l"(da), "l"(db), "r"(scale_d));
#else
  __trap();  // the launcher runs this kernel on compute capability 9.0 only
#endif
}

// d += A B, m64n128k16, A from registers (the mma.sync A fragment of the warp's 16 rows),
// B from shared memory N-major (imm-trans-b = 1).
__device__ __forceinline__ void mma_rs_n128_t(float (&d)[64], const uint32_t (&a)[4], uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      DI_WGMMA_R64
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : DI_WGMMA_ACC64("+f")
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
#else
  __trap();
#endif
}

// kv [rows, dim] fp32 -> [rows, 512] bf16 (round to nearest even, as the CPU oracle's
// round_to_bf16), zeros past dim: one 16-byte piece (8 channels) per thread and step.
__global__ void kv_to_bf16_kernel(const float* __restrict__ kv, int64_t rows, int dim, bool vec, uint4* __restrict__ out) {
  const int64_t total = rows * kPieces;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / kPieces;
    const int c0 = int(i % kPieces) * 8;
    const float* src = kv + r * dim + c0;
    float v[8];
    if (vec && c0 + 8 <= dim) {
      const float4 x = __ldg(reinterpret_cast<const float4*>(src)), y = __ldg(reinterpret_cast<const float4*>(src + 4));
      v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w, v[4] = y.x, v[5] = y.y, v[6] = y.z, v[7] = y.w;
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) v[k] = c0 + k < dim ? src[k] : 0.0f;
    }
    out[i] = make_uint4(mma::pack_bf16(v[0], v[1]), mma::pack_bf16(v[2], v[3]), mma::pack_bf16(v[4], v[5]),
                        mma::pack_bf16(v[6], v[7]));
  }
}

template <bool kOverlap>
__global__ void __launch_bounds__(kThreads, 1)
    mqa_attention_wg_kernel(SinkAttentionArgs a, const uint4* __restrict__ kvb, bool qvec) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = mma::smem_addr(smem_raw);
  uint8_t* qs = smem_raw + ((1024u - (raw & 1023u)) & 1023u);  // swizzle atoms need 1024-byte alignment
  uint8_t* ts = qs + kQBytes;
  float* sx = reinterpret_cast<float*>(ts + size_t(kStages) * kTBytes);
  const uint32_t qs_a = mma::smem_addr(qs), ts_a = mma::smem_addr(ts);

  const int64_t t = blockIdx.x;
  const int64_t h0 = int64_t(blockIdx.y) * kHeads;
  const int tid = int(threadIdx.x), warp = tid >> 5, lane = tid & 31;
  const int hg = warp & 3, dh = warp >> 2;  // head group (16 heads), channel half = warpgroup
  const int g = lane >> 2, qd = lane & 3;
  const int dim = int(a.dim);
  const int64_t b = a.offsets[t], e = a.offsets[t + 1];
  const int64_t cnt = e - b;

  if (cnt <= 0) {  // sink only: no value, so the output is zero (as the CPU op)
    tc::zero_heads(a, t, h0, kHeads, dim, tid, kThreads);
    return;
  }
  const int ntiles = int((cnt + kTileE - 1) / kTileE);

  // Loader role: thread tid copies row tid / 8 of a tile, granule tid % 8 of each of the
  // 8 slabs (8 threads read a row's 128 contiguous bytes per slab). Rows past the list
  // (and ids outside the copy) are zero rows: no NaN from stale data under p = 0.
  const int lr = tid >> 3, lg = tid & 7;
  const uint32_t ldst = swz(lr, lg);
  auto row_id = [&](int it) -> int64_t {
    const int64_t j = b + int64_t(it) * kTileE + lr;
    if (it >= ntiles || j >= e) return -1;
    const int64_t id = a.ids[j];
    return id >= 0 && id < a.kv_rows ? id : -1;
  };
  auto issue = [&](int it, int64_t id) {
    const uint32_t dst = ts_a + uint32_t((it % kStages) * kTBytes) + ldst;
    if (id >= 0) {
      const uint4* src = kvb + id * kPieces + lg;
#pragma unroll
      for (int i = 0; i < kDim / 64; ++i) cp_async16(dst + uint32_t(i * kTSlab), src + 8 * i);
    } else {
      uint8_t* p = ts + size_t((it % kStages) * kTBytes) + ldst;
#pragma unroll
      for (int i = 0; i < kDim / 64; ++i) *reinterpret_cast<uint4*>(p + i * kTSlab) = make_uint4(0, 0, 0, 0);
    }
  };
  // Every step commits one group (empty past the list), so "tile it landed" is always
  // "at most kStages - 2 groups pending".
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < ntiles) issue(s, row_id(s));
    cp_async_commit();
  }
  int64_t next_id = row_id(kStages - 1);  // loaded one step before its copy is issued

  // q of the block's heads, rounded to bf16, in the swizzled K-major layout (slab = 64
  // channels); zeros past dim and past the last head. At dim = 512 with aligned rows a
  // thread's 32 float4 loads go out in two batches of 16 before any store: the general
  // loop below branches per element, so its loads went out one at a time, 32 dependent
  // trips to HBM per thread at the block's start (NOTES 15; one block per SM, nothing
  // else to run meanwhile). Same values, same stores.
  constexpr int kQPer = kHeads * (kDim / 4) / kThreads;  // float4 pieces of q per thread
  const bool q_fast = qvec && dim == kDim;
  if (q_fast) {
    const int col = 4 * (tid % (kDim / 4));  // fixed per thread: kThreads is a multiple of kDim / 4
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float4 x[kQPer / 2];
#pragma unroll
      for (int u = 0; u < kQPer / 2; ++u) {
        const int r = (tid + (half * (kQPer / 2) + u) * kThreads) / (kDim / 4);
        const int64_t h = h0 + r;
        x[u] = h < a.heads ? __ldg(reinterpret_cast<const float4*>(a.q + (t * a.heads + h) * a.dim + col))
                           : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
#pragma unroll
      for (int u = 0; u < kQPer / 2; ++u) {
        const int r = (tid + (half * (kQPer / 2) + u) * kThreads) / (kDim / 4);
        *reinterpret_cast<uint2*>(qs + (col / 64) * kQSlab + swz(r, (col % 64) / 8) + (col % 8) * 2) =
            make_uint2(mma::pack_bf16(x[u].x, x[u].y), mma::pack_bf16(x[u].z, x[u].w));
      }
    }
  }
  for (int i = q_fast ? kHeads * (kDim / 4) : tid; i < kHeads * (kDim / 4); i += kThreads) {
    const int r = i / (kDim / 4), col = 4 * (i % (kDim / 4));
    const int64_t h = h0 + r;
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (h < a.heads) {
      const float* src = a.q + (t * a.heads + h) * a.dim + col;
      if (qvec && col + 4 <= dim) {
        const float4 x = *reinterpret_cast<const float4*>(src);
        v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
      } else {
#pragma unroll
        for (int k = 0; k < 4; ++k)
          if (col + k < dim) v[k] = src[k];
      }
    }
    *reinterpret_cast<uint2*>(qs + (col / 64) * kQSlab + swz(r, (col % 64) / 8) + (col % 8) * 2) =
        make_uint2(mma::pack_bf16(v[0], v[1]), mma::pack_bf16(v[2], v[3]));
  }

  float ys[2], m_run[2], l_run[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t h = h0 + hg * 16 + g + 8 * i;
    ys[i] = h < a.heads ? __fmul_rn(a.sink[h], kAttnLog2eDev) : 0.0f;
    m_run[i] = ceilf(ys[i]);
  }
  // o[half][4 j + k] = the mma.sync kernel's o[16 half + j][k]: columns c0 + 128 half + 8 j + 2 qd + k % 2.
  float o[2][64];
#pragma unroll
  for (int hf = 0; hf < 2; ++hf)
#pragma unroll
    for (int k = 0; k < 64; ++k) o[hf][k] = 0.0f;
  const int c0 = dh * (kDim / 2);

  // QK of tile `it` into d0 / d1: the partial logits over the warpgroup's 256 channels as
  // two chains of 8 k16 steps (committed, not waited).
  float d0[16], d1[16];
#define DI_WG_QK_ISSUE(it_)                                                                              \
  do {                                                                                                   \
    const uint32_t tile_ = ts_a + uint32_t(((it_) % kStages) * kTBytes);                                 \
    _Pragma("unroll") for (int k = 0; k < 16; ++k) d0[k] = 0.0f, d1[k] = 0.0f;                           \
    wgmma::fence();                                                                                      \
    _Pragma("unroll") for (int kk = 0; kk < 8; ++kk) {                                                   \
      const int k0 = c0 + kk * 16;                                                                       \
      const uint32_t off = uint32_t(((k0 % 64) / 16) * 32);                                              \
      mma_ss_n32(d0, wgmma::desc_k_sw128(qs_a + uint32_t((k0 / 64) * kQSlab) + off),                     \
                 wgmma::desc_k_sw128(tile_ + uint32_t((k0 / 64) * kTSlab) + off), kk);                    \
    }                                                                                                    \
    _Pragma("unroll") for (int kk = 0; kk < 8; ++kk) {                                                   \
      const int k0 = c0 + 128 + kk * 16;                                                                 \
      const uint32_t off = uint32_t(((k0 % 64) / 16) * 32);                                              \
      mma_ss_n32(d1, wgmma::desc_k_sw128(qs_a + uint32_t((k0 / 64) * kQSlab) + off),                     \
                 wgmma::desc_k_sw128(tile_ + uint32_t((k0 / 64) * kTSlab) + off), kk);                    \
    }                                                                                                    \
    wgmma::commit();                                                                                     \
  } while (0)

  float s[4][4];
  if constexpr (kOverlap) {  // tile 0's QK before the loop; the loop issues tile it + 1's
    cp_async_wait<kStages - 2>();
    wgmma::fence_proxy_async();
    __syncthreads();
    DI_WG_QK_ISSUE(0);
    wgmma::wait<0>();
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int k = 0; k < 4; ++k) s[nt][k] = __fadd_rn(d0[4 * nt + k], d1[4 * nt + k]);
  }

  for (int it = 0; it < ntiles; ++it) {
    const int64_t j0 = b + int64_t(it) * kTileE;
    const int c = int(e - j0 < kTileE ? e - j0 : kTileE);
    const uint32_t tile = ts_a + uint32_t((it % kStages) * kTBytes);
    if constexpr (!kOverlap) {
      cp_async_wait<kStages - 2>();
      wgmma::fence_proxy_async();  // this thread's copies and zero rows, visible to the wgmma reads
      __syncthreads();             // every thread's rows are in; every warpgroup is done with tile it - 1
      DI_WG_QK_ISSUE(it);
      // While the QK chains run: the copy of tile it + kStages - 1 into the stage of tile
      // it - 1 (free since the barrier), and the id of the tile after it.
      if (it + kStages - 1 < ntiles) issue(it + kStages - 1, next_id);
      cp_async_commit();
      next_id = row_id(it + kStages);
      wgmma::wait<0>();
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int k = 0; k < 4; ++k) s[nt][k] = __fadd_rn(d0[4 * nt + k], d1[4 * nt + k]);
    } else if (it + 1 < ntiles) {
      // Tile it + 1 is in (one step earlier than above, so one fewer copy in flight), and
      // every warpgroup is done with PV(it - 1): its QK goes to the tensor cores now and
      // runs under this tile's exchange and softmax; the copy refills tile it - 1's stage.
      cp_async_wait<kStages - 3>();
      wgmma::fence_proxy_async();
      __syncthreads();
      DI_WG_QK_ISSUE(it + 1);
      if (it + kStages - 1 < ntiles) issue(it + kStages - 1, next_id);
      cp_async_commit();
      next_id = row_id(it + kStages);
    }

    // 2. Exchange with the partner warp (same heads, other channels), as the mma.sync
    //    kernel. kOverlap alternates two buffers: no block barrier separates a tile's
    //    exchange from the next one's there, but the pair barrier of the tile between does.
    float* xb = sx + (kOverlap ? (it & 1) * (kWarps * 16 * kTileE) : 0);
    float corr[2];
    uint32_t pa[2][4];
    tc::exchange_softmax(s, xb + warp * (16 * kTileE), xb + (warp ^ 4) * (16 * kTileE), hg, lane, qd, c, a.log2_scale,
                         m_run, l_run, corr, pa);
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        o[hf][4 * j + 0] = __fmul_rn(o[hf][4 * j + 0], corr[0]);
        o[hf][4 * j + 1] = __fmul_rn(o[hf][4 * j + 1], corr[0]);
        o[hf][4 * j + 2] = __fmul_rn(o[hf][4 * j + 2], corr[1]);
        o[hf][4 * j + 3] = __fmul_rn(o[hf][4 * j + 3], corr[1]);
      }

    // 4. O += P V: k-steps of 16 entries (two 8-row groups, 1024 bytes apart), 128 channels
    //    (two slabs, kTSlab apart) per MMA.
    wgmma::fence();
#pragma unroll
    for (int kk = 0; kk < 2; ++kk)
#pragma unroll
      for (int hf = 0; hf < 2; ++hf)
        mma_rs_n128_t(o[hf], pa[kk],
                      desc_mn_sw128(tile + uint32_t(kk * 2048 + ((c0 + 128 * hf) / 64) * kTSlab), kTSlab, 1024));
    wgmma::commit();
    wgmma::wait<0>();  // PV(it), and under kOverlap QK(it + 1)
    if constexpr (kOverlap) {
      if (it + 1 < ntiles) {
#pragma unroll
        for (int nt = 0; nt < 4; ++nt)
#pragma unroll
          for (int k = 0; k < 4; ++k) s[nt][k] = __fadd_rn(d0[4 * nt + k], d1[4 * nt + k]);
      }
    }
  }
#undef DI_WG_QK_ISSUE
  cp_async_wait<0>();  // no copy may land after the block has left

  float den[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) den[i] = __fadd_rn(l_run[i], exp2f(__fsub_rn(ys[i], m_run[i])));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int64_t h = h0 + hg * 16 + g + 8 * i;
    if (h >= a.heads) continue;
    float* dst = a.out + (t * a.heads + h) * a.dim;
#pragma unroll
    for (int hf = 0; hf < 2; ++hf)
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const int d = c0 + 128 * hf + 8 * j + 2 * qd;
        tc::store_pair(dst, d, dim, __fdiv_rn(o[hf][4 * j + 2 * i], den[i]),
                       __fdiv_rn(o[hf][4 * j + 2 * i + 1], den[i]));
      }
  }
}

// Compute capability 9.0 exactly: the kernel is sm_90a code (wgmma).
bool device_ok() {
  static const bool ok = [] {
    int dev = 0, major = 0, minor = 0;
    if (cudaGetDevice(&dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) return false;
    return major == 9 && minor == 0;
  }();
  return ok;
}

template <bool kOverlap>
cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream) {
  constexpr size_t kSmemBytes = smem_bytes(kOverlap);
  static const cudaError_t attr = cudaFuncSetAttribute(mqa_attention_wg_kernel<kOverlap>,
                                                       cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes));
  if (attr != cudaSuccess) return attr;
  const int64_t groups = (a.heads + kHeads - 1) / kHeads;
  if (groups > 65535 || a.kv_rows <= 0 || a.kv_rows > kMaxRows) return cudaErrorInvalidValue;
  uint4* kvb = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&kvb), size_t(a.kv_rows) * kPieces * sizeof(uint4), stream);
  if (err != cudaSuccess) return err;
  const bool vec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.kv) % 16 == 0;
  const bool qvec = a.dim % 4 == 0 && reinterpret_cast<uintptr_t>(a.q) % 16 == 0;
  const int64_t pieces = a.kv_rows * kPieces;
  const unsigned cblocks = unsigned(std::min<int64_t>((pieces + 255) / 256, 132 * 16));
  kv_to_bf16_kernel<<<cblocks, 256, 0, stream>>>(a.kv, a.kv_rows, int(a.dim), vec, kvb);
  err = cudaGetLastError();
  for (int64_t t0 = 0; err == cudaSuccess && t0 < a.n; t0 += INT_MAX) {
    SinkAttentionArgs c = a;
    c.n = std::min<int64_t>(INT_MAX, a.n - t0);
    c.q += t0 * a.heads * a.dim;
    c.out += t0 * a.heads * a.dim;
    c.offsets += t0;
    mqa_attention_wg_kernel<kOverlap><<<dim3(unsigned(c.n), unsigned(groups)), kThreads, kSmemBytes, stream>>>(c, kvb, qvec);
    err = cudaGetLastError();
  }
  const cudaError_t ferr = cudaFreeAsync(kvb, stream);
  return err != cudaSuccess ? err : ferr;
}

}  // namespace wg

std::atomic<int> g_bf16_path{int(AttnBf16Path::kAuto)};
std::atomic<bool> g_small_former{false};

}  // namespace

void sink_attention_set_bf16_path(AttnBf16Path p) { g_bf16_path.store(int(p)); }
AttnBf16Path sink_attention_bf16_path() { return AttnBf16Path(g_bf16_path.load()); }
void sink_attention_set_small_former(bool former) { g_small_former.store(former); }

int attention_small_heads_per_block(bool former) { return former ? small::kHeads : small::kHeadsR; }

int attention_small_max_clusters(bool bf16, bool former) {
  if (former)
    return bf16 ? small::max_clusters(small::former_attention_kernel<true>, small::kSmemFloats * sizeof(float))
                : small::max_clusters(small::former_attention_kernel<false>, small::kSmemFloats * sizeof(float));
  return bf16 ? small::max_clusters(small::small_attention_kernel<true>, small::kSmemFloatsRing * sizeof(float))
              : small::max_clusters(small::small_attention_kernel<false>, small::kSmemFloatsRing * sizeof(float));
}

cudaError_t sink_attention(const SinkAttentionArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.heads <= 0 || a.dim <= 0 || a.dim > kAttnMaxDim || a.heads > INT_MAX) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.q || !a.kv || !a.offsets || !a.ids || !a.sink || !a.out) return cudaErrorInvalidValue;
  if (a.path < 0 || a.path > 3 || a.kv_rows < 0) return cudaErrorInvalidValue;
  const bool small_kernel = a.path >= 2 || (a.path == 1 && a.n <= attention_small_max_n(a.bf16));
  if (a.rope_dim != 0) {  // RoPE folded in: the small-batch kernel only
    if (!small_kernel || a.rope_dim < 0 || a.rope_dim % 2 != 0 || a.rope_dim > a.dim || a.dim % 2 != 0 ||
        !a.positions || !a.inv_freq)
      return cudaErrorInvalidValue;
  }
  if (a.path == 3 || (small_kernel && g_small_former.load())) return small::launch_former(a, stream);
  if (small_kernel) return small::launch(a, stream);
  if (a.bf16) {
    // One order for every n (batch-invariant): the mma.sync kernel, or the wgmma kernel
    // where the bf16 copy of kv pays for itself: every kv row gathered by ~4+ queries on
    // average (kv_rows <= 32 n at >= 128 entries per query; a prefill chunk: 12K rows for
    // 8192 queries). At decode every query has its own rows (batch 256: 164K rows), and
    // the copy would add a read and a write of each. The two kernels compute the same
    // chains in the same order (see namespace wg), so the choice changes no bit.
    const AttnBf16Path path = sink_attention_bf16_path();
    const bool wg_ok = a.kv_rows > 0 && wg::device_ok();
    if (wg_ok && path == AttnBf16Path::kWgmmaOverlap) return wg::launch<true>(a, stream);
    if (wg_ok && (path == AttnBf16Path::kWgmma || (path == AttnBf16Path::kAuto && a.kv_rows <= 32 * a.n)))
      return wg::launch<false>(a, stream);
    return tc::launch(a, stream);
  }
  // Two shapes of block, the same arithmetic per head (so the choice, made from the
  // batch, cannot change a result): 4 heads on 2 warps gives a single query 16
  // blocks per slice at 64 heads, enough to spread one token over the GPU; 32 heads
  // on 8 warps reads each staged row once per 4 heads per warp instead of 2 and
  // wins once the grid has several waves. Cost model: a 32-head block takes ~4x a
  // 4-head one (8x the heads at ~2x the FMA rate), one block per SM in both.
  int dev = 0, sms = 132;
  if (cudaGetDevice(&dev) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  sms = std::max(sms, 1);
  const int64_t small_blocks = a.n * ((a.heads + 3) / 4) * kAttnSplits;
  const int64_t large_blocks = a.n * ((a.heads + 31) / 32) * kAttnSplits;
  const int64_t small_waves = (small_blocks + sms - 1) / sms, large_waves = (large_blocks + sms - 1) / sms;
  if (small_waves < 4 * large_waves) return launch<2, 2>(a, stream);
  return launch<4, 8>(a, stream);
}

}  // namespace deepinfer::kernels
