// Hyper-connection mixes / collapse / expand and sink attention.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>

#include "former_kernels.h"
#include "harness.h"
#include "kernels/cuda/smxx_attention.cuh"
#include "kernels/cuda/smxx_hyper_connection.cuh"
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

// kernels::hc_mixes_collapse_norm (the decode layer's mixes + collapse + norm in two
// launches) against hc_mixes then hc_collapse_norm, bitwise: pre / post / comb of the
// mixes and the normalized collapse, which uses the other site's weights (pre_prev).
// With `expand`, kernels::hc_expand_mixes_collapse_norm against hc_expand first (its
// post / comb are the buffers the mixes then overwrite, as in the layer), h compared too.
// With `one_launch`, the fused call gets HcMixesArgs::counters (the one-launch site where
// the shape allows: n <= 8, splits of <= 128 columns) and runs twice on the same counters
// (the second launch finds them zero again, so its results are checked too), and the
// counters must be zero afterwards. With `defer` (one launch only), HcMixesArgs::defer_finish:
// the site leaves the finish to kernels::hc_mixes_finish, called after it (NOTES 51). `site` 2:
// HcMixesArgs::wide (the wide site and its finish, NOTES 55), 3: also pdl (a programmatic
// dependent launch, on a stream of the case's own).
OpCase mixes_collapse_norm_case(std::string name, int64_t n, int64_t hc, int64_t dim, int64_t iters, bool weight,
                                bool expand = false, bool one_launch = false, bool defer = false, int site = 0) {
  return {name, "fused", [=](Rng& rng) {
            const int64_t width = hc * dim, num_mix = (2 + hc) * hc;
            const auto h = randn(rng, n * width, 2.0f);
            const auto fn = randn(rng, num_mix * width, 1.0f / std::sqrt(float(width)));
            const auto base = randn(rng, num_mix, 0.5f);
            const auto scale = uniform(rng, 3, 0.5f, 2.0f);
            const auto pre_prev = uniform(rng, n * hc, 0.0f, 1.0f);
            const auto w = uniform(rng, dim, 0.5f, 1.5f);
            const auto y = randn(rng, n * dim);
            const auto post0 = uniform(rng, n * hc, 0.0f, 2.0f);
            const auto comb0 = uniform(rng, n * hc * hc, 0.0f, 0.5f);
            Dev<float> dfn(fn), dbase(base), dscale(scale), dprev(pre_prev), dw(w), dy(y);
            Dev<float> ws(kernels::hc_mixes_workspace_floats(n, hc, dim));
            cudaStream_t st = nullptr;
            if (site == 3) check_cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "stream");
            const auto sync = [&] { check_cuda(st ? cudaStreamSynchronize(st) : cudaDeviceSynchronize(), "sync"); };
            struct Out {
              std::vector<float> pre, post, comb, x, h;
            };
            Dev<unsigned> counters(std::vector<unsigned>(size_t(n), 0u));
            bool deferred_site_left_pre = true;
            auto run = [&](bool fused) {
              Dev<float> dh(h), dpre(n * hc), dpost(post0), dcomb(comb0), dx(n * dim);
              const kernels::HcExpandArgs e{dh.get(), dy.get(), dpost.get(), dcomb.get(), n, hc, dim};
              kernels::HcMixesArgs m;
              m.h = dh.get();
              m.fn = dfn.get();
              m.base = dbase.get();
              m.scale = dscale.get();
              m.n = n;
              m.hc = hc;
              m.dim = dim;
              m.norm_eps = 1e-20f;
              m.hc_eps = 1e-6f;
              m.sinkhorn_iters = iters;
              m.pre = dpre.get();
              m.post = dpost.get();
              m.comb = dcomb.get();
              m.workspace = ws.get();
              if (fused && one_launch) m.counters = counters.get();
              if (fused && one_launch) m.defer_finish = defer;
              if (fused && one_launch) m.wide = site >= 2, m.pdl = site == 3;
              const kernels::HcCollapseNormArgs cn{dh.get(), dprev.get(), weight ? dw.get() : nullptr, dx.get(), n, hc,
                                                   dim, 1e-6f};
              if (fused && one_launch) {
                // A first launch on copies of the inputs (its outputs dropped), so the
                // measured one reuses counters a launch has already used.
                Dev<float> h2(h), pre2(n * hc), post2(post0), comb2(comb0), x2(n * dim);
                kernels::HcMixesArgs m2 = m;
                m2.h = h2.get(), m2.pre = pre2.get(), m2.post = post2.get(), m2.comb = comb2.get();
                kernels::HcCollapseNormArgs cn2 = cn;
                cn2.h = h2.get(), cn2.x = x2.get();
                const kernels::HcExpandArgs e2{h2.get(), dy.get(), post2.get(), comb2.get(), n, hc, dim};
                check_cuda(expand ? kernels::hc_expand_mixes_collapse_norm(e2, m2, cn2, st)
                                  : kernels::hc_mixes_collapse_norm(m2, cn2, st),
                           "one-launch warm-up");
                // The finish gets what the site got (the workspace layout follows m.wide where
                // the site applies, which the caller knows: the model sets it from the same test).
                if (defer) {
                  if (!kernels::hc_site_one_launch_applies(m2, cn2)) m2.wide = false;
                  check_cuda(kernels::hc_mixes_finish(m2, st), "hc_mixes_finish (warm-up)");
                }
                sync();
              }
              const std::vector<float> pre_before = dpre.host();
              if (fused && expand) {
                check_cuda(kernels::hc_expand_mixes_collapse_norm(e, m, cn, st), "hc_expand_mixes_collapse_norm");
              } else if (fused) {
                check_cuda(kernels::hc_mixes_collapse_norm(m, cn, st), "hc_mixes_collapse_norm");
              }
              sync();
              if (fused && defer) {
                // Only where the one-launch site ran (elsewhere the flag is ignored and the
                // two launches finish the mixes themselves).
                if (kernels::hc_site_one_launch_applies(m, cn)) {
                  // The site itself must have left the finish's outputs alone.
                  // (bytes, not floats: Dev's poison is a NaN pattern)
                  const std::vector<float> after = dpre.host();
                  deferred_site_left_pre =
                      std::memcmp(after.data(), pre_before.data(), after.size() * sizeof(float)) == 0;
                  check_cuda(kernels::hc_mixes_finish(m, st), "hc_mixes_finish");
                  sync();
                }
              } else if (!fused) {
                if (expand) check_cuda(kernels::hc_expand(e, nullptr), "hc_expand");
                check_cuda(kernels::hc_mixes(m, nullptr), "hc_mixes");
                check_cuda(kernels::hc_collapse_norm(cn, nullptr), "hc_collapse_norm");
              }
              return Out{dpre.host(), dpost.host(), dcomb.host(), dx.host(), dh.host()};
            };
            const Out seq = run(false), fused = run(true);
            if (st) cudaStreamDestroy(st);
            // The collapse weights may not be one of the mixes' outputs (the sequence
            // would collapse with the new weights): rejected before any launch.
            Dev<float> dh(h);
            kernels::HcMixesArgs bad;
            bad.h = dh.get(), bad.fn = dfn.get(), bad.base = dbase.get(), bad.scale = dscale.get();
            bad.n = n, bad.hc = hc, bad.dim = dim, bad.pre = dprev.get(), bad.workspace = ws.get();
            Dev<float> dpost(n * hc), dcomb(n * hc * hc), dx(n * dim);
            bad.post = dpost.get(), bad.comb = dcomb.get();
            const cudaError_t rejected = kernels::hc_mixes_collapse_norm(
                bad, {dh.get(), dprev.get(), nullptr, dx.get(), n, hc, dim, 1e-6f}, nullptr);
            const std::vector<unsigned> left = counters.host();
            const bool zero = std::all_of(left.begin(), left.end(), [](unsigned v) { return v == 0u; });
            return Outputs{{{"pre", seq.pre, fused.pre},
                            {"post", seq.post, fused.post},
                            {"comb", seq.comb, fused.comb},
                            {"x", seq.x, fused.x},
                            {"h", seq.h, fused.h}},
                           {{"aliased_pre_rejected", {1}, {rejected == cudaErrorInvalidValue ? 1 : 0}},
                            {"counters_left_zero", {1}, {zero ? 1 : 0}},
                            {"deferred_site_left_pre", {1}, {deferred_site_left_pre ? 1 : 0}}}};
          }};
}

