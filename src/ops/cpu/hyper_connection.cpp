#include <cmath>
#include <vector>

#include "common/parallel.h"
#include "ops/hyper_connection.h"

namespace deepinfer::ops::cpu {

static float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }

void hc_mixes(const HcMixesParams& p) {
  const int64_t hc = p.hc, width = hc * p.dim, num_mix = (2 + hc) * hc;
  parallel_for(p.n, [&](int64_t t0, int64_t t1) {
    std::vector<float> flat(width), mix(num_mix);
    for (int64_t t = t0; t < t1; ++t) {
      const float* h = p.h + t * width;
      double ss = 0.0;
      for (int64_t i = 0; i < width; ++i) ss += double(h[i]) * double(h[i]);
      float r = 1.0f / std::sqrt(float(ss / double(width)) + p.norm_eps);
      for (int64_t i = 0; i < width; ++i) flat[i] = h[i] * r;
      for (int64_t m = 0; m < num_mix; ++m) {
        const float* row = p.fn + m * width;
        double acc = 0.0;
        for (int64_t i = 0; i < width; ++i) acc += double(flat[i]) * double(row[i]);
        mix[m] = float(acc);
      }
      float* pre = p.pre + t * hc;
      float* post = p.post + t * hc;
      float* c = p.comb + t * hc * hc;
      for (int64_t k = 0; k < hc; ++k) {
        pre[k] = sigmoid(mix[k] * p.scale[0] + p.base[k]) + p.hc_eps;
        post[k] = 2.0f * sigmoid(mix[hc + k] * p.scale[1] + p.base[hc + k]);
      }
      for (int64_t j = 0; j < hc; ++j) {
        // Softmax over k within row j, then + eps.
        float* row = c + j * hc;
        float mx = -INFINITY;
        for (int64_t k = 0; k < hc; ++k) {
          row[k] = mix[2 * hc + j * hc + k] * p.scale[2] + p.base[2 * hc + j * hc + k];
          mx = std::max(mx, row[k]);
        }
        float sum = 0.0f;
        for (int64_t k = 0; k < hc; ++k) {
          row[k] = std::exp(row[k] - mx);
          sum += row[k];
        }
        for (int64_t k = 0; k < hc; ++k) row[k] = row[k] / sum + p.hc_eps;
      }
      auto column_step = [&] {
        for (int64_t k = 0; k < hc; ++k) {
          float s = 0.0f;
          for (int64_t j = 0; j < hc; ++j) s += c[j * hc + k];
          for (int64_t j = 0; j < hc; ++j) c[j * hc + k] /= (s + p.hc_eps);
        }
      };
      auto row_step = [&] {
        for (int64_t j = 0; j < hc; ++j) {
          float s = 0.0f;
          for (int64_t k = 0; k < hc; ++k) s += c[j * hc + k];
          for (int64_t k = 0; k < hc; ++k) c[j * hc + k] /= (s + p.hc_eps);
        }
      };
      column_step();
      for (int64_t it = 0; it + 1 < p.sinkhorn_iters; ++it) {
        row_step();
        column_step();
      }
    }
  });
}

void hc_collapse(const HcCollapseParams& p) {
  for (int64_t t = 0; t < p.n; ++t) {
    const float* pre = p.pre + t * p.hc;
    for (int64_t d = 0; d < p.dim; ++d) {
      float acc = 0.0f;
      for (int64_t k = 0; k < p.hc; ++k) acc += pre[k] * p.h[(t * p.hc + k) * p.dim + d];
      p.x[t * p.dim + d] = acc;
    }
  }
}

void hc_expand(const HcExpandParams& p) {
  std::vector<float> old(p.hc);
  for (int64_t t = 0; t < p.n; ++t) {
    const float* post = p.post + t * p.hc;
    const float* c = p.comb + t * p.hc * p.hc;
    float* h = p.h + t * p.hc * p.dim;
    for (int64_t d = 0; d < p.dim; ++d) {
      for (int64_t j = 0; j < p.hc; ++j) old[j] = h[j * p.dim + d];
      for (int64_t k = 0; k < p.hc; ++k) {
        float mixed = 0.0f;
        for (int64_t j = 0; j < p.hc; ++j) mixed += c[j * p.hc + k] * old[j];
        h[k * p.dim + d] = post[k] * p.y[t * p.dim + d] + mixed;
      }
    }
  }
}

}  // namespace deepinfer::ops::cpu
