#include <cuda_bf16.h>

#include <algorithm>
#include <atomic>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_device.h"
#include "kernels/cuda/smxx_indexer.cuh"
#include "kernels/cuda/smxx_linear_mma.cuh"
#include "kernels/cuda/smxx_wgmma.cuh"
#include "common/env.h"

namespace deepinfer::kernels {
namespace {

constexpr int kWarps = 8;
constexpr int kKeysPerWarp = 4;  // one staged query row feeds four key dots
constexpr int kKeysPerBlock = 64;

// Grid (key tiles of 64, n). The query's heads sit in shared memory with rows padded
// by one word, so lane h reading q[h][d] hits bank (h + d) % 32: no conflicts; each
// warp stages 4 keys and every lane (one head) dots them against its query row.
__global__ void __launch_bounds__(kWarps * 32) indexer_score_kernel(IndexerScoreArgs a) {
  extern __shared__ float smem[];
  const int hd = int(a.head_dim), heads = int(a.heads), qld = hd + 1;
  float* qs = smem;                               // [heads][hd + 1]
  float* ws = qs + heads * qld;                   // [heads]
  float* ks = ws + heads;                         // [kWarps][kKeysPerWarp][hd]
  const int64_t t = blockIdx.y;
  for (int i = threadIdx.x; i < heads * hd; i += blockDim.x) qs[(i / hd) * qld + i % hd] = a.q[t * heads * hd + i];
  for (int i = threadIdx.x; i < heads; i += blockDim.x) ws[i] = a.w[t * heads + i];
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* kw = ks + warp * kKeysPerWarp * hd;
  for (int64_t s0 = int64_t(blockIdx.x) * kKeysPerBlock + warp * kKeysPerWarp; s0 < a.num_keys &&
                   s0 < int64_t(blockIdx.x + 1) * kKeysPerBlock;
       s0 += kWarps * kKeysPerWarp) {
    __syncwarp();
    for (int i = lane; i < kKeysPerWarp * hd; i += 32) {
      const int64_t s = s0 + i / hd;
      kw[i] = s < a.num_keys ? a.keys[s * hd + i % hd] : 0.0f;
    }
    __syncwarp();
    float total[kKeysPerWarp] = {};
    for (int h = lane; h < heads; h += 32) {
      float dot[kKeysPerWarp] = {};
      const float* qh = qs + h * qld;
      for (int d = 0; d < hd; ++d) {
        const float qv = qh[d];
#pragma unroll
        for (int j = 0; j < kKeysPerWarp; ++j) dot[j] += qv * kw[j * hd + d];
      }
      const float wh = ws[h];
#pragma unroll
      for (int j = 0; j < kKeysPerWarp; ++j) total[j] += fmaxf(dot[j], 0.0f) * a.softmax_scale * wh;
    }
#pragma unroll
    for (int j = 0; j < kKeysPerWarp; ++j) {
      const float sum = warp_sum(total[j]);
      if (lane == 0 && s0 + j < a.num_keys) a.scores[t * a.num_keys + s0 + j] = sum;
    }
  }
}

__global__ void indexer_mask_kernel(IndexerMaskArgs a) {
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.n * a.num_keys) return;
  const int64_t t = idx / a.num_keys, s = idx % a.num_keys;
  const int64_t visible = (a.positions[t] + 1) / a.ratio;
  if (s >= visible || (a.candidates != nullptr && a.candidates[idx] == 0)) a.scores[idx] = -INFINITY;
}

__global__ void block_max_kernel(BlockMaxArgs a) {
  const int64_t nb = (a.num_keys + a.block_size - 1) / a.block_size;
  const int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= a.n * nb) return;
  const int64_t t = idx / nb, b = idx % nb;
  const int64_t visible = (a.positions[t] + 1) / a.ratio;
  float m = -INFINITY;
  const int64_t end = min(a.num_keys, (b + 1) * a.block_size);
  for (int64_t s = b * a.block_size; s < end; ++s) m = fmaxf(m, a.scores[t * a.num_keys + s]);
  if (visible > 0 && b == (visible - 1) / a.block_size) m = INFINITY;
  a.out[idx] = m;
}

// One block per query row: clear the row, then set the kept blocks' ranges.
__global__ void candidate_mask_kernel(CandidateMaskArgs a) {
  const int64_t t = blockIdx.x;
  uint8_t* m = a.mask + t * a.num_keys;
  for (int64_t s = threadIdx.x; s < a.num_keys; s += blockDim.x) m[s] = 0;
  __syncthreads();
  for (int64_t j = 0; j < a.k; ++j) {
    const int64_t b = a.block_ids[t * a.k + j];
    if (b < 0) break;  // ids are packed: padding only at the end
    const int64_t end = min(a.num_keys, (b + 1) * a.block_size);
    for (int64_t s = b * a.block_size + threadIdx.x; s < end; s += blockDim.x) m[s] = 1;
  }
}


// ---- batched, paged ---------------------------------------------------------

constexpr int kPagedKeysPerWarp = 8;  // one float4 of the query feeds 8 key dots
constexpr int kPagedChunk = kWarps * kPagedKeysPerWarp;  // keys per pass of the block

// Grid (key tiles of `tile` keys, rows). As indexer_score_kernel, with the query's
// heads and the staged keys read as float4: per 4 channels a lane issues one 16-byte
// query load and 8 broadcast key loads for 32 FMAs (the scalar kernel: 5 loads per 4
// FMAs, so it is bound by shared-memory issue). Query rows are padded by 4 floats, so
// 8 lanes of a quarter-warp read 8 distinct 4-bank groups. A block stages its query
// once and walks `tile` keys (a multiple of 64) in passes of 64, which amortizes the
// query's 16 KB over up to 512 keys. Each dot still sums over d in order with one FMA
// per channel: the scores are the scalar kernel's bits, whatever the tile.
__global__ void __launch_bounds__(kWarps * 32) indexer_score_paged_kernel(PagedIndexerScoreArgs a, int64_t row0,
                                                                          int64_t tile) {
  const int64_t t = row0 + blockIdx.y;
  const int64_t* info = a.row_info + t * kRowInfoCols;
  const int64_t nk = info[kRowKeys];
  const int64_t tile0 = int64_t(blockIdx.x) * tile;
  if (tile0 >= nk) return;  // whole block: before any barrier
  extern __shared__ float4 smem4[];
  const int heads = int(a.heads), hd4 = int(a.head_dim / 4), qld4 = hd4 + 1;
  float4* qs = smem4;                                       // [heads][hd4 + 1]
  float* ws = reinterpret_cast<float*>(qs + heads * qld4);  // [heads], padded to 4
  float4* ks = qs + heads * qld4 + (heads + 3) / 4;         // [kWarps][8][hd4]
  const float4* q4 = reinterpret_cast<const float4*>(a.q) + t * heads * hd4;
  for (int i = threadIdx.x; i < heads * hd4; i += blockDim.x) qs[(i / hd4) * qld4 + i % hd4] = q4[i];
  for (int i = threadIdx.x; i < heads; i += blockDim.x) ws[i] = a.w[t * heads + i];
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t* table = a.tables + info[kRowTable];
  const int64_t epb = a.entries_per_block;
  float4* kw = ks + warp * kPagedKeysPerWarp * hd4;
  float* out = a.scores + info[kRowScore];
  const int64_t tile_end = min(nk, tile0 + tile);
  // No barrier below: each warp stages and scores its own keys.
  for (int64_t s0 = tile0 + warp * kPagedKeysPerWarp; s0 < tile_end; s0 += kPagedChunk) {
    __syncwarp();  // the previous pass's reads of kw are done
    for (int i = lane; i < kPagedKeysPerWarp * hd4; i += 32) {
      const int64_t s = s0 + i / hd4;
      float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
      if (s < nk) {
        const int64_t row = table[s / epb] * epb + s % epb;
        v = reinterpret_cast<const float4*>(a.keys + row * a.head_dim)[i % hd4];
      }
      kw[i] = v;
    }
    __syncwarp();
    float total[kPagedKeysPerWarp] = {};
    for (int h = lane; h < heads; h += 32) {
      float dot[kPagedKeysPerWarp] = {};
      const float4* qh = qs + h * qld4;
      for (int d = 0; d < hd4; ++d) {
        const float4 qv = qh[d];
#pragma unroll
        for (int j = 0; j < kPagedKeysPerWarp; ++j) {
          const float4 kv = kw[j * hd4 + d];
          dot[j] = fmaf(qv.x, kv.x, dot[j]);
          dot[j] = fmaf(qv.y, kv.y, dot[j]);
          dot[j] = fmaf(qv.z, kv.z, dot[j]);
          dot[j] = fmaf(qv.w, kv.w, dot[j]);
        }
      }
      const float wh = ws[h];
#pragma unroll
      for (int j = 0; j < kPagedKeysPerWarp; ++j) total[j] += fmaxf(dot[j], 0.0f) * a.softmax_scale * wh;
    }
#pragma unroll
    for (int j = 0; j < kPagedKeysPerWarp; ++j) {
      const float sum = warp_sum(total[j]);
      if (lane == 0 && s0 + j < nk) out[s0 + j] = sum;
    }
  }
}