// The mixes' finish on one warp (finish_variant 0, the default) against the former
// one-thread finish (1), bitwise: pre / post / comb, through hc_mixes or (fused) through
// hc_mixes_collapse_norm, whose finish blocks run the same code.
OpCase mixes_finish_ab_case(std::string name, int64_t n, int64_t hc, int64_t dim, int64_t iters, bool fused) {
  return {name, "former", [=](Rng& rng) {
            const int64_t width = hc * dim, num_mix = (2 + hc) * hc;
            const auto h = randn(rng, n * width, 2.0f);
            const auto fn = randn(rng, num_mix * width, 1.0f / std::sqrt(float(width)));
            const auto base = randn(rng, num_mix, 0.5f);
            const auto scale = uniform(rng, 3, 0.5f, 2.0f);
            const auto pre_prev = uniform(rng, n * hc, 0.0f, 1.0f);
            Dev<float> dh(h), dfn(fn), dbase(base), dscale(scale), dprev(pre_prev), dx(n * dim);
            Dev<float> ws(n * kernels::hc_mixes_splits(hc, dim) * (kernels::kMaxMixes + 1));
            struct Out {
              std::vector<float> pre, post, comb;
            };
            auto run = [&](int finish_variant) {
              Dev<float> dpre(n * hc), dpost(n * hc), dcomb(n * hc * hc);
              kernels::HcMixesArgs m;
              m.h = dh.get(), m.fn = dfn.get(), m.base = dbase.get(), m.scale = dscale.get();
              m.n = n, m.hc = hc, m.dim = dim, m.sinkhorn_iters = iters;
              m.pre = dpre.get(), m.post = dpost.get(), m.comb = dcomb.get(), m.workspace = ws.get();
              m.finish_variant = finish_variant;
              if (fused) {
                const kernels::HcCollapseNormArgs cn{dh.get(), dprev.get(), nullptr, dx.get(), n, hc, dim, 1e-6f};
                check_cuda(kernels::hc_mixes_collapse_norm(m, cn, nullptr), "hc_mixes_collapse_norm");
              } else {
                check_cuda(kernels::hc_mixes(m, nullptr), "hc_mixes");
              }
              return Out{dpre.host(), dpost.host(), dcomb.host()};
            };
            const Out former = run(1), warp = run(0);
            return Outputs{{{"pre", former.pre, warp.pre}, {"post", former.post, warp.post}, {"comb", former.comb, warp.comb}},
                           {}};
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

// Entry lists like the model's: per query a list of ids (repeats allowed) into a
// shared pool, the counts given by `count(rng, t)`. Keys are scaled so that the
// softmax is neither flat nor one-hot.
struct AttnInputs {
  std::vector<float> q, kv, sink;
  std::vector<int64_t> offsets{0}, ids;
};
template <class Count>
AttnInputs attention_inputs(Rng& rng, int64_t n, int64_t heads, int64_t dim, int64_t pool, Count count) {
  AttnInputs in;
  in.q = randn(rng, n * heads * dim);
  in.kv = randn(rng, pool * dim, 2.0f);
  in.sink = randn(rng, heads, 2.0f);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t cnt = count(rng, t);
    for (int64_t j = 0; j < cnt; ++j) in.ids.push_back(randint(rng, 0, pool - 1));
    in.offsets.push_back(int64_t(in.ids.size()));
  }
  return in;
}

// act = kBF16: the tensor-core mode (ops/attention.h), its own tolerance family.
// path: ops::SinkAttentionParams::gpu_path (0 the batch-invariant kernels, 1 by n, 2 the
// small-batch kernel at every n).
template <class Count>
OpCase attention_counts_case(std::string name, int64_t n, int64_t heads, int64_t dim, int64_t pool, Count count,
                             ops::Activations act = ops::Activations::kF32, int path = 0) {
  const char* family = act == ops::Activations::kBF16 ? "sink_attention_bf16" : "sink_attention";
  return {name, family, [=](Rng& rng) {
            const AttnInputs in = attention_inputs(rng, n, heads, dim, pool, count);
            const float scale = 1.0f / std::sqrt(float(dim));
            std::vector<float> out(n * heads * dim);
            ops::cpu::sink_attention({in.q.data(), in.kv.data(), in.offsets.data(), in.ids.data(), in.sink.data(), scale,
                                      out.data(), n, heads, dim, act});
            Dev<float> dq(in.q), dkv(in.kv), dsink(in.sink), dout(n * heads * dim);
            Dev<int64_t> doff(in.offsets), dids(in.ids.empty() ? std::vector<int64_t>{0} : in.ids);
            ops::cuda::sink_attention({dq.get(), dkv.get(), doff.get(), dids.get(), dsink.get(), scale, dout.get(), n,
                                       heads, dim, act, path},
                                      nullptr);
            return Outputs{{{"out", out, dout.host()}}, {}};
          }};
}

// Query 0 has no entries; the others a random count in [1, max_entries].
OpCase attention_case(std::string name, int64_t n, int64_t heads, int64_t dim, int64_t pool, int64_t max_entries,
                      ops::Activations act = ops::Activations::kF32, int path = 0) {
  return attention_counts_case(
      name, n, heads, dim, pool,
      [max_entries](Rng& rng, int64_t t) { return t == 0 ? int64_t(0) : randint(rng, 1, max_entries); }, act, path);
}

// Counts that hit the kernel's edges: empty (sink only), fewer entries than the 8
// slices (empty slices), one tile and one entry past it, the V4.1 640, and lists
// long enough that each slice walks several 32-entry tiles.
constexpr int64_t kRagged[] = {0, 1, 5, 31, 32, 33, 640, 0, 7, 300, 2000, 639, 128, 9, 0, 1100};

// Batch invariance: the same queries computed inside one batch and alone (n = 1, and
// n = 3 around them) must give the same bits; the kernel picks its block shape from
// the batch size, so this runs both shapes on the same rows. "cpu" = inside the batch.
// Under kBF16 one kernel serves every n; the case checks that its per-query order holds.
// path 2: the small-batch kernel, batch-invariant by itself (path 1 is not: it switches
// kernels with n).
OpCase attention_invariance_case(std::string name, int64_t n, int64_t heads, int64_t dim,
                                 ops::Activations act = ops::Activations::kF32, int path = 0) {
  return {name, "sink_attention_batch", [=](Rng& rng) {
            const AttnInputs in = attention_inputs(rng, n, heads, dim, 1500, [](Rng& r, int64_t t) {
              return t % 5 == 0 ? kRagged[(t / 5) % std::size(kRagged)] : randint(r, 600, 640);
            });
            const float scale = 1.0f / std::sqrt(float(dim));
            const int64_t row = heads * dim;
            Dev<float> dq(in.q), dkv(in.kv), dsink(in.sink), dbatch(n * row);
            Dev<int64_t> doff(in.offsets), dids(in.ids.empty() ? std::vector<int64_t>{0} : in.ids);
            ops::cuda::sink_attention({dq.get(), dkv.get(), doff.get(), dids.get(), dsink.get(), scale, dbatch.get(), n,
                                       heads, dim, act, path},
                                      nullptr);
            const std::vector<float> batch = dbatch.host();
            std::vector<float> in_batch, apart;
            for (int64_t t : {int64_t(0), int64_t(1), int64_t(5), n / 2, n - 1}) {
              for (int64_t m : {int64_t(1), int64_t(3)}) {
                const int64_t t0 = std::min(t, n - m);  // a window of m queries that holds t
                Dev<float> dsub(m * row);
                // offsets are absolute positions into ids, so a sub-range of the
                // batch is a valid smaller batch over the same ids and pool.
                ops::cuda::sink_attention({dq.get() + t0 * row, dkv.get(), doff.get() + t0, dids.get(), dsink.get(), scale,
                                           dsub.get(), m, heads, dim, act, path},
                                          nullptr);
                const std::vector<float> sub = dsub.host();
                in_batch.insert(in_batch.end(), batch.begin() + t * row, batch.begin() + (t + 1) * row);
                apart.insert(apart.end(), sub.begin() + (t - t0) * row, sub.begin() + (t - t0 + 1) * row);
              }
            }
            return Outputs{{{"alone_vs_batch", in_batch, apart}}, {}};
          }};
}

// The small-batch kernel with RoPE folded in (SinkAttentionParams::rope_dim) against
// rope(q) -> the same kernel -> inverse rope(out), bitwise; q is passed unrotated to the
// fused call. Also: the invariant kernels (path 0) reject the folded RoPE.
template <class Count>
OpCase attention_rope_case(std::string name, int64_t n, int64_t heads, int64_t dim, int64_t rope_dim, int64_t pool,
                           Count count, ops::Activations act) {
  return {name, "fused", [=](Rng& rng) {
            const AttnInputs in = attention_inputs(rng, n, heads, dim, pool, count);
            const float scale = 1.0f / std::sqrt(float(dim)), factor = 1.25f;
            std::vector<int64_t> pos(n);
            for (auto& p : pos) p = randint(rng, 0, 70000);
            std::vector<float> inv_freq(rope_dim / 2);
            for (int64_t i = 0; i < rope_dim / 2; ++i)
              inv_freq[i] = float(std::pow(10000.0, -2.0 * double(i) / double(rope_dim)));
            Dev<float> dkv(in.kv), dsink(in.sink), dfreq(inv_freq), dq(in.q), dq_rot(in.q);
            Dev<float> dseq(n * heads * dim), dfused(n * heads * dim);
            Dev<int64_t> doff(in.offsets), dids(in.ids.empty() ? std::vector<int64_t>{0} : in.ids), dpos(pos);
            ops::cuda::rope({dq_rot.get(), n, heads, dim, rope_dim, dpos.get(), dfreq.get(), false, factor}, nullptr);
            ops::cuda::sink_attention({dq_rot.get(), dkv.get(), doff.get(), dids.get(), dsink.get(), scale, dseq.get(), n,
                                       heads, dim, act, 2},
                                      nullptr);
            ops::cuda::rope({dseq.get(), n, heads, dim, rope_dim, dpos.get(), dfreq.get(), true, factor}, nullptr);
            ops::cuda::sink_attention({dq.get(), dkv.get(), doff.get(), dids.get(), dsink.get(), scale, dfused.get(), n,
                                       heads, dim, act, 2, dpos.get(), dfreq.get(), rope_dim, factor},
                                      nullptr);
            kernels::SinkAttentionArgs bad;
            bad.q = dq.get(), bad.kv = dkv.get(), bad.offsets = doff.get(), bad.ids = dids.get(), bad.sink = dsink.get();
            bad.out = dfused.get(), bad.n = n, bad.heads = heads, bad.dim = dim, bad.path = 0;
            bad.positions = dpos.get(), bad.inv_freq = dfreq.get(), bad.rope_dim = rope_dim;
            const bool rejected = kernels::sink_attention(bad, nullptr) == cudaErrorInvalidValue;
            return Outputs{{{"out", dseq.host(), dfused.host()}}, {{"path0_rope_rejected", {1}, {rejected ? 1 : 0}}}};
          }};
}

// The small-batch kernel (gpu_path 2: rows staged in per-warp rings, merge weights once per
// warp / slice) against its former self (former_kernels.cu, NOTES section 13), bitwise: the same
// arithmetic in the same order. The new kernel groups heads by 5 (the fifth in its own dot
// slots, NOTES 25), the former by 4, so equal bits also say a head's sums do not depend on
// its group: 64 heads = 12 x 5 + 4 (a ragged last group), 3 / 4 heads (one short group),
// 5 / 10 (whole groups), 6 / 8 / 12 (a last group of 1 / 3 / 2). rope_dim > 0: both with RoPE folded in (positions up to
// 70000, as attention_rope_case). Counts past 12 rows per warp (> 768 entries) wrap the
// ring; past 32 per warp (> 2048) the id windows advance.
template <class Count>
OpCase attention_small_ab_case(std::string name, int64_t n, int64_t heads, int64_t dim, int64_t pool, Count count,
                               ops::Activations act, int64_t rope_dim = 0) {
  return {name, "former", [=](Rng& rng) {
            const AttnInputs in = attention_inputs(rng, n, heads, dim, pool, count);
            const float scale = 1.0f / std::sqrt(float(dim));
            std::vector<int64_t> pos(n);
            for (auto& p : pos) p = randint(rng, 0, 70000);
            std::vector<float> inv_freq(std::max<int64_t>(1, rope_dim / 2));
            for (int64_t i = 0; i < rope_dim / 2; ++i)
              inv_freq[i] = float(std::pow(10000.0, -2.0 * double(i) / double(rope_dim)));
            Dev<float> dq(in.q), dkv(in.kv), dsink(in.sink), dfreq(inv_freq), dnew(n * heads * dim),
                dold(n * heads * dim);
            Dev<int64_t> doff(in.offsets), dids(in.ids.empty() ? std::vector<int64_t>{0} : in.ids), dpos(pos);
            ops::SinkAttentionParams p{dq.get(), dkv.get(), doff.get(), dids.get(), dsink.get(), scale, dnew.get(),
                                       n, heads, dim, act, 2};
            if (rope_dim > 0) p.positions = dpos.get(), p.inv_freq = dfreq.get(), p.rope_dim = rope_dim;
            p.rope_factor = 1.25f;
            ops::cuda::sink_attention(p, nullptr);
            // The former kernel, with the arguments ops::cuda::sink_attention passes.
            kernels::SinkAttentionArgs a;
            a.q = p.q, a.kv = p.kv, a.offsets = p.offsets, a.ids = p.ids, a.sink = p.sink, a.scale = p.scale;
            a.out = dold.get(), a.n = n, a.heads = heads, a.dim = dim;
            a.bf16 = act == ops::Activations::kBF16, a.log2_scale = ops::attention_log2_scale(scale);
            a.positions = p.positions, a.inv_freq = p.inv_freq, a.rope_dim = p.rope_dim, a.rope_factor = p.rope_factor;
            check_cuda(former::sink_attention_small(a), "former sink_attention_small");
            return Outputs{{{"out", dold.host(), dnew.host()}}, {}};
          }};
}

// The bf16 mode's kernels chosen explicitly (kernels::sink_attention_set_bf16_path; the
// default is restored even when a check throws): kWgmma needs kv_rows (the pool size).
struct AttnPathGuard {
  kernels::AttnBf16Path saved = kernels::sink_attention_bf16_path();
  explicit AttnPathGuard(kernels::AttnBf16Path p) { kernels::sink_attention_set_bf16_path(p); }
  ~AttnPathGuard() { kernels::sink_attention_set_bf16_path(saved); }
};

// The wgmma kernel (a bf16 copy of the pool, then one block per query) against the CPU
// oracle of the bf16 mode. kv_rows = pool; auto = the default dispatch (the wgmma kernel
// where kv_rows <= 32 n, as in a prefill chunk).
template <class Count>
OpCase attention_wgmma_case(std::string name, int64_t n, int64_t heads, int64_t dim, int64_t pool, Count count,
                            kernels::AttnBf16Path path = kernels::AttnBf16Path::kWgmma) {
  return {name, "sink_attention_bf16", [=](Rng& rng) {
            const AttnInputs in = attention_inputs(rng, n, heads, dim, pool, count);
            const float scale = 1.0f / std::sqrt(float(dim));
            std::vector<float> out(n * heads * dim);
            ops::cpu::sink_attention({in.q.data(), in.kv.data(), in.offsets.data(), in.ids.data(), in.sink.data(), scale,
                                      out.data(), n, heads, dim, ops::Activations::kBF16});
            Dev<float> dq(in.q), dkv(in.kv), dsink(in.sink), dout(n * heads * dim);
            Dev<int64_t> doff(in.offsets), dids(in.ids.empty() ? std::vector<int64_t>{0} : in.ids);
            {
              AttnPathGuard guard(path);
              ops::SinkAttentionParams p{dq.get(), dkv.get(), doff.get(), dids.get(), dsink.get(), scale, dout.get(), n,
                                         heads, dim, ops::Activations::kBF16};
              p.kv_rows = pool;
              ops::cuda::sink_attention(p, nullptr);
            }
            return Outputs{{{"out", out, dout.host()}}, {}};
          }};
}

// The wgmma kernel against the mma.sync kernel on the same inputs: the same chains in
// the same order, so the same bits (family sink_attention_batch: exact). Holds when the
// k16 step of wgmma rounds as mma.sync's, as the MoE's wgmma_vs_wide case found; a
// difference here means the two bf16 paths are not interchangeable (batch invariance
// across the dispatch boundary would break).
template <class Count>
OpCase attention_wgmma_vs_mma_case(std::string name, int64_t n, int64_t heads, int64_t dim, int64_t pool, Count count,
                                   kernels::AttnBf16Path path = kernels::AttnBf16Path::kWgmma) {
  return {name, "sink_attention_batch", [=](Rng& rng) {
            const AttnInputs in = attention_inputs(rng, n, heads, dim, pool, count);
            const float scale = 1.0f / std::sqrt(float(dim));
            Dev<float> dq(in.q), dkv(in.kv), dsink(in.sink), dmma(n * heads * dim), dwg(n * heads * dim);
            Dev<int64_t> doff(in.offsets), dids(in.ids.empty() ? std::vector<int64_t>{0} : in.ids);
            for (const auto p : {kernels::AttnBf16Path::kMma, path}) {
              AttnPathGuard guard(p);
              ops::SinkAttentionParams sp{dq.get(), dkv.get(), doff.get(), dids.get(), dsink.get(), scale,
                                          p == kernels::AttnBf16Path::kMma ? dmma.get() : dwg.get(), n, heads, dim,
                                          ops::Activations::kBF16};
              sp.kv_rows = pool;
              ops::cuda::sink_attention(sp, nullptr);
            }
            return Outputs{{{"wgmma_vs_mma", dmma.host(), dwg.host()}}, {}};
          }};
}

}  // namespace

std::vector<OpCase> hyper_connection_cases() {
  return {
      mixes_case("hc_mixes_v41", 5, 4, 5120, 20),
      mixes_case("hc_mixes_small_hc2", 3, 2, 96, 3),
      mixes_case("hc_mixes_v41_n40", 40, 4, 5120, 20),  // the token-tiled partial sums (n > 8)
      mixes_collapse_norm_case("fused_hc_mixes_collapse_norm_v41", 5, 4, 5120, 20, true),
      mixes_collapse_norm_case("fused_hc_mixes_collapse_norm_odd", 3, 3, 333, 3, false),
      mixes_collapse_norm_case("fused_hc_expand_mixes_collapse_norm_v41", 5, 4, 5120, 20, true, true),
      mixes_collapse_norm_case("fused_hc_expand_mixes_collapse_norm_odd", 3, 3, 333, 3, false, true),
      // The one-launch site (counters) against the three kernels, bitwise.
      mixes_collapse_norm_case("fused_hc_site_one_launch_n1", 1, 4, 5120, 20, true, false, true),
      mixes_collapse_norm_case("fused_hc_site_one_launch_expand_n1", 1, 4, 5120, 20, true, true, true),
      mixes_collapse_norm_case("fused_hc_site_one_launch_expand_n8", 8, 4, 5120, 20, true, true, true),
      mixes_collapse_norm_case("fused_hc_site_one_launch_expand_odd", 3, 4, 333, 3, false, true, true),
      mixes_collapse_norm_case("fused_hc_site_one_launch_hc3", 5, 3, 100, 7, true, false, true),
      mixes_collapse_norm_case("fused_hc_site_one_launch_n9_two_launches", 9, 4, 5120, 20, true, true, true),
      // The deferred finish (DEEPINFER_HC_SITE=1): the site without its finish, then hc_mixes_finish.
      mixes_collapse_norm_case("fused_hc_site_one_launch_defer_n1", 1, 4, 5120, 20, true, false, true, true),
      mixes_collapse_norm_case("fused_hc_site_one_launch_defer_expand_n1", 1, 4, 5120, 20, true, true, true, true),
      mixes_collapse_norm_case("fused_hc_site_one_launch_defer_expand_n8", 8, 4, 5120, 20, true, true, true, true),
      mixes_collapse_norm_case("fused_hc_site_one_launch_defer_expand_odd", 3, 4, 333, 3, false, true, true, true),
      mixes_collapse_norm_case("fused_hc_site_one_launch_defer_hc3", 5, 3, 100, 7, true, false, true, true),
      mixes_collapse_norm_case("fused_hc_site_one_launch_defer_n9_two_launches", 9, 4, 5120, 20, true, true, true, true),
      // The wide site (DEEPINFER_HC_SITE=2, NOTES 55) and its finish; 3: as a programmatic dependent launch.
      mixes_collapse_norm_case("fused_hc_site_wide_n1", 1, 4, 5120, 20, true, false, true, true, 2),
      mixes_collapse_norm_case("fused_hc_site_wide_expand_n1", 1, 4, 5120, 20, true, true, true, true, 2),
      mixes_collapse_norm_case("fused_hc_site_wide_expand_n8", 8, 4, 5120, 20, true, true, true, true, 2),
      mixes_collapse_norm_case("fused_hc_site_wide_expand_odd", 3, 4, 333, 3, false, true, true, true, 2),
      mixes_collapse_norm_case("fused_hc_site_wide_hc3", 5, 3, 100, 7, true, false, true, true, 2),
      mixes_collapse_norm_case("fused_hc_site_wide_n9_two_launches", 9, 4, 5120, 20, true, true, true, true, 2),
      mixes_collapse_norm_case("fused_hc_site_wide_pdl_expand_n1", 1, 4, 5120, 20, true, true, true, true, 3),
      mixes_collapse_norm_case("fused_hc_site_wide_pdl_n1", 1, 4, 5120, 20, false, false, true, true, 3),
      mixes_collapse_norm_case("fused_hc_site_wide_pdl_expand_odd", 3, 4, 333, 3, true, true, true, true, 3),
      mixes_finish_ab_case("former_hc_mixes_finish_warp_v41", 5, 4, 5120, 20, true),
      mixes_finish_ab_case("former_hc_mixes_finish_warp_n1", 1, 4, 5120, 20, false),
      mixes_finish_ab_case("former_hc_mixes_finish_warp_hc3", 11, 3, 333, 3, false),
      mixes_finish_ab_case("former_hc_mixes_finish_warp_hc2", 9, 2, 96, 7, true),
      mixes_finish_ab_case("former_hc_mixes_finish_warp_hc1", 3, 1, 64, 1, false),
      collapse_case("hc_collapse_v41", 5, 4, 5120),
      expand_case("hc_expand_v41", 5, 4, 5120),
      expand_case("hc_expand_odd", 3, 3, 77),
  };
}

std::vector<OpCase> attention_cases() {
  constexpr ops::Activations kBf16 = ops::Activations::kBF16;
  return {
      attention_case("sink_attention_v41", 6, 64, 512, 700, 640),
      attention_case("sink_attention_heads12", 4, 12, 512, 300, 200),
      attention_case("sink_attention_dim100", 5, 3, 100, 50, 40),
      // V4.1-Flash decode shapes: 64 heads x 512, 640 entries (128 window + 512 selected).
      attention_counts_case("sink_attention_v41_n1", 1, 64, 512, 4096, [](Rng&, int64_t) { return int64_t(640); }),
      attention_counts_case("sink_attention_v41_n8", 8, 64, 512, 4096, [](Rng&, int64_t) { return int64_t(640); }),
      attention_counts_case("sink_attention_v41_n64", 64, 64, 512, 8192, [](Rng& r, int64_t) { return randint(r, 600, 640); }),
      attention_counts_case("sink_attention_v41_ragged", int64_t(std::size(kRagged)), 64, 512, 3000,
                     [](Rng&, int64_t t) { return kRagged[t]; }),
      attention_case("sink_attention_heads128_dim256", 3, 128, 256, 900, 700),
      attention_case("sink_attention_heads3_dim64", 16, 3, 64, 200, 300),
      attention_invariance_case("sink_attention_batch_invariance_v41", 64, 64, 512),
      attention_invariance_case("sink_attention_batch_invariance_dim100", 40, 40, 100),
      // Activations::kBF16: the tensor-core kernel (one block per query and 64 heads).
      attention_counts_case("sink_attention_bf16_v41_n1", 1, 64, 512, 4096, [](Rng&, int64_t) { return int64_t(640); },
                            kBf16),
      attention_counts_case("sink_attention_bf16_v41_n3", 3, 64, 512, 4096, [](Rng& r, int64_t) { return randint(r, 1, 640); },
                            kBf16),
      attention_counts_case("sink_attention_bf16_v41_n256", 256, 64, 512, 8192,
                            [](Rng& r, int64_t) { return randint(r, 600, 640); }, kBf16),
      // Ratio-0 layers: the 128 window entries alone.
      attention_counts_case("sink_attention_bf16_ratio0", 8, 64, 512, 1024, [](Rng&, int64_t) { return int64_t(128); },
                            kBf16),
      attention_counts_case("sink_attention_bf16_v41_ragged", int64_t(std::size(kRagged)), 64, 512, 3000,
                            [](Rng&, int64_t t) { return kRagged[t]; }, kBf16),
      attention_case("sink_attention_bf16_heads12", 4, 12, 512, 300, 200, kBf16),
      attention_case("sink_attention_bf16_heads128_dim256", 3, 128, 256, 900, 700, kBf16),
      attention_case("sink_attention_bf16_dim100", 5, 3, 100, 50, 40, kBf16),  // rows not 16-byte multiples
      attention_case("sink_attention_bf16_heads3_dim64", 16, 3, 64, 200, 300, kBf16),
      attention_invariance_case("sink_attention_bf16_batch_invariance_v41", 64, 64, 512, kBf16),
      attention_invariance_case("sink_attention_bf16_batch_invariance_dim100", 40, 40, 100, kBf16),
      // The small-batch kernel, both modes: gpu_path 1 at n = 1 (where the dispatch takes it),
      // gpu_path 2 (forced) at the other shapes.
      attention_counts_case("sink_attention_small_v41_n1", 1, 64, 512, 4096, [](Rng&, int64_t) { return int64_t(640); },
                            ops::Activations::kF32, 1),
      attention_counts_case("sink_attention_small_v41_ragged", int64_t(std::size(kRagged)), 64, 512, 3000,
                            [](Rng&, int64_t t) { return kRagged[t]; }, ops::Activations::kF32, 2),
      attention_counts_case("sink_attention_small_v41_n64", 64, 64, 512, 8192,
                            [](Rng& r, int64_t) { return randint(r, 600, 640); }, ops::Activations::kF32, 2),
      attention_case("sink_attention_small_heads12", 4, 12, 512, 300, 200, ops::Activations::kF32, 2),
      attention_case("sink_attention_small_dim100", 5, 3, 100, 50, 40, ops::Activations::kF32, 2),
      attention_case("sink_attention_small_heads128_dim256", 3, 128, 256, 900, 700, ops::Activations::kF32, 2),
      attention_case("sink_attention_small_long", 2, 8, 64, 9000, 8000, ops::Activations::kF32, 2),
      attention_counts_case("sink_attention_bf16_small_v41_n1", 1, 64, 512, 4096,
                            [](Rng&, int64_t) { return int64_t(640); }, kBf16, 1),
      attention_counts_case("sink_attention_bf16_small_ratio0", 8, 64, 512, 1024,
                            [](Rng&, int64_t) { return int64_t(128); }, kBf16, 2),
      attention_counts_case("sink_attention_bf16_small_v41_ragged", int64_t(std::size(kRagged)), 64, 512, 3000,
                            [](Rng&, int64_t t) { return kRagged[t]; }, kBf16, 2),
      attention_counts_case("sink_attention_bf16_small_v41_n64", 64, 64, 512, 8192,
                            [](Rng& r, int64_t) { return randint(r, 600, 640); }, kBf16, 2),
      attention_case("sink_attention_bf16_small_heads12", 4, 12, 512, 300, 200, kBf16, 2),
      attention_case("sink_attention_bf16_small_dim100", 5, 3, 100, 50, 40, kBf16, 2),
      attention_case("sink_attention_bf16_small_heads3_dim64", 16, 3, 64, 200, 300, kBf16, 2),
      attention_case("sink_attention_bf16_small_long", 2, 8, 64, 9000, 8000, kBf16, 2),
      attention_invariance_case("sink_attention_small_batch_invariance_v41", 64, 64, 512, ops::Activations::kF32, 2),
      attention_invariance_case("sink_attention_small_batch_invariance_dim100", 40, 40, 100, ops::Activations::kF32, 2),
      attention_invariance_case("sink_attention_bf16_small_batch_invariance_v41", 64, 64, 512, kBf16, 2),
      attention_rope_case("fused_sink_attention_rope_v41_n1", 1, 64, 512, 64, 4096,
                          [](Rng&, int64_t) { return int64_t(640); }, ops::Activations::kF32),
      attention_rope_case("fused_sink_attention_rope_v41_ragged", int64_t(std::size(kRagged)), 64, 512, 64, 3000,
                          [](Rng&, int64_t t) { return kRagged[t]; }, ops::Activations::kF32),
      attention_rope_case("fused_sink_attention_rope_bf16_v41_n3", 3, 64, 512, 64, 4096,
                          [](Rng& r, int64_t) { return randint(r, 1, 640); }, kBf16),
      attention_rope_case("fused_sink_attention_rope_odd", 5, 6, 100, 20, 300,
                          [](Rng& r, int64_t t) { return t == 0 ? int64_t(0) : randint(r, 1, 200); }, ops::Activations::kF32),
      attention_rope_case("fused_sink_attention_rope_bf16_odd", 5, 6, 102, 102, 300,
                          [](Rng& r, int64_t t) { return t == 2 ? int64_t(0) : randint(r, 1, 200); }, kBf16),
      // The small-batch kernel against its former self (former_kernels.cu), bitwise, both modes.
      attention_small_ab_case("sink_attention_small_ab_v41_n1", 1, 64, 512, 4096,
                              [](Rng&, int64_t) { return int64_t(640); }, ops::Activations::kF32),
      attention_small_ab_case("sink_attention_small_ab_bf16_v41_n1", 1, 64, 512, 4096,
                              [](Rng&, int64_t) { return int64_t(640); }, kBf16),
      attention_small_ab_case("sink_attention_small_ab_ratio0_n4", 4, 64, 512, 1024,
                              [](Rng&, int64_t) { return int64_t(128); }, ops::Activations::kF32),
      attention_small_ab_case("sink_attention_small_ab_bf16_ratio0_n4", 4, 64, 512, 1024,
                              [](Rng&, int64_t) { return int64_t(128); }, kBf16),
      attention_small_ab_case("sink_attention_small_ab_ragged", int64_t(std::size(kRagged)), 64, 512, 3000,
                              [](Rng&, int64_t t) { return kRagged[t]; }, ops::Activations::kF32),
      attention_small_ab_case("sink_attention_small_ab_bf16_ragged", int64_t(std::size(kRagged)), 64, 512, 3000,
                              [](Rng&, int64_t t) { return kRagged[t]; }, kBf16),
      attention_small_ab_case("sink_attention_small_ab_long", 3, 8, 64, 9000,
                              [](Rng&, int64_t t) { return int64_t(t == 0 ? 8000 : t == 1 ? 2500 : 900); },
                              ops::Activations::kF32),
      attention_small_ab_case("sink_attention_small_ab_bf16_long", 3, 8, 64, 9000,
                              [](Rng&, int64_t t) { return int64_t(t == 0 ? 8000 : t == 1 ? 2500 : 900); }, kBf16),
      attention_small_ab_case("sink_attention_small_ab_heads12_dim100", 5, 12, 100, 300,
                              [](Rng& r, int64_t t) { return t == 0 ? int64_t(0) : randint(r, 1, 300); },
                              ops::Activations::kF32),
      attention_small_ab_case("sink_attention_small_ab_bf16_heads3_dim256", 5, 3, 256, 900,
                              [](Rng& r, int64_t) { return randint(r, 1, 900); }, kBf16),
      attention_small_ab_case("sink_attention_small_ab_rope_v41", 3, 64, 512, 4096,
                              [](Rng& r, int64_t t) { return t == 0 ? int64_t(640) : randint(r, 1, 640); },
                              ops::Activations::kF32, 64),
      attention_small_ab_case("sink_attention_small_ab_bf16_rope_v41", 3, 64, 512, 4096,
                              [](Rng& r, int64_t t) { return t == 0 ? int64_t(128) : randint(r, 1, 640); }, kBf16, 64),
      attention_small_ab_case("sink_attention_small_ab_bf16_rope_odd", 5, 6, 102, 300,
                              [](Rng& r, int64_t t) { return t == 2 ? int64_t(0) : randint(r, 1, 200); }, kBf16, 102),
      attention_small_ab_case("sink_attention_small_ab_heads5", 2, 5, 512, 2000,
                              [](Rng& r, int64_t) { return randint(r, 1, 900); }, ops::Activations::kF32),
      attention_small_ab_case("sink_attention_small_ab_heads4", 2, 4, 512, 2000,
                              [](Rng& r, int64_t) { return randint(r, 1, 900); }, ops::Activations::kF32),
      attention_small_ab_case("sink_attention_small_ab_bf16_heads10_rope", 2, 10, 512, 2000,
                              [](Rng& r, int64_t) { return randint(r, 1, 900); }, kBf16, 64),
      // The wgmma kernel (kv_rows known): V4.1 shapes, ragged counts (empty, partial tiles,
      // lists of 2000), odd shapes, and the default dispatch at a prefill-like ratio.
      attention_wgmma_case("sink_attention_bf16_wgmma_v41", 24, 64, 512, 4096,
                           [](Rng& r, int64_t) { return randint(r, 600, 640); }),
      attention_wgmma_case("sink_attention_bf16_wgmma_ragged", int64_t(std::size(kRagged)), 64, 512, 3000,
                           [](Rng&, int64_t t) { return kRagged[t]; }),
      attention_wgmma_case("sink_attention_bf16_wgmma_heads128_dim256", 3, 128, 256, 900,
                           [](Rng& r, int64_t t) { return t == 0 ? int64_t(0) : randint(r, 1, 700); }),
      attention_wgmma_case("sink_attention_bf16_wgmma_dim100", 5, 3, 100, 50,
                           [](Rng& r, int64_t t) { return t == 0 ? int64_t(0) : randint(r, 1, 40); }),
      attention_wgmma_case("sink_attention_bf16_wgmma_heads12", 4, 12, 512, 300,
                           [](Rng& r, int64_t) { return randint(r, 1, 200); }),
      attention_wgmma_case("sink_attention_bf16_wgmma_auto_prefill", 96, 64, 512, 1024,
                           [](Rng& r, int64_t t) { return std::min<int64_t>(t + 1, 128) + randint(r, 0, 512); },
                           kernels::AttnBf16Path::kAuto),
      attention_wgmma_vs_mma_case("sink_attention_bf16_wgmma_vs_mma_v41", 40, 64, 512, 3000,
                                  [](Rng& r, int64_t t) { return t < 16 ? kRagged[t] : randint(r, 500, 640); }),
      attention_wgmma_vs_mma_case("sink_attention_bf16_wgmma_vs_mma_dim100", 16, 40, 100, 200,
                                  [](Rng& r, int64_t t) { return kRagged[t] % 300 + randint(r, 0, 3); }),
      // The overlapped variant (the next tile's QK under the softmax): vs the CPU and the bits.
      attention_wgmma_case("sink_attention_bf16_wgmma_overlap_ragged", int64_t(std::size(kRagged)), 64, 512, 3000,
                           [](Rng&, int64_t t) { return kRagged[t]; }, kernels::AttnBf16Path::kWgmmaOverlap),
      attention_wgmma_case("sink_attention_bf16_wgmma_overlap_dim100", 5, 3, 100, 50,
                           [](Rng& r, int64_t t) { return t == 0 ? int64_t(0) : randint(r, 1, 40); },
                           kernels::AttnBf16Path::kWgmmaOverlap),
      attention_wgmma_vs_mma_case("sink_attention_bf16_wgmma_overlap_vs_mma_v41", 40, 64, 512, 3000,
                                  [](Rng& r, int64_t t) { return t < 16 ? kRagged[t] : randint(r, 500, 640); },
                                  kernels::AttnBf16Path::kWgmmaOverlap),
  };
}

}  // namespace deepinfer::testing_cuda
