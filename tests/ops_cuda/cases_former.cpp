// A/B cases of the small-kernel rework: each reworked kernel against its former self
// (former_kernels.cu, verbatim), on the same inputs, bitwise (family "former"). The
// kernels were reorganized for parallelism only (more blocks, loads issued together,
// the hyper-connection mixes tiled over tokens), so every value must come out the same.
#include <algorithm>
#include <cmath>

#include "former_kernels.h"
#include "harness.h"

namespace deepinfer::testing_cuda {

namespace {

// The layer's hc step (kernels::hc_[expand_]mixes_collapse_norm) against the former
// partial-sum and finish + collapse + norm kernels; and hc_mixes' per-token (variant 1)
// against its tiled (variant 2) partial sums where the tiled kernel can run.
OpCase hc_case(std::string name, int64_t n, int64_t hc, int64_t dim, bool expand, bool weight) {
  return {name, "former", [=](Rng& rng) {
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
            Dev<float> ws(n * kernels::hc_mixes_splits(hc, dim) * (kernels::kMaxMixes + 1));
            struct Out {
              std::vector<float> pre, post, comb, x, h;
            };
            // mode 0: the former kernels; 1: the layer's call; 2, 3, 4: hc_mixes with variant
            // 1, 2, 3; 5: the layer's call with variant 3 (the rows kernel, where it fits).
            auto run = [&](int mode) {
              Dev<float> dh(h), dpre(n * hc), dpost(post0), dcomb(comb0), dx(n * dim);
              const kernels::HcExpandArgs e{dh.get(), dy.get(), dpost.get(), dcomb.get(), n, hc, dim};
              kernels::HcMixesArgs m;
              m.h = dh.get(), m.fn = dfn.get(), m.base = dbase.get(), m.scale = dscale.get();
              m.n = n, m.hc = hc, m.dim = dim, m.norm_eps = 1e-20f, m.hc_eps = 1e-6f, m.sinkhorn_iters = 20;
              m.pre = dpre.get(), m.post = dpost.get(), m.comb = dcomb.get(), m.workspace = ws.get();
              const kernels::HcCollapseNormArgs cn{dh.get(), dprev.get(), weight ? dw.get() : nullptr, dx.get(), n, hc,
                                                   dim, 1e-6f};
              if (mode == 0) {
                check_cuda(former::hc_mixes_collapse_norm(expand ? &e : nullptr, m, cn), "former hc");
              } else if (mode == 1 || mode == 5) {
                m.variant = mode == 5 ? 3 : 0;
                check_cuda(expand ? kernels::hc_expand_mixes_collapse_norm(e, m, cn, nullptr)
                                  : kernels::hc_mixes_collapse_norm(m, cn, nullptr),
                           "hc_mixes_collapse_norm");
              } else {
                m.variant = mode - 1;
                check_cuda(kernels::hc_mixes(m, nullptr), "hc_mixes variant");
              }
              return Out{dpre.host(), dpost.host(), dcomb.host(), dx.host(), dh.host()};
            };
            const Out a = run(0), b = run(1), v1 = run(2), v2 = run(3);
            // The rows kernel: hc = 4, splits of exactly 128 columns.
            const bool rows = hc == 4 && kernels::hc_mixes_splits(hc, dim) * 128 == dim;
            std::vector<FloatOut> extra;
            if (rows) {
              const Out v3 = run(4), r = run(5);
              extra = {{"rows_pre", v2.pre, v3.pre},         {"rows_post", v2.post, v3.post},
                       {"rows_comb", v2.comb, v3.comb},      {"rows_layer_pre", a.pre, r.pre},
                       {"rows_layer_post", a.post, r.post},  {"rows_layer_comb", a.comb, r.comb},
                       {"rows_layer_x", a.x, r.x},           {"rows_layer_h", a.h, r.h}};
            }
            Outputs o{{{"pre", a.pre, b.pre},
                       {"post", a.post, b.post},
                       {"comb", a.comb, b.comb},
                       {"x", a.x, b.x},
                       {"h", a.h, b.h},
                       {"variant_pre", v1.pre, v2.pre},
                       {"variant_post", v1.post, v2.post},
                       {"variant_comb", v1.comb, v2.comb}},
                      {}};
            o.floats.insert(o.floats.end(), extra.begin(), extra.end());
            return o;
          }};
}

OpCase rope_case(std::string name, int64_t n, int64_t heads, int64_t dim, int64_t rd, bool inverse) {
  return {name, "former", [=](Rng& rng) {
            const auto x = randn(rng, n * heads * dim);
            std::vector<int64_t> pos(n);
            for (auto& p : pos) p = randint(rng, 0, 200000);
            std::vector<float> inv(rd / 2);
            for (int64_t i = 0; i < rd / 2; ++i) inv[i] = std::pow(10000.0f, -2.0f * float(i) / float(rd));
            Dev<float> a(x), b(x), dinv(inv);
            Dev<int64_t> dpos(pos);
            kernels::RopeArgs r{a.get(), dpos.get(), dinv.get(), n, heads, dim, rd, inverse, 1.25f};
            check_cuda(former::rope(r), "former rope");
            r.x = b.get();
            check_cuda(kernels::rope(r, nullptr), "rope");
            return Outputs{{{"x", a.host(), b.host()}}, {}};
          }};
}

// Logits drawn from a handful of values, so that biased scores tie and the lower id
// must win in both kernels.
OpCase select_case(std::string name, int64_t n, int64_t experts, int64_t top_k, bool bias, bool norm) {
  return {name, "former", [=](Rng& rng) {
            std::vector<float> logits(n * experts);
            for (auto& l : logits) l = float(randint(rng, -8, 8)) * 0.75f;
            const auto b = randn(rng, experts, 0.05f);
            Dev<float> dl(logits), db(b);
            Dev<int64_t> ia(n * top_k), ib(n * top_k);
            Dev<float> wa(n * top_k), wb(n * top_k);
            kernels::RouterSelectArgs s;
            s.logits = dl.get(), s.bias = bias ? db.get() : nullptr, s.n = n, s.num_experts = experts, s.top_k = top_k;
            s.temp = 1.0f, s.norm_topk_prob = norm, s.routed_scaling_factor = 1.5f;
            s.expert_ids = ia.get(), s.expert_weights = wa.get();
            check_cuda(former::router_select(s), "former router_select");
            s.expert_ids = ib.get(), s.expert_weights = wb.get();
            check_cuda(kernels::router_select(s, nullptr), "router_select");
            return Outputs{{{"weights", wa.host(), wb.host()}}, {{"ids", ia.host(), ib.host()}}};
          }};
}

// Slots with repeated expert ids (the stable order matters) and dropped slots (-1).
OpCase combine_case(std::string name, int64_t n, int64_t k, int64_t dim, bool residual) {
  return {name, "former", [=](Rng& rng) {
            const auto y = randn(rng, n * k * dim);
            const auto res = randn(rng, n * dim);
            std::vector<int64_t> ids(n * k);
            std::vector<int32_t> slot(n * k);
            std::vector<int32_t> perm(n * k);
            for (int64_t i = 0; i < n * k; ++i) perm[i] = int32_t(i);
            std::shuffle(perm.begin(), perm.end(), rng);
            for (int64_t i = 0; i < n * k; ++i) {
              ids[i] = randint(rng, 0, 7);
              slot[i] = randint(rng, 0, 9) == 0 ? -1 : perm[i];
            }
            Dev<float> dy(y), dres(res), oa(n * dim), ob(n * dim);
            Dev<int64_t> dids(ids);
            Dev<int32_t> dslot(slot);
            kernels::MoeCombineArgs c{dy.get(), dids.get(), dslot.get(), residual ? dres.get() : nullptr, oa.get(),
                                      int32_t(n), int32_t(k), int32_t(dim)};
            check_cuda(former::moe_combine(c), "former moe_combine");
            c.out = ob.get();
            check_cuda(kernels::moe_combine(c, nullptr), "moe_combine");
            return Outputs{{{"out", oa.host(), ob.host()}}, {}};
          }};
}

// The Engram gate (kernels::engram_gate, loads batched) against its one-element loops.
OpCase engram_gate_case(std::string name, int64_t n, int64_t hc, int64_t dim) {
  return {name, "former", [=](Rng& rng) {
            const auto h = randn(rng, n * hc * dim, 2.0f);
            const auto kv = randn(rng, n * (hc + 1) * dim);
            const auto gw = uniform(rng, hc * dim, 0.5f, 1.5f);
            Dev<float> ha(h), hb(h), dkv(kv), dgw(gw);
            kernels::EngramGateArgs g{ha.get(), dkv.get(), dgw.get(), n, hc, dim, 1e-6f};
            check_cuda(former::engram_gate(g), "former engram_gate");
            g.h = hb.get();
            check_cuda(kernels::engram_gate(g, nullptr), "engram_gate");
            return Outputs{{{"h", ha.host(), hb.host()}}, {}};
          }};
}

}  // namespace

std::vector<OpCase> former_cases() {
  return {
      // V4.1: 4 streams x 5120, 40 splits of 128 columns; n = 1 .. 8 take the 4-group
      // tiled kernel, larger n the 1-group one (tiles of n / 16 up to 16 tokens).
      hc_case("former_hc_v41_n1_expand", 1, 4, 5120, true, true),
      hc_case("former_hc_v41_n1", 1, 4, 5120, false, true),
      hc_case("former_hc_v41_n7_expand", 7, 4, 5120, true, false),
      hc_case("former_hc_v41_n37_expand", 37, 4, 5120, true, true),
      hc_case("former_hc_v41_n300", 300, 4, 5120, false, true),
      hc_case("former_hc_v41_n300_expand", 300, 4, 5120, true, true),
      hc_case("former_hc_dim512_n70_expand", 70, 4, 512, true, true),
      hc_case("former_hc_dim512_n130", 130, 4, 512, false, false),
      // Splits of 100 and 120 columns (threads past the split's end), hc 3 (15 mixes).
      hc_case("former_hc_dim200_n20_expand", 20, 4, 200, true, true),
      hc_case("former_hc_hc3_dim120_n3_expand", 3, 3, 120, true, false),
      hc_case("former_hc_hc3_dim120_n40", 40, 3, 120, false, true),
      rope_case("former_rope_q_n1", 1, 64, 512, 64, false),
      rope_case("former_rope_inverse_n3", 3, 64, 512, 64, true),
      rope_case("former_rope_heads12_n5", 5, 12, 512, 64, false),
      rope_case("former_rope_q_n300", 300, 64, 512, 64, false),
      rope_case("former_rope_kv_n9", 9, 1, 512, 64, false),
      engram_gate_case("former_engram_gate_v41_n1", 1, 4, 5120),
      engram_gate_case("former_engram_gate_v41_n9", 9, 4, 5120),
      engram_gate_case("former_engram_gate_dim100", 3, 3, 100),
      engram_gate_case("former_engram_gate_dim40", 2, 2, 40),
      select_case("former_router_select_n1", 1, 384, 6, true, true),
      select_case("former_router_select_n33", 33, 384, 6, false, true),
      select_case("former_router_select_odd", 17, 100, 9, true, false),
      combine_case("former_moe_combine_n1", 1, 6, 5120, true),
      combine_case("former_moe_combine_n70", 70, 6, 5120, false),
      combine_case("former_moe_combine_odd", 13, 16, 333, true),
      combine_case("former_moe_combine_n300", 300, 6, 5120, true),    // 5 chunks of 1024 columns (4 per thread)
      combine_case("former_moe_combine_n2100", 2100, 6, 1000, false),  // one block per token
  };
}

}  // namespace deepinfer::testing_cuda