// Grid (key tiles of 256, rows).
__global__ void indexer_mask_ragged_kernel(RaggedMaskArgs a, int64_t row0) {
  const int64_t t = row0 + blockIdx.y;
  const int64_t* info = a.row_info + t * kRowInfoCols;
  const int64_t s = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (s >= info[kRowKeys]) return;
  const int64_t visible = (a.positions[t] + 1) / a.ratio;
  const int64_t cand = info[kRowCand];
  if (s >= visible || (a.candidates != nullptr && cand >= 0 && a.candidates[cand + s] == 0))
    a.scores[info[kRowScore] + s] = -INFINITY;
}

// Grid (block tiles of 256, rows).
__global__ void block_max_ragged_kernel(RaggedBlockMaxArgs a, int64_t row0) {
  const int64_t t = row0 + blockIdx.y;
  const int64_t* info = a.row_info + t * kRowInfoCols;
  const int64_t nk = info[kRowKeys], nb = (nk + a.block_size - 1) / a.block_size;
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b == 0) a.num_blocks[t] = nb;
  if (b >= nb) return;
  const int64_t ld = (a.max_keys + a.block_size - 1) / a.block_size;
  const float* row = a.scores + info[kRowScore];
  const int64_t visible = (a.positions[t] + 1) / a.ratio;
  float m = -INFINITY;
  const int64_t end = min(nk, (b + 1) * a.block_size);
  for (int64_t s = b * a.block_size; s < end; ++s) m = fmaxf(m, row[s]);
  if (visible > 0 && b == (visible - 1) / a.block_size) m = INFINITY;
  a.out[t * ld + b] = m;
}

// One block per row: the kept block ids become a bitmap in shared memory, then every
// key of the row reads its block's bit (no serial walk over the k ids).
__global__ void candidate_mask_ragged_kernel(RaggedCandidateMaskArgs a, int64_t row0) {
  extern __shared__ uint32_t bits[];
  const int64_t t = row0 + blockIdx.x;
  const int64_t* info = a.row_info + t * kRowInfoCols;
  const int64_t nk = info[kRowKeys];
  if (nk == 0) return;
  const int64_t words = ((nk + a.block_size - 1) / a.block_size + 31) / 32;
  for (int64_t i = threadIdx.x; i < words; i += blockDim.x) bits[i] = 0;
  __syncthreads();
  for (int64_t j = threadIdx.x; j < a.k; j += blockDim.x) {
    const int64_t b = a.block_ids[t * a.k + j];
    if (b >= 0) atomicOr(&bits[b >> 5], 1u << (b & 31));
  }
  __syncthreads();
  uint8_t* m = a.mask + info[kRowScore];
  for (int64_t s = threadIdx.x; s < nk; s += blockDim.x) {
    const int64_t b = s / a.block_size;
    m[s] = uint8_t((bits[b >> 5] >> (b & 31)) & 1u);
  }
}

}  // namespace

cudaError_t indexer_score(const IndexerScoreArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.heads <= 0 || a.head_dim <= 0 || a.num_keys < 0 || a.n > 65535) return cudaErrorInvalidValue;
  if (a.n == 0 || a.num_keys == 0) return cudaSuccess;
  if (!a.q || !a.w || !a.keys || !a.scores) return cudaErrorInvalidValue;
  const size_t smem =
      sizeof(float) * size_t(a.heads * (a.head_dim + 1) + a.heads + kWarps * kKeysPerWarp * a.head_dim);
  if (smem > 200 * 1024) return cudaErrorInvalidValue;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(indexer_score_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
  }
  const dim3 grid(unsigned((a.num_keys + kKeysPerBlock - 1) / kKeysPerBlock), unsigned(a.n));
  indexer_score_kernel<<<grid, kWarps * 32, smem, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t indexer_mask(const IndexerMaskArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.num_keys < 0 || a.ratio <= 0) return cudaErrorInvalidValue;
  if (a.n == 0 || a.num_keys == 0) return cudaSuccess;
  if (!a.scores || !a.positions) return cudaErrorInvalidValue;
  indexer_mask_kernel<<<grid_1d(a.n * a.num_keys, 256), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t block_max(const BlockMaxArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.num_keys < 0 || a.block_size <= 0 || a.ratio <= 0) return cudaErrorInvalidValue;
  if (a.n == 0 || a.num_keys == 0) return cudaSuccess;
  if (!a.scores || !a.positions || !a.out) return cudaErrorInvalidValue;
  const int64_t nb = (a.num_keys + a.block_size - 1) / a.block_size;
  block_max_kernel<<<grid_1d(a.n * nb, 256), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t candidate_mask(const CandidateMaskArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.k < 0 || a.num_keys < 0 || a.block_size <= 0 || a.n > INT32_MAX) return cudaErrorInvalidValue;
  if (a.n == 0 || a.num_keys == 0) return cudaSuccess;
  if (!a.mask || (a.k > 0 && !a.block_ids)) return cudaErrorInvalidValue;
  candidate_mask_kernel<<<unsigned(a.n), 256, 0, stream>>>(a);
  return cudaGetLastError();
}

namespace {
// Rows go into grid.y (or x), at most 65535 per launch: larger batches take several
// launches over row ranges; a row's work does not depend on the split.
constexpr int64_t kMaxGridY = 65535;
}  // namespace

