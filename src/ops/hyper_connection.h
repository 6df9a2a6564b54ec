// Manifold-constrained hyper-connections (mHC), MODEL_V41.md §2.3-2.4. The residual
// state of a token is hc streams of width dim. At each site one projection of the
// RMS-normalized flattened state yields:
//   pre  [hc]      collapse weights (consumed one site later in V4.1),
//   post [hc]      how much of the sublayer output each stream receives,
//   comb [hc, hc]  a Sinkhorn-projected (doubly stochastic) stream mixing matrix,
// and expand computes h_new[k] = post[k] * y + sum_j comb[j][k] * h_old[j].
#pragma once

#include <cstdint>

namespace deepinfer::ops {

struct HcMixesParams {
  const float* h = nullptr;   // [n, hc * dim] token states
  int64_t n = 0, hc = 4, dim = 0;
  const float* fn = nullptr;     // [(2 + hc) * hc, hc * dim]
  const float* base = nullptr;   // [(2 + hc) * hc]
  const float* scale = nullptr;  // [3]
  float norm_eps = 1e-20f;       // the input RMS norm uses rms_norm_eps
  float hc_eps = 1e-6f;
  int64_t sinkhorn_iters = 20;
  float* pre = nullptr;   // [n, hc]
  float* post = nullptr;  // [n, hc]
  float* comb = nullptr;  // [n, hc, hc], row j, column k
};

struct HcCollapseParams {
  const float* h = nullptr;    // [n, hc, dim]
  const float* pre = nullptr;  // [n, hc]
  float* x = nullptr;          // [n, dim]
  int64_t n = 0, hc = 4, dim = 0;
};

struct HcExpandParams {
  float* h = nullptr;           // [n, hc, dim], updated in place
  const float* y = nullptr;     // [n, dim] sublayer output
  const float* post = nullptr;  // [n, hc]
  const float* comb = nullptr;  // [n, hc, hc]
  int64_t n = 0, hc = 4, dim = 0;
};

namespace cpu {
void hc_mixes(const HcMixesParams& p);
void hc_collapse(const HcCollapseParams& p);
void hc_expand(const HcExpandParams& p);
}  // namespace cpu

}  // namespace deepinfer::ops
