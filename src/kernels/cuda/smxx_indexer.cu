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

}  // namespace deepinfer::kernels
