#include "kernels/cuda/smxx_attention.cuh"
#include "kernels/cuda/smxx_common.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kHeadsPerBlock = 8;  // one warp per head
constexpr int kTile = 16;          // entries staged per round: 16 x 512 x 4 B = 32 KB
constexpr int kPerLane = int(kAttnMaxDim / 32);

// Grid (n, ceil(heads / 8)). Lane l owns channels l, l + 32, ... so reads of the
// staged rows are conflict-free. The softmax state starts at the sink: running
// max = sink, denominator = exp(0) = 1, accumulator = 0.
__global__ void __launch_bounds__(kHeadsPerBlock * 32) sink_attention_kernel(SinkAttentionArgs a) {
  extern __shared__ float tile[];  // [kTile][dim]
  const int64_t t = blockIdx.x;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t h = int64_t(blockIdx.y) * kHeadsPerBlock + warp;
  const bool active = h < a.heads;
  const int dim = int(a.dim);

  float q[kPerLane], acc[kPerLane];
  const float* qh = a.q + (t * a.heads + (active ? h : 0)) * a.dim;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    q[i] = d < dim ? qh[d] * a.scale : 0.0f;  // folding scale into q changes rounding slightly
    acc[i] = 0.0f;
  }
  float m = active ? a.sink[h] : 0.0f, l = 1.0f;

  const int64_t b = a.offsets[t], e = a.offsets[t + 1];
  for (int64_t j0 = b; j0 < e; j0 += kTile) {
    const int cnt = int(e - j0 < kTile ? e - j0 : kTile);
    __syncthreads();  // the previous tile is fully consumed
    for (int i = threadIdx.x; i < cnt * dim; i += blockDim.x) {
      const int r = i / dim, d = i % dim;
      tile[i] = a.kv[a.ids[j0 + r] * a.dim + d];
    }
    __syncthreads();
    if (!active) continue;
    for (int r = 0; r < cnt; ++r) {
      const float* row = tile + r * dim;
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < dim) dot += q[i] * row[d];
      }
      const float logit = warp_sum(dot);
      const float m_new = fmaxf(m, logit);
      const float corr = expf(m - m_new), p = expf(logit - m_new);
      l = l * corr + p;
#pragma unroll
      for (int i = 0; i < kPerLane; ++i) {
        const int d = lane + 32 * i;
        if (d < dim) acc[i] = acc[i] * corr + p * row[d];
      }
      m = m_new;
    }
  }
  if (!active) return;
  float* o = a.out + (t * a.heads + h) * a.dim;
  const float inv = 1.0f / l;
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < dim) o[d] = acc[i] * inv;
  }
}

}  // namespace

cudaError_t sink_attention(const SinkAttentionArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.heads <= 0 || a.dim <= 0 || a.dim > kAttnMaxDim || a.n > INT32_MAX) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.q || !a.kv || !a.offsets || !a.ids || !a.sink || !a.out) return cudaErrorInvalidValue;
  const size_t smem = size_t(kTile) * size_t(a.dim) * sizeof(float);
  const dim3 grid(unsigned(a.n), unsigned((a.heads + kHeadsPerBlock - 1) / kHeadsPerBlock));
  sink_attention_kernel<<<grid, kHeadsPerBlock * 32, smem, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
