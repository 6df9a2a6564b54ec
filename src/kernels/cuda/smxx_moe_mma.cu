// The big-tile path of the grouped MoE (smxx_moe.cuh): linear's 3-term bf16
// tensor-core block (smxx_linear_mma.cuh) run over a tile list, one launch per weight
// of the step (w1, w3, w2) for all experts, with per-K-step promotion of the
// accumulator (fp32-rounded sums; first version without it: 1.8e-4 of the output RMS
// against the CPU op at n = 256, the truncation bias of 160 chained MMA accumulations;
// with it 2.9e-6). Its own file: the mma template is heavy to compile and this keeps smxx_moe.cu's rebuilds short.
#include "kernels/cuda/smxx_linear_mma.cuh"
#include "kernels/cuda/smxx_moe.cuh"

namespace deepinfer::kernels {
namespace {

// Grid (big tile, 64-row block of the weight). which: 0 = w1 -> y, 1 = w3 -> up,
// 2 = w2 (x = h rows of the tile) -> y.
template <WFormat F>
__global__ void __launch_bounds__(mma::kThreads) moe_mma_kernel(MoeGroupedArgs g, int which, int scale_shift) {
  if (int64_t(blockIdx.x) >= *g.num_tiles) return;
  const MoeTile tile = g.tiles[blockIdx.x];
  const MoeExpertPtrs& ex = g.experts[tile.expert];
  LinearArgs a;
  a.w = which == 2 ? g.w2 : g.w13;
  a.w.data = ex.w[which];
  a.w.scale = ex.s[which];
  a.n = tile.rows;
  a.row0 = 0;
  a.num_rows = a.w.rows;
  a.y = (which == 1 ? g.up : g.y) + int64_t(tile.row0) * a.num_rows;
  const int32_t* x_rows = nullptr;
  if (which == 2) {
    a.x = g.x + int64_t(tile.row0) * a.w.cols;
  } else {
    a.x = g.x;
    x_rows = g.row_token + tile.row0;
  }
  mma::mma_block<F, /*kPromote=*/true>(a, x_rows, int64_t(blockIdx.y) * mma::kBM, 0, scale_shift);
}

template <WFormat F>
cudaError_t launch_which(const MoeGroupedArgs& g, int which, cudaStream_t stream) {
  const WeightArgs& w = which == 2 ? g.w2 : g.w13;
  int scale_shift = 0;
  if (w.scale_format == SFormat::kE8M0)
    while ((int64_t(1) << scale_shift) < w.block_cols) ++scale_shift;
  const int64_t gy = (w.rows + mma::kBM - 1) / mma::kBM;
  if (gy > 65535 || g.max_tiles > INT32_MAX) return cudaErrorInvalidValue;
  moe_mma_kernel<F><<<dim3(unsigned(g.max_tiles), unsigned(gy)), mma::kThreads, 0, stream>>>(g, which, scale_shift);
  return cudaGetLastError();
}

template <WFormat F>
cudaError_t launch_stage(const MoeGroupedArgs& g, cudaStream_t stream) {
  if (g.stage == 2) return launch_which<F>(g, 2, stream);
  const cudaError_t err = launch_which<F>(g, 0, stream);
  if (err != cudaSuccess) return err;
  return launch_which<F>(g, 1, stream);
}

}  // namespace

cudaError_t moe_mma(const MoeGroupedArgs& g, cudaStream_t stream) {
  if (g.max_tiles <= 0) return cudaSuccess;
  const WeightArgs& w = g.stage == 2 ? g.w2 : g.w13;
  if (!moe_mma_eligible(w) || !g.experts || !g.x || !g.y || !g.tiles || !g.num_tiles ||
      (g.stage == 1 && (!g.row_token || !g.up)))
    return cudaErrorInvalidValue;
  if (w.format == WFormat::kE2M1) return launch_stage<WFormat::kE2M1>(g, stream);
  return launch_stage<WFormat::kE4M3>(g, stream);
}

}  // namespace deepinfer::kernels
