// Sink attention, the f32 mode's batch-invariant kernel (SinkAttentionArgs::path 0, and
// path 1 above attention_small_max_n): SIMT flash-decoding over clusters of kAttnSplits
// blocks (smxx_attention.cuh has the design).
#include <cooperative_groups.h>

#include <algorithm>
#include <climits>

#include "kernels/cuda/smxx_attention_common.cuh"

namespace deepinfer::kernels::attn::simt {
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
cudaError_t launch_shape(const SinkAttentionArgs& a, cudaStream_t stream) {
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

}  // namespace

cudaError_t launch(const SinkAttentionArgs& a, cudaStream_t stream) {
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
  if (small_waves < 4 * large_waves) return launch_shape<2, 2>(a, stream);
  return launch_shape<4, 8>(a, stream);
}

}  // namespace deepinfer::kernels::attn::simt