namespace {

// ---- the paged score on the tensor cores (heads 32, head_dim 128: V4.1's indexer) ----
//
// Per query row, S[key, head] = keys . q^T as bf16 mma.sync.m16n8k16 (M = 16 keys per warp,
// N = 8 heads per tile, K = 16 channels per step), fp32 accumulation. Each fp32 operand is
// split exactly into bf16 hi + mid + lo (x = hi + mid + lo); the dot is the hi.hi product
// plus, only when some q or key value of the warp's tile is not bf16-exact, the five
// correction terms down to 2^-16 of it (hi.mid, mid.hi, hi.lo, mid.mid, lo.hi) summed in
// their own accumulator, so the result stays at fp32 accuracy for any input. The model's
// q and keys are FP4 fake-quantized (e2m1 x power of two, exact in bf16): one MMA per
// tile, and each 16-channel step's sum of exact products is itself exact. Keys are read
// straight from the paged pool into the A fragments (no shared-memory staging); q's three
// pieces sit in shared memory with rows padded so the B-fragment loads are conflict-free.
// Epilogue: relu(dot) * scale * w summed over heads 0..31 in order, without contraction,
// as the CPU op sums them: with exact dots (the model's FP4 values) the scores are the
// CPU's bits; otherwise they differ only by the dot's fp32 accumulation.
constexpr int kMmaHeads = 32, kMmaDim = 128, kMmaWarps = 4;
constexpr int kMmaKeys = 16 * kMmaWarps;          // keys per block pass
constexpr int kQWords = kMmaDim / 2 + 4;          // bf16 pairs per head row, padded

__device__ __forceinline__ void split3(float x, __nv_bfloat16& h, __nv_bfloat16& m, __nv_bfloat16& l) {
  h = __float2bfloat16_rn(x);
  const float r1 = x - __bfloat162float(h);  // exact: |r1| <= half a bf16 ulp of x
  m = __float2bfloat16_rn(r1);
  l = __float2bfloat16_rn(r1 - __bfloat162float(m));  // exact up to fp32 underflow
}

__device__ __forceinline__ uint32_t pack2(__nv_bfloat16 first, __nv_bfloat16 second) {
  return uint32_t(__bfloat16_as_ushort(first)) | (uint32_t(__bfloat16_as_ushort(second)) << 16);
}

using mma::mma_bf16;  // d += a b (m16n8k16, bf16 in, fp32 out)

// A fragment of a 16-channel step from the lane's four float2 (keys g and g + 8, channels
// 2tq.. and 8 + 2tq..): bf16-exact operands as the top halves of their fp32 patterns (one
// PRMT per pair), any operand as its exact hi / mid / lo bf16 pieces.
__device__ __forceinline__ void fragment_exact(const float2 (&x)[4], uint32_t (&ah)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) ah[r] = __byte_perm(__float_as_uint(x[r].x), __float_as_uint(x[r].y), 0x7632);
}

// acc[j] = the warp's 16 keys (ra / rb) . heads 8j .. 8j + 7 of q, when every operand is
// bf16-exact: one MMA per (16-channel step, 8 heads), steps in channel order. q: one
// row's bf16 pairs in shared memory, [head][kQWords].
__device__ __forceinline__ void dots_exact(const float2 (&ra)[16], const float2 (&rb)[16], const uint32_t* q, int g,
                                           int tq, float (&acc)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    const float2 x[4] = {ra[2 * kk], rb[2 * kk], ra[2 * kk + 1], rb[2 * kk + 1]};
    uint32_t ah[4];
    fragment_exact(x, ah);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int at = (8 * j + g) * kQWords + 8 * kk + tq;
      mma_bf16(acc[j], ah, q[at], q[at + 4]);
    }
  }
}
// The lane's key values for one warp pass: keys sa and sb (zeros past `nk`), channels
// 8j + 2tq, +1 for j = 0..15. Returns whether the warp's 16 keys are all bf16-exact: a value
// is iff the low 16 bits of its fp32 pattern are zero (bf16 is the top half), one OR per
// value instead of a round trip through bf16. (A NaN with zero low bits counts as exact;
// its key's dot is NaN on either path and relu() maps it to 0.)
__device__ __forceinline__ bool load_keys(const PagedIndexerScoreArgs& a, const int64_t* table, int64_t sa, int64_t sb,
                                          int64_t nk, int tq, float2 (&ra)[16], float2 (&rb)[16]) {
  const int64_t epb = a.entries_per_block;
  const float* ka = sa < nk ? a.keys + (table[sa / epb] * epb + sa % epb) * kMmaDim : nullptr;
  const float* kb = sb < nk ? a.keys + (table[sb / epb] * epb + sb % epb) * kMmaDim : nullptr;
#pragma unroll
  for (int j = 0; j < 16; ++j) {
    const int c = 8 * j + 2 * tq;  // j = 2kk + half
    ra[j] = ka != nullptr ? *reinterpret_cast<const float2*>(ka + c) : make_float2(0.f, 0.f);
    rb[j] = kb != nullptr ? *reinterpret_cast<const float2*>(kb + c) : make_float2(0.f, 0.f);
  }
  uint32_t low = 0;
#pragma unroll
  for (int j = 0; j < 16; ++j)
    low |= __float_as_uint(ra[j].x) | __float_as_uint(ra[j].y) | __float_as_uint(rb[j].x) | __float_as_uint(rb[j].y);
  return !__any_sync(0xffffffffu, (low & 0xffffu) != 0);
}
__device__ __forceinline__ void fragment_split(const float2 (&x)[4], uint32_t (&ah)[4], uint32_t (&am)[4],
                                               uint32_t (&al)[4]) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    __nv_bfloat16 h0, m0, l0, h1, m1, l1;
    split3(x[r].x, h0, m0, l0);
    split3(x[r].y, h1, m1, l1);
    ah[r] = pack2(h0, h1);
    am[r] = pack2(m0, m1);
    al[r] = pack2(l0, l1);
  }
}

// acc / fix = the warp's 16 keys (ra / rb) . heads 8j .. 8j + 7 for operands that are not all
// bf16-exact: the hi.hi product in acc, the five correction terms in fix, channel steps in order.
// qb(j, kk, piece, half) gives the B fragment word of the query's pieces (hi / mid / lo: 0 / 1 / 2)
// at heads 8j + g, channels 16kk + 2tq (+ 8 for half 1). Every kernel's split path goes through it
// (pieces from shared memory in the per-row kernel, split from global memory in the others), so
// their MMAs and order cannot drift apart in bits.
template <class QB>
__device__ __forceinline__ void dots_split_with(const float2 (&ra)[16], const float2 (&rb)[16], float (&acc)[4][4],
                                                float (&fix)[4][4], QB qb) {
#pragma unroll
  for (int kk = 0; kk < 8; ++kk) {
    // A fragment (row-major 16 x 16): a0 (key g, ch 2tq..), a1 (key g + 8, ch 2tq..),
    // a2 (key g, ch 8 + 2tq..), a3 (key g + 8, ch 8 + 2tq..).
    const float2 x[4] = {ra[2 * kk], rb[2 * kk], ra[2 * kk + 1], rb[2 * kk + 1]};
    uint32_t ah[4], am[4], al[4];
    fragment_split(x, ah, am, al);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint32_t bh0 = qb(j, kk, 0, 0), bh1 = qb(j, kk, 0, 1);
      mma_bf16(acc[j], ah, bh0, bh1);
      const uint32_t bm0 = qb(j, kk, 1, 0), bm1 = qb(j, kk, 1, 1), bl0 = qb(j, kk, 2, 0), bl1 = qb(j, kk, 2, 1);
      mma_bf16(fix[j], ah, bm0, bm1);
      mma_bf16(fix[j], am, bh0, bh1);
      mma_bf16(fix[j], ah, bl0, bl1);
      mma_bf16(fix[j], am, bm0, bm1);
      mma_bf16(fix[j], al, bh0, bh1);
    }
  }
}

