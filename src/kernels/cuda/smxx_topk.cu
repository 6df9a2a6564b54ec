#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_topk.cuh"

namespace deepinfer::kernels {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

// Larger float -> larger key. -0 is folded onto +0 because the oracle compares with
// ==, under which they tie (and then the lower index wins).
__device__ __forceinline__ uint32_t order_key(float f) {
  uint32_t u = __float_as_uint(f);
  if (u == 0x80000000u) u = 0;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Exclusive prefix of `flag` over the block in thread order, plus the block total.
// scratch: kWarps ints. Ends with a barrier, so scratch may be reused right away.
__device__ __forceinline__ int block_exclusive_count(bool flag, int* scratch, int* total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned ballot = __ballot_sync(0xffffffffu, flag);
  int before = __popc(ballot & ((1u << lane) - 1u));
  if (lane == 0) scratch[warp] = __popc(ballot);
  __syncthreads();
  int sum = 0, all = 0;
  for (int w = 0; w < kWarps; ++w) {
    const int c = scratch[w];
    if (w < warp) sum += c;
    all += c;
  }
  __syncthreads();
  *total = all;
  return before + sum;
}

__global__ void __launch_bounds__(kThreads) topk_kernel(TopkArgs a) {
  __shared__ int hist[256];
  __shared__ int scan[kWarps];
  __shared__ uint32_t sh_prefix;
  __shared__ int sh_remaining;
  const int64_t row = blockIdx.x;
  const float* v = a.v + (a.row_begin != nullptr ? a.row_begin[row * a.row_stride] : row * a.ld);
  const int64_t size = a.row_size != nullptr ? a.row_size[row * a.row_stride] : a.size;
  int64_t* out = a.ids + row * a.k;

  // Finite (not -inf) entries; if they all fit, keep them all.
  int live = 0;
  for (int64_t i = threadIdx.x; i < size; i += kThreads) live += v[i] != -INFINITY;
  for (int o = 16; o > 0; o >>= 1) live += __shfl_xor_sync(0xffffffffu, live, o);
  if ((threadIdx.x & 31) == 0) scan[threadIdx.x >> 5] = live;
  __syncthreads();
  live = 0;
  for (int w = 0; w < kWarps; ++w) live += scan[w];
  __syncthreads();
  const bool take_all = live <= a.k;

  uint32_t prefix = 0;
  int remaining = int(a.k);
  if (!take_all) {
    // Radix select: digit by digit from the top, keep the bin where the k-th
    // largest key lies; `remaining` counts how many still have to come from it.
    for (int shift = 24; shift >= 0; shift -= 8) {
      const uint32_t mask_hi = shift == 24 ? 0u : (0xffffffffu << (shift + 8));
      for (int b = threadIdx.x; b < 256; b += kThreads) hist[b] = 0;
      __syncthreads();
      for (int64_t i = threadIdx.x; i < size; i += kThreads) {
        const uint32_t key = order_key(v[i]);
        if ((key & mask_hi) == prefix) atomicAdd(&hist[(key >> shift) & 0xff], 1);
      }
      __syncthreads();
      if (threadIdx.x < 32) {
        // Lane l owns bins 255 - 8l down to 248 - 8l (descending); a suffix count
        // across lanes finds the bin that holds the remaining-th largest key.
        const int lane = threadIdx.x;
        int own = 0;
        for (int j = 0; j < 8; ++j) own += hist[255 - 8 * lane - j];
        int incl = own;
        for (int o = 1; o < 32; o <<= 1) {
          const int up = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= o) incl += up;
        }
        const int excl = incl - own;
        if (excl < remaining && remaining <= incl) {
          int acc = excl;
          for (int j = 0; j < 8; ++j) {
            const int bin = 255 - 8 * lane - j, c = hist[bin];
            if (acc + c >= remaining) {
              sh_prefix = prefix | (uint32_t(bin) << shift);
              sh_remaining = remaining - acc;
              break;
            }
            acc += c;
          }
        }
      }
      __syncthreads();
      prefix = sh_prefix;
      remaining = sh_remaining;
      __syncthreads();
    }
  }

  // Ordered emission: key > T always; key == T while the ties still fit.
  int eq_base = 0, out_base = 0;
  for (int64_t c0 = 0; c0 < size; c0 += kThreads) {
    const int64_t i = c0 + threadIdx.x;
    const bool in = i < size;
    const float f = in ? v[i] : -INFINITY;
    const uint32_t key = order_key(f);
    bool sel;
    if (take_all) {
      sel = in && f != -INFINITY;
    } else {
      const bool eq = in && key == prefix;
      int eq_total;
      const int eq_rank = eq_base + block_exclusive_count(eq, scan, &eq_total);
      eq_base += eq_total;
      sel = in && (key > prefix || (eq && eq_rank < remaining));
    }
    int sel_total;
    const int pos = out_base + block_exclusive_count(sel, scan, &sel_total);
    if (sel) out[pos] = i;
    out_base += sel_total;
  }
  for (int64_t j = out_base + threadIdx.x; j < a.k; j += kThreads) out[j] = -1;
  if (a.counts != nullptr && threadIdx.x == 0) a.counts[row] = out_base;
}

}  // namespace

cudaError_t topk_rows(const TopkArgs& a, cudaStream_t stream) {
  if (a.rows < 0 || a.size < 0 || a.k < 0 || a.ld < a.size || a.rows > INT32_MAX || a.k > INT32_MAX ||
      a.size > INT32_MAX)
    return cudaErrorInvalidValue;
  if (a.rows == 0 || a.k == 0) return cudaSuccess;
  if (a.v == nullptr || a.ids == nullptr || a.row_stride < 1) return cudaErrorInvalidValue;
  topk_kernel<<<unsigned(a.rows), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

}  // namespace deepinfer::kernels
