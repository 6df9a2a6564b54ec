// Hyper-connection mixes / collapse / expand and sink attention.
#include <algorithm>
#include <cmath>

#include "harness.h"
#include "ops/attention.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/hyper_connection.h"

namespace deepinfer::testing_cuda {

namespace {

OpCase mixes_case(std::string name, int64_t n, int64_t hc, int64_t dim, int64_t iters) {
  return {name, "hc_mixes", [=](Rng& rng) {
            const int64_t width = hc * dim, num_mix = (2 + hc) * hc;
            const auto h = randn(rng, n * width, 2.0f);
            const auto fn = randn(rng, num_mix * width, 1.0f / std::sqrt(float(width)));
            const auto base = randn(rng, num_mix, 0.5f);
            const auto scale = uniform(rng, 3, 0.5f, 2.0f);
            std::vector<float> pre(n * hc), post(n * hc), comb(n * hc * hc);
            ops::cpu::hc_mixes({h.data(), n, hc, dim, fn.data(), base.data(), scale.data(), 1e-20f, 1e-6f, iters,
                                pre.data(), post.data(), comb.data()});
            Dev<float> dh(h), dfn(fn), dbase(base), dscale(scale), dpre(n * hc), dpost(n * hc), dcomb(n * hc * hc);
            ops::cuda::hc_mixes({dh.get(), n, hc, dim, dfn.get(), dbase.get(), dscale.get(), 1e-20f, 1e-6f, iters,
                                 dpre.get(), dpost.get(), dcomb.get()},
                                nullptr);
            return Outputs{{{"pre", pre, dpre.host()}, {"post", post, dpost.host()}, {"comb", comb, dcomb.host()}}, {}};
          }};
}

OpCase collapse_case(std::string name, int64_t n, int64_t hc, int64_t dim) {
  return {name, "hc_collapse", [=](Rng& rng) {
            const auto h = randn(rng, n * hc * dim);
            const auto pre = uniform(rng, n * hc, 0.0f, 1.0f);
            std::vector<float> x(n * dim);
            ops::cpu::hc_collapse({h.data(), pre.data(), x.data(), n, hc, dim});
            Dev<float> dh(h), dpre(pre), dx(n * dim);
            ops::cuda::hc_collapse({dh.get(), dpre.get(), dx.get(), n, hc, dim}, nullptr);
            return Outputs{{{"x", x, dx.host()}}, {}};
          }};
}

OpCase expand_case(std::string name, int64_t n, int64_t hc, int64_t dim) {
  return {name, "hc_expand", [=](Rng& rng) {
            auto h = randn(rng, n * hc * dim);
            const auto y = randn(rng, n * dim);
            const auto post = uniform(rng, n * hc, 0.0f, 2.0f);
            const auto comb = uniform(rng, n * hc * hc, 0.0f, 0.5f);
            Dev<float> dh(h), dy(y), dpost(post), dcomb(comb);
            ops::cpu::hc_expand({h.data(), y.data(), post.data(), comb.data(), n, hc, dim});
            ops::cuda::hc_expand({dh.get(), dy.get(), dpost.get(), dcomb.get(), n, hc, dim}, nullptr);
            return Outputs{{{"h", h, dh.host()}}, {}};
          }};
}

// Entry lists like the model's: per query a random number of ids (query 0 has
// none), repeats allowed, into a shared pool. Keys are scaled so that the softmax
// is neither flat nor one-hot.
OpCase attention_case(std::string name, int64_t n, int64_t heads, int64_t dim, int64_t pool, int64_t max_entries) {
  return {name, "sink_attention", [=](Rng& rng) {
            const auto q = randn(rng, n * heads * dim);
            const auto kv = randn(rng, pool * dim, 2.0f);
            const auto sink = randn(rng, heads, 2.0f);
            std::vector<int64_t> offsets{0}, ids;
            for (int64_t t = 0; t < n; ++t) {
              const int64_t cnt = t == 0 ? 0 : randint(rng, 1, max_entries);
              for (int64_t j = 0; j < cnt; ++j) ids.push_back(randint(rng, 0, pool - 1));
              offsets.push_back(int64_t(ids.size()));
            }
            const float scale = 1.0f / std::sqrt(float(dim));
            std::vector<float> out(n * heads * dim);
            ops::cpu::sink_attention({q.data(), kv.data(), offsets.data(), ids.data(), sink.data(), scale, out.data(), n,
                                      heads, dim});
            Dev<float> dq(q), dkv(kv), dsink(sink), dout(n * heads * dim);
            Dev<int64_t> doff(offsets), dids(ids.empty() ? std::vector<int64_t>{0} : ids);
            ops::cuda::sink_attention({dq.get(), dkv.get(), doff.get(), dids.get(), dsink.get(), scale, dout.get(), n,
                                       heads, dim},
                                      nullptr);
            return Outputs{{{"out", out, dout.host()}}, {}};
          }};
}

}  // namespace

std::vector<OpCase> hyper_connection_cases() {
  return {
      mixes_case("hc_mixes_v41", 5, 4, 5120, 20),
      mixes_case("hc_mixes_small_hc2", 3, 2, 96, 3),
      collapse_case("hc_collapse_v41", 5, 4, 5120),
      expand_case("hc_expand_v41", 5, 4, 5120),
      expand_case("hc_expand_odd", 3, 3, 77),
  };
}

std::vector<OpCase> attention_cases() {
  return {
      attention_case("sink_attention_v41", 6, 64, 512, 700, 640),
      attention_case("sink_attention_heads12", 4, 12, 512, 300, 200),
      attention_case("sink_attention_dim100", 5, 3, 100, 50, 40),
  };
}

}  // namespace deepinfer::testing_cuda