__global__ void __launch_bounds__(kMmaWarps * 32) indexer_score_mma_kernel(PagedIndexerScoreArgs a, int64_t row0,
                                                                            int64_t tile) {
  const int64_t t = row0 + blockIdx.y;
  const int64_t* info = a.row_info + t * kRowInfoCols;
  const int64_t nk = info[kRowKeys];
  const int64_t tile0 = int64_t(blockIdx.x) * tile;
  if (tile0 >= nk) return;  // whole block: before any barrier
  __shared__ uint32_t qs[3][kMmaHeads * kQWords];  // q's hi / mid / lo pieces, [head][channel pair]
  __shared__ float ws[kMmaHeads];
  const float2* q2 = reinterpret_cast<const float2*>(a.q + t * kMmaHeads * kMmaDim);
  bool q_rest = false;
  for (int i = threadIdx.x; i < kMmaHeads * kMmaDim / 2; i += blockDim.x) {
    const float2 x = q2[i];
    __nv_bfloat16 h0, m0, l0, h1, m1, l1;
    split3(x.x, h0, m0, l0);
    split3(x.y, h1, m1, l1);
    const int at = (i / (kMmaDim / 2)) * kQWords + i % (kMmaDim / 2);
    qs[0][at] = pack2(h0, h1);
    qs[1][at] = pack2(m0, m1);
    qs[2][at] = pack2(l0, l1);
    q_rest |= x.x != __bfloat162float(h0) || x.y != __bfloat162float(h1);
  }
  for (int i = threadIdx.x; i < kMmaHeads; i += blockDim.x) ws[i] = a.w[t * kMmaHeads + i];
  const bool q_inexact = __syncthreads_or(q_rest) != 0;

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  const int64_t* table = a.tables + info[kRowTable];
  float* out = a.scores + info[kRowScore];
  const int64_t tile_end = min(nk, tile0 + tile);
  const float scale = a.softmax_scale;
  // No barrier below: each warp scores its own 16 keys per pass.
  for (int64_t s0 = tile0 + warp * 16; s0 < tile_end; s0 += kMmaKeys) {
    // This lane's A-fragment rows: keys s0 + g and s0 + g + 8; per 16-channel step kk it
    // holds channels 16kk + 2tq (+1) and 16kk + 8 + 2tq (+1) of both.
    const int64_t sa = s0 + g, sb = s0 + g + 8;
    float2 ra[16], rb[16];
    const bool k_exact = load_keys(a, table, sa, sb, nk, tq, ra, rb);
    const bool full = q_inexact || !k_exact;  // warp-uniform
    float acc[4][4] = {}, fix[4][4] = {};
    if (!full) {
      // Every operand is bf16-exact (the model's FP4 values): its bf16 is the top half of its
      // fp32 pattern, one PRMT per pair; the MMAs and their order are those of the general
      // path below, whose correction terms would all be exact zeros here.
      dots_exact(ra, rb, qs[0], g, tq, acc);
    } else {
      // B fragment (channels x heads 8j..8j+7): b0 = q[8j + g][16kk + 2tq ..], b1 = + 8.
      dots_split_with(ra, rb, acc, fix, [&](int j, int kk, int piece, int half) {
        return qs[piece][(8 * j + g) * kQWords + 8 * kk + tq + 4 * half];
      });
    }
    // C fragment of tile j: c0 / c1 = key g, heads 8j + 2tq / + 1; c2 / c3 = key g + 8.
    // Each lane forms its 16 head terms relu(dot) * scale * w as the CPU op does (no
    // contraction); the quad then adds the 32 terms of a key in head order 0..31, each
    // fetched from the lane holding it: the CPU's own sum, so exact dots give its bits.
    float v[4][4];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        v[j][c] = __fmul_rn(__fmul_rn(fmaxf(acc[j][c] + fix[j][c], 0.0f), scale), ws[8 * j + 2 * tq + (c & 1)]);
    float tot_a = 0.0f, tot_b = 0.0f;
#pragma unroll
    for (int h = 0; h < kMmaHeads; ++h) {
      const int src = (lane & ~3) | ((h & 7) >> 1);
      tot_a = __fadd_rn(tot_a, __shfl_sync(0xffffffffu, v[h >> 3][h & 1], src));
      tot_b = __fadd_rn(tot_b, __shfl_sync(0xffffffffu, v[h >> 3][2 + (h & 1)], src));
    }
    if (tq == 0) {
      if (sa < nk) out[sa] = tot_a;
      if (sb < nk) out[sb] = tot_b;
    }
  }
}

// ---- the same scores, several query rows per block (prefill chunks) ----
//
// Rows of one prefill chunk share their sequence's block table, so the per-row kernel
// above reads every key once per row: 8192 rows x ~4096 keys x 512 B = 17 GB of L2 reads
// per 8K-token chunk, and a warp redoes the key fragments' conversion and the 64-shuffle
// head sum for each row. Here a block takes kGroupRows consecutive rows and a key tile:
// each warp loads a 16-key fragment once and reuses it for every row of the group with
// the same table, and the head sum goes through shared memory (16 lanes each add one
// key's 32 terms in head order 0..31). Per (row, key) the arithmetic is the per-row
// kernel's: the same MMAs on the same operands in the same order (the exact-operand
// path when the row's q and the warp's keys are bf16-exact, the three-way split
// otherwise, its q pieces formed from global memory instead of shared), the same
// epilogue expressions and the same sequential head sum. So the scores are bitwise
// the per-row kernel's, whichever kernel the launcher picks (ops case
// indexer_score_paged_rows_*: A/B bits), and batch invariance is kept.
constexpr int kGroupRows = 4;
constexpr int kRedStride = kMmaHeads + 4;  // head-sum scratch row: 36 floats, spreads the banks

__device__ __forceinline__ uint32_t split_pair(const float* q, int piece) {
  __nv_bfloat16 h0, m0, l0, h1, m1, l1;
  split3(q[0], h0, m0, l0);
  split3(q[1], h1, m1, l1);
  return piece == 0 ? pack2(h0, h1) : piece == 1 ? pack2(m0, m1) : pack2(l0, l1);
}

// dots_split_with on the query row qrow (fp32, global memory), its pieces split per fetch (the
// grouped-rows kernel's path and the wgmma kernel's fallback).
__device__ __forceinline__ void dots_split(const float2 (&ra)[16], const float2 (&rb)[16], const float* qrow, int g,
                                           int tq, float (&acc)[4][4], float (&fix)[4][4]) {
  dots_split_with(ra, rb, acc, fix, [&](int j, int kk, int piece, int half) {
    return split_pair(qrow + (8 * j + g) * kMmaDim + 16 * kk + 2 * tq + 8 * half, piece);
  });
}

// The per-row epilogue: relu(dot) * scale * w per head, then key g's (and g + 8's) 32 terms summed
// in head order by one lane each through the warp's scratch rw ([16][kRedStride]); lanes 0..15
// write keys s0 + lane < nk of the row's scores at out.
__device__ __forceinline__ void head_sum_rows(const float (&acc)[4][4], const float (&fix)[4][4], float scale,
                                              const float* wrow, float* rw, int g, int tq, int lane, int64_t s0,
                                              int64_t nk, float* out) {
  __syncwarp();  // the previous row's reads of rw are done
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    float v[4];
#pragma unroll
    for (int c = 0; c < 4; ++c)
      v[c] = __fmul_rn(__fmul_rn(fmaxf(acc[j][c] + fix[j][c], 0.0f), scale), wrow[8 * j + 2 * tq + (c & 1)]);
    *reinterpret_cast<float2*>(rw + g * kRedStride + 8 * j + 2 * tq) = make_float2(v[0], v[1]);
    *reinterpret_cast<float2*>(rw + (g + 8) * kRedStride + 8 * j + 2 * tq) = make_float2(v[2], v[3]);
  }
  __syncwarp();
  if (lane < 16 && s0 + lane < nk) {
    const float* row = rw + lane * kRedStride;
    float tot = 0.0f;
#pragma unroll
    for (int h = 0; h < kMmaHeads; ++h) tot = __fadd_rn(tot, row[h]);
    out[s0 + lane] = tot;
  }
}

