// Sink attention's entry (smxx_attention.cuh): the argument checks and the choice of
// kernel; the kernels and their launchers are smxx_attention_{simt,tc,wgmma,small}.cu
// (smxx_attention_common.cuh lists them).
#include <atomic>
#include <climits>

#include "kernels/cuda/smxx_attention_common.cuh"

namespace deepinfer::kernels {
namespace {

std::atomic<int> g_bf16_path{int(AttnBf16Path::kAuto)};

}  // namespace

void sink_attention_set_bf16_path(AttnBf16Path p) { g_bf16_path.store(int(p)); }
AttnBf16Path sink_attention_bf16_path() { return AttnBf16Path(g_bf16_path.load()); }

cudaError_t sink_attention(const SinkAttentionArgs& a, cudaStream_t stream) {
  if (a.n < 0 || a.heads <= 0 || a.dim <= 0 || a.dim > kAttnMaxDim || a.heads > INT_MAX) return cudaErrorInvalidValue;
  if (a.n == 0) return cudaSuccess;
  if (!a.q || !a.kv || !a.offsets || !a.ids || !a.sink || !a.out) return cudaErrorInvalidValue;
  if (a.path < 0 || a.path > 2 || a.kv_rows < 0) return cudaErrorInvalidValue;
  const bool small_kernel = a.path >= 2 || (a.path == 1 && a.n <= attention_small_max_n(a.bf16));
  if (a.rope_dim != 0) {  // RoPE folded in: the small-batch kernel only
    if (!small_kernel || a.rope_dim < 0 || a.rope_dim % 2 != 0 || a.rope_dim > a.dim || a.dim % 2 != 0 ||
        !a.positions || !a.inv_freq)
      return cudaErrorInvalidValue;
  }
  if (small_kernel) return attn::small::launch(a, stream);
  if (a.bf16) {
    // One order for every n (batch-invariant): the mma.sync kernel, or the wgmma kernel
    // where the bf16 copy of kv pays for itself: every kv row gathered by ~4+ queries on
    // average (kv_rows <= 32 n at >= 128 entries per query; a prefill chunk: 12K rows for
    // 8192 queries). At decode every query has its own rows (batch 256: 164K rows), and
    // the copy would add a read and a write of each. The two kernels compute the same
    // chains in the same order (smxx_attention_wgmma.cu), so the choice changes no bit.
    const AttnBf16Path path = sink_attention_bf16_path();
    const bool wg_ok = a.kv_rows > 0 && attn::wg::device_ok();
    if (wg_ok && path == AttnBf16Path::kWgmmaOverlap) return attn::wg::launch<true>(a, stream);
    if (wg_ok && (path == AttnBf16Path::kWgmma || (path == AttnBf16Path::kAuto && a.kv_rows <= 32 * a.n)))
      return attn::wg::launch<false>(a, stream);
    return attn::tc::launch(a, stream);
  }
  // f32: the SIMT kernel (it picks its block shape from the batch, with the same bits).
  return attn::simt::launch(a, stream);
}

}  // namespace deepinfer::kernels
