#include <algorithm>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_indexer.cuh"

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

cudaError_t indexer_score_paged(const PagedIndexerScoreArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.heads <= 0 || a.head_dim <= 0 || a.head_dim % 4 != 0 || a.entries_per_block <= 0 ||
      a.max_keys < 0)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.max_keys == 0) return cudaSuccess;
  if (!a.q || !a.w || !a.keys || !a.tables || !a.row_info || !a.scores) return cudaErrorInvalidValue;
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