__global__ void __launch_bounds__(kMmaWarps * 32, 3) indexer_score_mma_rows_kernel(PagedIndexerScoreArgs a, int64_t row0,
                                                                                 int64_t tile) {
  const int64_t r_begin = row0 + int64_t(blockIdx.y) * kGroupRows;
  const int nr = int(min(int64_t(kGroupRows), a.rows - r_begin));
  const int64_t tile0 = int64_t(blockIdx.x) * tile;
  int64_t nk_max = 0;
  for (int r = 0; r < nr; ++r) nk_max = max(nk_max, a.row_info[(r_begin + r) * kRowInfoCols + kRowKeys]);
  if (tile0 >= nk_max) return;  // whole block: before any barrier

  __shared__ uint32_t qs[kGroupRows][kMmaHeads * kQWords];  // each row's q as bf16 (top halves)
  __shared__ float ws[kGroupRows][kMmaHeads];
  __shared__ float red[kMmaWarps][16 * kRedStride];
  __shared__ int64_t nk_s[kGroupRows], nk_load[kGroupRows], table_s[kGroupRows], score_s[kGroupRows];
  __shared__ int q_rest_s[kGroupRows];
  if (threadIdx.x < kGroupRows) {
    const int r = int(threadIdx.x);
    q_rest_s[r] = 0;
    if (r < nr) {
      const int64_t* info = a.row_info + (r_begin + r) * kRowInfoCols;
      nk_s[r] = info[kRowKeys];
      table_s[r] = info[kRowTable];
      score_s[r] = info[kRowScore];
    }
  }
  __syncthreads();
  if (threadIdx.x < kGroupRows && int(threadIdx.x) < nr) {
    // Keys are loaded once per run of rows with the same table, up to the run's largest
    // count: every key below it exists in that table; the rows store only their own.
    const int r = int(threadIdx.x);
    int64_t m = nk_s[r];
    for (int o = 0; o < nr; ++o)
      if (table_s[o] == table_s[r]) m = max(m, nk_s[o]);
    nk_load[r] = m;
  }
  for (int i = threadIdx.x; i < nr * kMmaHeads * kMmaDim / 2; i += blockDim.x) {
    const int r = i / (kMmaHeads * kMmaDim / 2), k = i % (kMmaHeads * kMmaDim / 2);
    const float2 x = reinterpret_cast<const float2*>(a.q + (r_begin + r) * kMmaHeads * kMmaDim)[k];
    const uint32_t bx = __float_as_uint(x.x), by = __float_as_uint(x.y);
    qs[r][(k / (kMmaDim / 2)) * kQWords + k % (kMmaDim / 2)] = __byte_perm(bx, by, 0x7632);
    if (((bx | by) & 0xffffu) != 0) q_rest_s[r] = 1;  // benign race: every writer stores 1
  }
  for (int i = threadIdx.x; i < nr * kMmaHeads; i += blockDim.x)
    ws[i / kMmaHeads][i % kMmaHeads] = a.w[(r_begin + i / kMmaHeads) * kMmaHeads + i % kMmaHeads];
  __syncthreads();

  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tq = lane & 3;
  const float scale = a.softmax_scale;
  float* rw = red[warp];
  const int64_t tile_end = min(nk_max, tile0 + tile);
  // No barrier below: each warp scores its own 16 keys per pass, for every row.
  for (int64_t s0 = tile0 + warp * 16; s0 < tile_end; s0 += kMmaKeys) {
    const int64_t sa = s0 + g, sb = s0 + g + 8;
    float2 ra[16], rb[16];
    int64_t loaded = -1;  // table offset of the keys in ra / rb
    bool k_exact = false;
    for (int r = 0; r < nr; ++r) {
      const int64_t nk = nk_s[r];
      if (s0 >= nk) continue;  // warp-uniform
      if (table_s[r] != loaded) {
        loaded = table_s[r];
        k_exact = load_keys(a, a.tables + loaded, sa, sb, nk_load[r], tq, ra, rb);
      }
      float acc[4][4] = {}, fix[4][4] = {};
      if (k_exact && q_rest_s[r] == 0) {
        dots_exact(ra, rb, qs[r], g, tq, acc);
      } else {
        dots_split(ra, rb, a.q + (r_begin + r) * kMmaHeads * kMmaDim, g, tq, acc, fix);
      }
      // Epilogue: the per-row kernel's head terms, then key g's (and g + 8's) 32 terms
      // summed in head order by one lane each, through this warp's scratch.
      head_sum_rows(acc, fix, scale, ws[r], rw, g, tq, lane, s0, nk, a.scores + score_s[r]);
    }
  }
}


// ---- the same scores on Hopper's warpgroup MMA (prefill chunks; NOTES 43) ----
//
// Per block: kWgRows = 16 consecutive rows (their q as bf16 in shared memory, 128 KB) and a
// range of keys; two warpgroups, each walking its own 64-key tiles of the range. Per tile
// the keys are rounded (bf16-exact: the top halves of their fp32 patterns) into a 128-byte-
// swizzled K-major tile and, per group of 4 rows, S[64 keys, 4 rows x 32 heads] =
// K Q^T is 8 wgmma m64n128k16 (A = the keys, B = the group's q, both from shared memory,
// steps in channel order 0..127 as the mma.sync kernels'), fp32 accumulation from zero.
//
// Head sum without shared memory: the B rows (the wgmma's N columns) are permuted so that
// accumulator slot j of lane (g, tq) holds row (tq - j) mod 4 of the group, heads 2j and
// 2j + 1. A row's running sum then visits the quad's lanes tq, tq + 1, ... (one shuffle per
// hop) and adds heads 0, 1, 2, ..., 31 in order, each lane adding its two heads per hop from
// a compile-time register: 16 hops for 4 rows x 2 keys per quad at once, and lane tq ends
// holding row (tq + 1) mod 4's sums for keys g and g + 8.
//
// Same bits as the mma.sync kernels when every operand is bf16-exact (the model's FP4
// values): the same bf16 operands, the same 16-channel steps in the same order, and the
// per-row kernels' epilogue (relu(dot) * scale * w without contraction, added from 0 over
// heads 0..31). The bits then rest on wgmma's k16 step rounding as mma.sync's; with FP4
// operands each step's sum is exact anyway (ops case indexer_score_wgmma_* compare). A tile
// whose keys or any of the block's q rows are not bf16-exact is scored by the grouped
// kernel's own per-warp code (the exact hi / mid / lo split), so any input keeps its bits.
constexpr int kWgRows = 16, kWgGroups = kWgRows / 4, kWgWarpgroups = 2, kWgThreads = kWgWarpgroups * 128;
constexpr int kWgTileKeys = 64;
constexpr int kWgQGroupBytes = 128 * kMmaDim * 2;        // 4 rows x 32 heads x 128 channels bf16: 32 KB
constexpr int kWgQSlab = 128 * 128;                      // one 64-channel slab of a group: 16 KB
constexpr int kWgTileBytes = kWgTileKeys * kMmaDim * 2;  // 16 KB
constexpr int kWgTileSlab = kWgTileKeys * 128;           // 8 KB
constexpr size_t kWgSmem = 1024 + size_t(kWgGroups) * kWgQGroupBytes + size_t(kWgWarpgroups) * 2 * kWgTileBytes;
static_assert(kMmaWarps * 16 * kRedStride * 4 <= kWgTileBytes, "the fallback's head-sum scratch fits in a key tile");

__device__ __forceinline__ uint32_t wg_swz(int row, int gran) { return uint32_t(row * 128 + ((gran ^ (row & 7)) << 4)); }

// d = A B (scale_d 0: from zero) or d += A B, m64n128k16, A and B from shared memory, both K-major.
__device__ __forceinline__ void wg_mma_ss_n128(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" DI_WGMMA_R64
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : DI_WGMMA_ACC64("+f")
      : "l"(da), "l"(db), "r"(scale_d));
#else
  __trap();  // the launcher runs this kernel on compute capability 9.0 only
#endif
}

// Barrier of one warpgroup (ids 1, 2; 0 is __syncthreads), and the same barrier returning
// whether any of its threads passed v (no shared flag to reset, so no reset race).
__device__ __forceinline__ void wg_bar(int wg) { asm volatile("bar.sync %0, 128;" ::"r"(wg + 1) : "memory"); }
__device__ __forceinline__ bool wg_bar_or(int wg, bool v) {
  uint32_t r;
  asm volatile(
      "{\n.reg .pred p, q;\nsetp.ne.u32 p, %1, 0;\nbar.red.or.pred q, %2, 128, p;\nselp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(r)
      : "r"(uint32_t(v)), "r"(wg + 1)
      : "memory");
  return r != 0;
}

__global__ void __launch_bounds__(kWgThreads, 1) indexer_score_wgmma_kernel(PagedIndexerScoreArgs a, int64_t row0,
                                                                           int64_t chunk, int64_t row_blocks) {
  // Heaviest row blocks first: in a causal chunk the later rows see the most keys.
  const int64_t rb = row_blocks - 1 - int64_t(blockIdx.y);
  const int64_t r_begin = row0 + rb * kWgRows;
  const int nr = int(min(int64_t(kWgRows), a.rows - r_begin));
  const int64_t c0 = int64_t(blockIdx.x) * chunk;
  __shared__ int64_t nk_s[kWgRows], table_s[kWgRows], score_s[kWgRows];
  __shared__ __align__(16) float ws[kWgRows][kMmaHeads + 4];  // padded: the 4 rows a warp reads sit in 4 banks
  __shared__ int q_rest;
  __shared__ int64_t nk_max_s;
  const int tid = int(threadIdx.x);
  if (tid < kWgRows) {
    int64_t nk = 0, tb = -1, so = 0;
    if (tid < nr) {
      const int64_t* info = a.row_info + (r_begin + tid) * kRowInfoCols;
      nk = info[kRowKeys];
      tb = info[kRowTable];
      so = info[kRowScore];
      // Keys at or past the row's visible count are left to the mask (it writes -inf there).
      if (a.positions != nullptr) nk = min(nk, max(int64_t(0), (a.positions[r_begin + tid] + 1) / a.ratio));
    }
    nk_s[tid] = nk, table_s[tid] = tb, score_s[tid] = so;
  }
  if (tid == 0) q_rest = 0;
  __syncthreads();
  if (tid == 0) {
    int64_t m = 0;
    for (int r = 0; r < nr; ++r) m = max(m, nk_s[r]);
    nk_max_s = m;
  }
  __syncthreads();
  const int64_t nk_max = nk_max_s;
  if (c0 >= nk_max) return;  // whole block: before any further barrier
  const int64_t c_end = min(nk_max, c0 + chunk);

  extern __shared__ uint8_t wg_smem_raw[];
  const uint32_t raw = uint32_t(__cvta_generic_to_shared(wg_smem_raw));
  uint8_t* qsm = wg_smem_raw + ((1024u - (raw & 1023u)) & 1023u);  // swizzle atoms: 1024-byte aligned
  const uint32_t qs_a = uint32_t(__cvta_generic_to_shared(qsm));
  uint8_t* ksm = qsm + kWgGroups * kWgQGroupBytes;

  // q as the B operand: row rr of group gr, head h = 2 s + e goes to B row 8 s + 2 ((rr + s) % 4) + e,
  // i.e. accumulator column 8 s + 2 tq + e holds row (tq - s) % 4 (see above). Zeros past nr.
  {
    // 64 float4 per thread, 8 loads in flight before their stores (a loop that stores
    // between loads sends them out one at a time).
    constexpr int kPer = kWgRows * kMmaHeads * (kMmaDim / 4) / kWgThreads, kBatch = 8;
    static_assert(kPer % kBatch == 0, "q staging split");
    int rest = 0;
#pragma unroll 1
    for (int u0 = 0; u0 < kPer; u0 += kBatch) {
      float4 x[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = tid + (u0 + u) * kWgThreads, r = i / (kMmaHeads * kMmaDim / 4);
        x[u] = r < nr ? __ldg(reinterpret_cast<const float4*>(a.q + r_begin * kMmaHeads * kMmaDim) + i)
                      : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int i = tid + (u0 + u) * kWgThreads, r = i / (kMmaHeads * kMmaDim / 4);
        const int h = (i / (kMmaDim / 4)) % kMmaHeads, col = 4 * (i % (kMmaDim / 4));
        const uint32_t bx = __float_as_uint(x[u].x), by = __float_as_uint(x[u].y), bz = __float_as_uint(x[u].z),
                       bw = __float_as_uint(x[u].w);
        rest |= int((bx | by | bz | bw) & 0xffffu);
        const int gr = r / 4, rr = r % 4, s = h >> 1, n = 8 * s + 2 * ((rr + s) & 3) + (h & 1);
        *reinterpret_cast<uint2*>(qsm + gr * kWgQGroupBytes + (col / 64) * kWgQSlab + wg_swz(n, (col % 64) / 8) +
                                  (col % 8) * 2) = make_uint2(__byte_perm(bx, by, 0x7632), __byte_perm(bz, bw, 0x7632));
      }
    }
    if (rest != 0) q_rest = 1;  // benign race: every writer stores 1
    for (int i = tid; i < kWgRows * kMmaHeads; i += kWgThreads)
      ws[i / kMmaHeads][i % kMmaHeads] = i / kMmaHeads < nr ? a.w[r_begin * kMmaHeads + i] : 0.0f;
  }
  wgmma::fence_proxy_async();
  __syncthreads();
  const bool q_inexact = q_rest != 0;

  const int wg = tid >> 7, wt = tid & 127, wi = wt >> 5, lane = tid & 31, g = lane >> 2, tq = lane & 3;
  uint8_t* kbuf = ksm + wg * 2 * kWgTileBytes;
  const uint32_t kbuf_a = uint32_t(__cvta_generic_to_shared(kbuf));
  const float scale = a.softmax_scale;
  const int64_t epb = a.entries_per_block;

  // Rows with different block tables (a block straddling sequences): one pass over the
  // key range per distinct table, each row storing only in its own table's pass.
  for (int u = 0; u < nr; ++u) {
    bool seen = false;  // an earlier row's pass covered this table
    for (int o = 0; o < u; ++o) seen = seen || table_s[o] == table_s[u];
    if (seen) continue;
    const int64_t tb = table_s[u];
    int64_t nk_load = 0;  // the table's largest count: every key below it exists in the table
    for (int o = 0; o < nr; ++o)
      if (table_s[o] == tb) nk_load = max(nk_load, nk_s[o]);
    const int64_t t_end = min(c_end, nk_load);
    if (c0 >= t_end) continue;
    const int64_t* table = a.tables + tb;
    const int64_t ntiles = (t_end - c0 + kWgTileKeys - 1) / kWgTileKeys;

    // The lane's 16 float4 of a tile: key wi + 4 v (v = 0..15), channels 4 lane .. + 3.
    float4 pre[16];
    auto load_tile = [&](int64_t s0) {
      // One division per tile: the keys s0 + k (k < 64) step through the table from (blk, off).
      const int64_t blk = s0 / epb, off = s0 % epb;
#pragma unroll
      for (int v = 0; v < 16; ++v) {
        const int64_t s = s0 + wi + 4 * v;
        pre[v] = make_float4(0.f, 0.f, 0.f, 0.f);
        if (s < nk_load) {
          int64_t o = off + wi + 4 * v, bi = blk;
          if (o >= epb) {
            o -= epb, ++bi;
            if (o >= epb) bi += o / epb, o %= epb;  // blocks of fewer than 64 entries
          }
          pre[v] = __ldg(reinterpret_cast<const float4*>(a.keys + (table[bi] * epb + o) * kMmaDim) + lane);
        }
      }
    };
    auto store_tile = [&](int b) -> int {
      uint8_t* t = kbuf + b * kWgTileBytes;
      uint32_t low = 0;
      const int col = 4 * lane;
#pragma unroll
      for (int v = 0; v < 16; ++v) {
        const uint32_t bx = __float_as_uint(pre[v].x), by = __float_as_uint(pre[v].y), bz = __float_as_uint(pre[v].z),
                       bw = __float_as_uint(pre[v].w);
        low |= bx | by | bz | bw;
        *reinterpret_cast<uint2*>(t + (col / 64) * kWgTileSlab + wg_swz(wi + 4 * v, (col % 64) / 8) + (col % 8) * 2) =
            make_uint2(__byte_perm(bx, by, 0x7632), __byte_perm(bz, bw, 0x7632));
      }
      return int(low & 0xffffu);
    };

    int64_t it = wg;
    if (it < ntiles) load_tile(c0 + it * kWgTileKeys);
    for (int b = 0; it < ntiles; it += kWgWarpgroups, b ^= 1) {
      const int64_t s0 = c0 + it * kWgTileKeys;
      // Buffer b was last read by this pass's tile it - 4 (two iterations back): every warp
      // finished it before the barrier of the iteration between.
      const bool k_inexact = store_tile(b) != 0;
      wgmma::fence_proxy_async();  // this thread's tile stores, visible to the wgmma reads
      const bool exact = !wg_bar_or(wg, k_inexact) && !q_inexact;  // warpgroup-uniform
      if (it + kWgWarpgroups < ntiles) load_tile(s0 + kWgWarpgroups * kWgTileKeys);  // in flight meanwhile
      if (exact) {
        const uint32_t ta = kbuf_a + uint32_t(b * kWgTileBytes);
#pragma unroll 1
        for (int gr = 0; gr < kWgGroups; ++gr) {
          bool busy = false;  // some row of the group stores keys of this tile in this pass
#pragma unroll
          for (int rr = 0; rr < 4; ++rr) busy = busy || (table_s[4 * gr + rr] == tb && nk_s[4 * gr + rr] > s0);
          if (!busy) continue;
          float d[64];
          wgmma::fence();
#pragma unroll
          for (int kk = 0; kk < 8; ++kk) {
            const uint32_t off = uint32_t((kk % 4) * 32);
            wg_mma_ss_n128(d, wgmma::desc_k_sw128(ta + uint32_t((kk / 4) * kWgTileSlab) + off),
                           wgmma::desc_k_sw128(qs_a + uint32_t(gr * kWgQGroupBytes + (kk / 4) * kWgQSlab) + off), kk);
          }
          wgmma::commit();
          wgmma::wait<0>();
          // Hop j: the lane adds heads 2j, 2j + 1 of row (tq - j) % 4 (slot j), then passes the
          // partial sums to lane tq + 1 of the quad.
          float pa = 0.0f, pb = 0.0f;
          const int src = (lane & ~3) | ((tq + 3) & 3);
#pragma unroll
          for (int j = 0; j < 16; ++j) {
            if (j > 0) {
              pa = __shfl_sync(0xffffffffu, pa, src);
              pb = __shfl_sync(0xffffffffu, pb, src);
            }
            const float2 w2 = *reinterpret_cast<const float2*>(&ws[4 * gr + ((tq - j) & 3)][2 * j]);
            pa = __fadd_rn(pa, __fmul_rn(__fmul_rn(fmaxf(d[4 * j], 0.0f), scale), w2.x));
            pa = __fadd_rn(pa, __fmul_rn(__fmul_rn(fmaxf(d[4 * j + 1], 0.0f), scale), w2.y));
            pb = __fadd_rn(pb, __fmul_rn(__fmul_rn(fmaxf(d[4 * j + 2], 0.0f), scale), w2.x));
            pb = __fadd_rn(pb, __fmul_rn(__fmul_rn(fmaxf(d[4 * j + 3], 0.0f), scale), w2.y));
          }
          const int r = 4 * gr + ((tq + 1) & 3);
          if (table_s[r] == tb) {
            const int64_t sa = s0 + 16 * wi + g, sb = sa + 8;
            float* out = a.scores + score_s[r];
            if (sa < nk_s[r]) out[sa] = pa;
            if (sb < nk_s[r]) out[sb] = pb;
          }
        }
      } else {
        // Not bf16-exact: the grouped-rows kernel's per-warp code (16 keys per warp), with
        // this tile's buffer as the head-sum scratch (no wgmma reads it).
        float* rw = reinterpret_cast<float*>(kbuf + b * kWgTileBytes) + wi * 16 * kRedStride;
        const int64_t sw = s0 + 16 * wi, sa = sw + g, sb = sw + g + 8;
        float2 ra[16], rb[16];
        bool loaded = false;
        for (int r = 0; r < nr; ++r) {
          const int64_t nk = nk_s[r];
          if (table_s[r] != tb || sw >= nk) continue;  // warp-uniform
          if (!loaded) {
            load_keys(a, table, sa, sb, nk_load, tq, ra, rb);
            loaded = true;
          }
          float acc[4][4] = {}, fix[4][4] = {};
          dots_split(ra, rb, a.q + (r_begin + r) * kMmaHeads * kMmaDim, g, tq, acc, fix);
          head_sum_rows(acc, fix, scale, ws[r], rw, g, tq, lane, sw, nk, a.scores + score_s[r]);
        }
        __syncwarp();
      }
    }
    wg_bar(wg);  // the next pass refills both buffers: every warp is done with this pass's tiles
  }
}

// The wgmma kernel is sm_90a code.
bool wgmma_device_ok() { return device_runs_sm90a(); }

}  // namespace

namespace {
std::atomic<int> g_indexer_wgmma{-1};
}  // namespace

void indexer_score_set_wgmma(int mode) { g_indexer_wgmma.store(mode < 0 ? -1 : mode != 0 ? 1 : 0); }

cudaError_t indexer_score_paged(const PagedIndexerScoreArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.heads <= 0 || a.head_dim <= 0 || a.head_dim % 4 != 0 || a.entries_per_block <= 0 ||
      a.max_keys < 0)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.max_keys == 0) return cudaSuccess;
  if (!a.q || !a.w || !a.keys || !a.tables || !a.row_info || !a.scores) return cudaErrorInvalidValue;
  const bool mma_shape = a.heads == kMmaHeads && a.head_dim == kMmaDim;
  if ((a.path == IndexerScorePath::kMma || a.path == IndexerScorePath::kMmaRows ||
       a.path == IndexerScorePath::kWgmma) && !mma_shape)
    return cudaErrorInvalidValue;
  if (a.positions != nullptr && a.ratio <= 0) return cudaErrorInvalidValue;
  // The wgmma kernel: forced, or under kAuto at prefill sizes unless DEEPINFER_INDEXER_WGMMA=0
  // (NOTES 43: bitwise kMmaRows on every op case, 2.7x faster, the 8K prefill -9.9 ms; the
  // default since run 33's logits A/B), on compute capability 9.0 (sm_90a code).
  static const bool wgmma_env = [] {
    const EnvDigit e = env_digit("DEEPINFER_INDEXER_WGMMA", 0, 1);  // invalid: the model refuses it at load
    return !(e.valid && e.value == 0);
  }();
  const int forced = g_indexer_wgmma.load(std::memory_order_relaxed);
  const bool wgmma_auto = forced < 0 ? wgmma_env : forced == 1;
  // kAuto never picks it on another device (the grouped kernel runs there); forced, it fails.
  const bool use_wgmma = mma_shape && (a.path == IndexerScorePath::kWgmma ||
                                       (a.path == IndexerScorePath::kAuto && wgmma_auto && a.rows >= 1024 &&
                                        wgmma_device_ok()));
  if (use_wgmma) {
    if (!wgmma_device_ok()) return cudaErrorInvalidDeviceFunction;
    static const cudaError_t attr = cudaFuncSetAttribute(indexer_score_wgmma_kernel,
                                                         cudaFuncAttributeMaxDynamicSharedMemorySize, int(kWgSmem));
    if (attr != cudaSuccess) return attr;
    // One block per 16 rows over all their keys (q staged once), unless that leaves fewer
    // than two blocks per SM: then the keys split into chunks of a multiple of 128.
    for (int64_t r0 = 0; r0 < a.rows; r0 += kMaxGridY * kWgRows) {
      const int64_t n = std::min(kMaxGridY * kWgRows, a.rows - r0), blocks = (n + kWgRows - 1) / kWgRows;
      const int64_t chunks = std::min<int64_t>((264 + blocks - 1) / blocks, (a.max_keys + 127) / 128);
      const int64_t chunk = ((a.max_keys + chunks - 1) / chunks + 127) / 128 * 128;
      const dim3 grid(unsigned((a.max_keys + chunk - 1) / chunk), unsigned(blocks));
      indexer_score_wgmma_kernel<<<grid, kWgThreads, kWgSmem, stream>>>(a, r0, chunk, blocks);
    }
    return cudaGetLastError();
  }
  if (mma_shape && a.path != IndexerScorePath::kSimt) {
    // Keys per block: 64 .. 512, as below (the split does not change any score's bits).
    // Prefill-sized calls take the grouped-rows kernel (same bits, see above): from
    // 1024 rows, where a chunk's rows share their keys; decode batches keep one row per
    // block (their rows are different sequences, nothing to share).
    const bool grouped = a.path == IndexerScorePath::kMmaRows || (a.path == IndexerScorePath::kAuto && a.rows >= 1024);
    const int64_t units = grouped ? (a.rows + kGroupRows - 1) / kGroupRows : a.rows;
    int64_t tile = kMmaKeys;
    while (tile < 8 * kMmaKeys && units * ((a.max_keys + 2 * tile - 1) / (2 * tile)) >= 2048) tile *= 2;
    const unsigned tiles = unsigned((a.max_keys + tile - 1) / tile);
    if (grouped) {
      for (int64_t r0 = 0; r0 < a.rows; r0 += kMaxGridY * kGroupRows) {
        const int64_t n = std::min(kMaxGridY * kGroupRows, a.rows - r0);
        const dim3 grid(tiles, unsigned((n + kGroupRows - 1) / kGroupRows));
        indexer_score_mma_rows_kernel<<<grid, kMmaWarps * 32, 0, stream>>>(a, r0, tile);
      }
      return cudaGetLastError();
    }
    for (int64_t r0 = 0; r0 < a.rows; r0 += kMaxGridY) {
      const dim3 grid(tiles, unsigned(std::min(kMaxGridY, a.rows - r0)));
      indexer_score_mma_kernel<<<grid, kMmaWarps * 32, 0, stream>>>(a, r0, tile);
    }
    return cudaGetLastError();
  }
  const size_t smem = sizeof(float4) * size_t(a.heads * (a.head_dim / 4 + 1) + (a.heads + 3) / 4 +
                                              kWarps * kPagedKeysPerWarp * (a.head_dim / 4));
  if (smem > 200 * 1024) return cudaErrorInvalidValue;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(indexer_score_paged_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
  }
  // Keys per block: 64 .. 512, the largest that still leaves >= 2048 blocks (~4 waves of
  // 4 blocks on 132 SMs), so small batches keep every SM busy and large ones stage each
  // query fewer times. Only the work split changes, not any score's arithmetic.
  int64_t tile = kPagedChunk;
  while (tile < 8 * kPagedChunk && a.rows * ((a.max_keys + 2 * tile - 1) / (2 * tile)) >= 2048) tile *= 2;
  const unsigned tiles = unsigned((a.max_keys + tile - 1) / tile);
  for (int64_t r0 = 0; r0 < a.rows; r0 += kMaxGridY) {
    const dim3 grid(tiles, unsigned(std::min(kMaxGridY, a.rows - r0)));
    indexer_score_paged_kernel<<<grid, kWarps * 32, smem, stream>>>(a, r0, tile);
  }
  return cudaGetLastError();
}

cudaError_t indexer_mask_ragged(const RaggedMaskArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.max_keys < 0 || a.ratio <= 0) return cudaErrorInvalidValue;
  if (a.rows == 0 || a.max_keys == 0) return cudaSuccess;
  if (!a.scores || !a.row_info || !a.positions) return cudaErrorInvalidValue;
  const unsigned tiles = unsigned((a.max_keys + 255) / 256);
  for (int64_t r0 = 0; r0 < a.rows; r0 += kMaxGridY)
    indexer_mask_ragged_kernel<<<dim3(tiles, unsigned(std::min(kMaxGridY, a.rows - r0))), 256, 0, stream>>>(a, r0);
  return cudaGetLastError();
}

cudaError_t block_max_ragged(const RaggedBlockMaxArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.max_keys < 0 || a.block_size <= 0 || a.ratio <= 0) return cudaErrorInvalidValue;
  if (a.rows == 0) return cudaSuccess;
  if (!a.scores || !a.row_info || !a.positions || !a.out || !a.num_blocks) return cudaErrorInvalidValue;
  const int64_t nb = std::max<int64_t>(1, (a.max_keys + a.block_size - 1) / a.block_size);
  const unsigned tiles = unsigned((nb + 255) / 256);
  for (int64_t r0 = 0; r0 < a.rows; r0 += kMaxGridY)
    block_max_ragged_kernel<<<dim3(tiles, unsigned(std::min(kMaxGridY, a.rows - r0))), 256, 0, stream>>>(a, r0);
  return cudaGetLastError();
}

cudaError_t candidate_mask_ragged(const RaggedCandidateMaskArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.k < 0 || a.max_keys < 0 || a.block_size <= 0) return cudaErrorInvalidValue;
  if (a.rows == 0 || a.max_keys == 0) return cudaSuccess;
  if (!a.mask || !a.row_info || (a.k > 0 && !a.block_ids)) return cudaErrorInvalidValue;
  const int64_t words = ((a.max_keys + a.block_size - 1) / a.block_size + 31) / 32;
  const size_t smem = sizeof(uint32_t) * size_t(words);
  if (smem > 200 * 1024) return cudaErrorInvalidValue;
  if (smem > 48 * 1024) {
    const cudaError_t e =
        cudaFuncSetAttribute(candidate_mask_ragged_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
    if (e != cudaSuccess) return e;
  }
  for (int64_t r0 = 0; r0 < a.rows; r0 += INT32_MAX)
    candidate_mask_ragged_kernel<<<unsigned(std::min<int64_t>(INT32_MAX, a.rows - r0)), 256, smem, stream>>>(a, r0);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
