// linear in every weight format (both kernel paths), the MoE router and the
// SwiGLU expert.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <map>
#include <tuple>
#include <utility>

#include "harness.h"
#include "kernels/cuda/smxx_moe.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"
#include "ops/linear.h"
#include "ops/moe.h"

namespace deepinfer::testing_cuda {

namespace {

OpCase linear_case(WKind kind, int64_t n, int64_t rows, int64_t cols, int64_t row0 = 0, int64_t num_rows = -1,
                   std::string suffix = "") {
  std::string name = std::string("linear_") + wkind_name(kind) + "_n" + std::to_string(n) + "_" +
                     std::to_string(rows) + "x" + std::to_string(cols) + suffix;
  return {name, "linear", [=](Rng& rng) {
            const auto w = random_weight(rng, kind, rows, cols, 0.05f);
            const auto x = randn(rng, n * cols);
            const int64_t out_rows = num_rows < 0 ? rows - row0 : num_rows;
            std::vector<float> y(n * out_rows);
            ops::cpu::linear({x.data(), y.data(), n, w->ref(false), row0, num_rows});
            Dev<float> dx(x), dy(n * out_rows);
            ops::cuda::linear({dx.get(), dy.get(), n, w->ref(true), row0, num_rows}, nullptr);
            return Outputs{{{"y", y, dy.host()}}, {}};
          }};
}

// tie_rows: the gate's row 20 is a copy of row 10 and there is no bias, so the two
// experts tie exactly and the lower id must win.
OpCase router_case(std::string name, WKind kind, int64_t n, int64_t experts, int64_t dim, int64_t top_k, bool bias,
                   bool tie_rows, bool norm) {
  return {name, "moe_router", [=](Rng& rng) {
            auto w = random_weight(rng, kind, experts, dim, 0.02f);
            if (tie_rows) {
              const size_t row_bytes = w->data.size() / size_t(experts);
              std::copy_n(w->data.begin() + 10 * row_bytes, row_bytes, w->data.begin() + 20 * row_bytes);
              w->d_data = std::make_unique<Dev<uint8_t>>(w->data);
            }
            const auto x = randn(rng, n * dim);
            const auto b = randn(rng, experts, 0.05f);
            std::vector<int64_t> ids(n * top_k);
            std::vector<float> wts(n * top_k);
            ops::MoeRouterParams hp;
            hp.x = x.data();
            hp.n = n;
            hp.gate = w->ref(false);
            hp.bias = bias ? b.data() : nullptr;
            hp.top_k = top_k;
            hp.temp = 1.0f;
            hp.norm_topk_prob = norm;
            hp.routed_scaling_factor = 1.5f;
            hp.expert_ids = ids.data();
            hp.expert_weights = wts.data();
            ops::cpu::moe_router(hp);
            Dev<float> dx(x), db(b), dwts(n * top_k);
            Dev<int64_t> dids(n * top_k);
            ops::MoeRouterParams dp = hp;
            dp.x = dx.get();
            dp.gate = w->ref(true);
            dp.bias = bias ? db.get() : nullptr;
            dp.expert_ids = dids.get();
            dp.expert_weights = dwts.get();
            ops::cuda::moe_router(dp, nullptr);
            return Outputs{{{"weights", wts, dwts.host()}}, {{"ids", ids, dids.host()}}};
          }};
}

// The router's logits with four expert rows per warp (RouterLogitsPath::kWide) against the
// one-row vector kernel: bitwise (same products, same order, same warp tree). Token and
// expert counts that leave partial groups of 8 tokens and of 4 rows.
OpCase router_wide_case(std::string name, WKind kind, int64_t n, int64_t experts, int64_t dim) {
  return {name, "moe_router", [=](Rng& rng) {
            auto w = random_weight(rng, kind, experts, dim, 0.02f);
            const auto x = randn(rng, n * dim);
            Dev<float> dx(x), vec(n * experts), wide(n * experts);
            kernels::RouterLogitsArgs a;
            a.x = dx.get();
            a.n = n;
            a.gate = ops::cuda::to_weight_args(w->ref(true));
            using kernels::RouterLogitsPath;
            const RouterLogitsPath def = kernels::router_logits_path();
            for (auto [path, out] : {std::pair{RouterLogitsPath::kVec, vec.get()}, std::pair{RouterLogitsPath::kWide, wide.get()}}) {
              kernels::router_logits_set_path(path);
              a.logits = out;
              check_cuda(kernels::router_logits(a, nullptr), "router_logits");
            }
            kernels::router_logits_set_path(def);
            auto bits = [](const std::vector<float>& v) {
              std::vector<int64_t> b(v.size());
              for (size_t i = 0; i < v.size(); ++i) b[i] = int64_t(std::bit_cast<uint32_t>(v[i]));
              return b;
            };
            return Outputs{{}, {{"wide_vs_vec_bits", bits(vec.host()), bits(wide.host())}}};
          }};
}

// The FP64 tensor-core logits (RouterLogitsPath::kDmma) against the vector kernel: at most
// one f32 ulp apart (both round an almost exact double sum; only the sum order differs),
// and batch-invariant: the first `few` tokens alone (the 8-token tile) give the same bits
// as inside the n-token call (the 32-token tile when n > 64).
OpCase router_dmma_case(std::string name, WKind kind, int64_t n, int64_t few, int64_t experts, int64_t dim,
                        kernels::RouterLogitsPath dpath = kernels::RouterLogitsPath::kDmma) {
  return {name, "moe_router", [=](Rng& rng) {
            auto w = random_weight(rng, kind, experts, dim, 0.02f);
            const auto x = randn(rng, n * dim);
            Dev<float> dx(x), vec(n * experts), dmma(n * experts), alone(few * experts);
            kernels::RouterLogitsArgs a;
            a.x = dx.get();
            a.gate = ops::cuda::to_weight_args(w->ref(true));
            using kernels::RouterLogitsPath;
            const RouterLogitsPath def = kernels::router_logits_path();
            for (auto [path, out, rows] : {std::tuple{RouterLogitsPath::kVec, vec.get(), n},
                                           std::tuple{dpath, dmma.get(), n}, std::tuple{dpath, alone.get(), few}}) {
              kernels::router_logits_set_path(path);
              a.n = rows;
              a.logits = out;
              check_cuda(kernels::router_logits(a, nullptr), "router_logits");
            }
            kernels::router_logits_set_path(def);
            const auto v = vec.host(), d = dmma.host(), f = alone.host();
            int64_t over_one_ulp = 0;
            for (size_t i = 0; i < v.size(); ++i) {
              const int64_t bv = int64_t(std::bit_cast<int32_t>(v[i])), bd = int64_t(std::bit_cast<int32_t>(d[i]));
              over_one_ulp += (bv - bd > 1 || bd - bv > 1) || (std::signbit(v[i]) != std::signbit(d[i]) && v[i] != d[i]);
            }
            std::vector<int64_t> head(size_t(few * experts)), few_bits(head.size());
            for (size_t i = 0; i < head.size(); ++i) {
              head[i] = int64_t(std::bit_cast<uint32_t>(d[i]));
              few_bits[i] = int64_t(std::bit_cast<uint32_t>(f[i]));
            }
            return Outputs{{}, {{"dmma_vs_vec_over_1ulp", {0}, {over_one_ulp}}, {"dmma_batch_invariant", head, few_bits}}};
          }};
}

// kDmmaDeep (ten groups in flight per warp at n <= 8, NOTES 28) against kDmma: the same
// order of the double sums, so the same bits, at every n of 1..8 (and at n = 9, where
// kDmmaDeep falls back to kDmma's kernel).
OpCase router_dmma_deep_case(std::string name, WKind kind, int64_t experts, int64_t dim) {
  return {name, "moe_router", [=](Rng& rng) {
            auto w = random_weight(rng, kind, experts, dim, 0.02f);
            const int64_t nmax = 9;
            const auto x = randn(rng, nmax * dim);
            Dev<float> dx(x), ref(nmax * experts), deep(nmax * experts);
            kernels::RouterLogitsArgs a;
            a.x = dx.get();
            a.gate = ops::cuda::to_weight_args(w->ref(true));
            using kernels::RouterLogitsPath;
            const RouterLogitsPath def = kernels::router_logits_path();
            std::vector<int64_t> want, got;
            for (int64_t n = 1; n <= nmax; ++n) {
              for (auto [path, out] : {std::pair{RouterLogitsPath::kDmma, ref.get()},
                                       std::pair{RouterLogitsPath::kDmmaDeep, deep.get()}}) {
                kernels::router_logits_set_path(path);
                a.n = n;
                a.logits = out;
                check_cuda(kernels::router_logits(a, nullptr), "router_logits");
              }
              const auto r = ref.host(), d = deep.host();
              for (int64_t i = 0; i < n * experts; ++i) {
                want.push_back(int64_t(std::bit_cast<uint32_t>(r[size_t(i)])));
                got.push_back(int64_t(std::bit_cast<uint32_t>(d[size_t(i)])));
              }
            }
            kernels::router_logits_set_path(def);
            return Outputs{{}, {{"dmmadeep_vs_dmma_bits", want, got}}};
          }};
}

// kDmmaSplit (NOTES 48: K in 16 pieces, its own fixed order) across n: the logits of the
// first n tokens at n = 1..9, 64 (the 16-warp 8 x 8 tile) and 65 (the 32 x 32 tile) bitwise
// those of the same tokens inside the 130-token call (batch invariance across both tile
// shapes), and every call twice with the same bits (run-to-run determinism).
OpCase router_split_invariance_case(std::string name, WKind kind, int64_t experts, int64_t dim) {
  return {name, "moe_router", [=](Rng& rng) {
            auto w = random_weight(rng, kind, experts, dim, 0.02f);
            const int64_t nmax = 130;
            const auto x = randn(rng, nmax * dim);
            Dev<float> dx(x), full(nmax * experts), part(nmax * experts);
            kernels::RouterLogitsArgs a;
            a.x = dx.get();
            a.gate = ops::cuda::to_weight_args(w->ref(true));
            using kernels::RouterLogitsPath;
            const RouterLogitsPath def = kernels::router_logits_path();
            kernels::router_logits_set_path(RouterLogitsPath::kDmmaSplit);
            auto logits = [&](int64_t n, float* out) {
              a.n = n;
              a.logits = out;
              check_cuda(kernels::router_logits(a, nullptr), "router_logits");
            };
            logits(nmax, full.get());
            const auto ref = full.host();
            std::vector<int64_t> want, got;
            int64_t rerun_differs = 0;
            for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 64, 65, 130}) {
              logits(n, part.get());
              const auto first = part.host();
              logits(n, part.get());
              const auto second = part.host();
              rerun_differs += std::memcmp(first.data(), second.data(), size_t(n * experts) * 4) != 0;
              for (int64_t i = 0; i < n * experts; ++i) {
                want.push_back(int64_t(std::bit_cast<uint32_t>(ref[size_t(i)])));
                got.push_back(int64_t(std::bit_cast<uint32_t>(first[size_t(i)])));
              }
            }
            kernels::router_logits_set_path(def);
            return Outputs{{}, {{"split_batch_invariant", want, got}, {"split_rerun_differs", {0}, {rerun_differs}}}};
          }};
}

// The whole router (logits + select) on a given logits path against the CPU oracle.
OpCase router_path_case(std::string name, kernels::RouterLogitsPath path, OpCase inner) {
  return {name, inner.family, [=](Rng& rng) {
            const kernels::RouterLogitsPath def = kernels::router_logits_path();
            kernels::router_logits_set_path(path);
            Outputs o = inner.run(rng);
            kernels::router_logits_set_path(def);
            return o;
          }};
}

OpCase expert_case(std::string name, WKind kind, int64_t n, int64_t inter, int64_t dim, bool routed, float limit) {
  return {name, "swiglu_expert", [=](Rng& rng) {
            const auto w1 = random_weight(rng, kind, inter, dim, 0.3f);
            const auto w3 = random_weight(rng, kind, inter, dim, 0.3f);
            const auto w2 = random_weight(rng, kind, dim, inter, 0.05f);
            const auto x = randn(rng, n * dim);
            const auto rw = uniform(rng, n, 0.1f, 1.0f);
            std::vector<float> y(n * dim);
            ops::cpu::swiglu_expert({x.data(), n, w1->ref(false), w3->ref(false), w2->ref(false),
                                     routed ? rw.data() : nullptr, limit, y.data()});
            Dev<float> dx(x), drw(rw), dy(n * dim);
            ops::cuda::swiglu_expert(
                {dx.get(), n, w1->ref(true), w3->ref(true), w2->ref(true), routed ? drw.get() : nullptr, limit, dy.get()},
                nullptr);
            return Outputs{{{"y", y, dy.host()}}, {}};
          }};
}

// Ragged routing: k distinct experts per token; a quarter of the picks go to the
// four "hot" experts 0..3 (dozens of rows each at n = 256: the tensor-core tiles in
// kAuto mode), the rest spread over experts < used; experts >= used stay empty.
std::vector<int64_t> ragged_ids(Rng& rng, int64_t n, int64_t k, int64_t used) {
  std::vector<int64_t> ids(n * k);
  for (int64_t t = 0; t < n; ++t)
    for (int64_t j = 0; j < k; ++j) {
      int64_t e;
      bool dup;
      do {
        e = randint(rng, 0, 3) == 0 ? randint(rng, 0, 3) : randint(rng, 0, used - 1);
        dup = std::find(ids.begin() + t * k, ids.begin() + t * k + j, e) != ids.begin() + t * k + j;
      } while (dup);
      ids[t * k + j] = e;
    }
  return ids;
}

// Expert weights shared by the moe_experts cases of one shape: generated once per
// (kind, shape, sets) with their own seed (random FP4 at 2304 x 5120 costs seconds).
const std::vector<std::unique_ptr<TestWeight>>& expert_weights(WKind kind, int64_t inter, int64_t dim, int64_t sets) {
  static std::map<std::tuple<int, int64_t, int64_t, int64_t>, std::vector<std::unique_ptr<TestWeight>>> cache;
  auto& w = cache[{int(kind), inter, dim, sets}];
  if (w.empty()) {
    Rng rng(0x5eed0000u + uint64_t(inter * 31 + dim * 7 + sets));
    const float sd_in = 1.5f / std::sqrt(float(dim)), sd_out = 1.0f / std::sqrt(float(inter));
    for (int64_t s = 0; s < sets; ++s) {
      w.push_back(random_weight(rng, kind, inter, dim, sd_in));
      w.push_back(random_weight(rng, kind, inter, dim, sd_in));
      w.push_back(random_weight(rng, kind, dim, inter, sd_out));
    }
  }
  return w;
}

// moe_experts (grouped, device-routed) against the CPU op. `sets` distinct random
// expert weights are shared round-robin by the E experts (E x [inter x dim] at the real
// shape would be 6.8 GB); the kernels see E distinct table entries either way.
// cpu_every: the CPU oracle runs on tokens 0, cpu_every, 2 cpu_every, ... only (a
// token's output depends on its own row alone; the GPU still runs the whole ragged
// batch); 1 = every token. invariant: kInvariant mode, and the rows of two sub-batches
// (token 0 alone, the second half) must equal the full batch's rows bit for bit.
// both_big: the batch runs again with each big-tile kernel (moe_tc_set_big: the wide one and
// the warp-specialized wgmma tiles of 128 rows with the scale ring, kWgmmaWsS, also against the
// CPU as y_wgmmawss) and must equal the default's (kAuto's: one of the two, by T) output bit for
// bit (same MMAs, same order).
// FP4 experts at moe_tc shapes also run with every other small-tile kernel (moe_tc_set_small:
// the former launches, the fused persistent kernel, the lean kernels with a 4- / 8-chunk
// ring) and must equal the default's output bit for bit (the same MMAs per output, the
// same K split and slice order).
OpCase moe_experts_case(std::string name, WKind kind, int64_t n, int64_t E, int64_t k, int64_t inter, int64_t dim,
                        int64_t sets, int64_t used, bool invariant, bool residual, bool bad_id = false,
                        int64_t cpu_every = 1, ops::Activations act = ops::Activations::kF32,
                        bool both_big = false) {
  const bool bf16 = act == ops::Activations::kBF16;
  return {name, bf16 ? "moe_experts_bf16" : "moe_experts", [=](Rng& rng) {
            const auto& w = expert_weights(kind, inter, dim, sets);
            std::vector<ops::MoeExpertRef> hexp(E), dexp(E);
            for (int64_t e = 0; e < E; ++e) {
              const size_t b = size_t(e % sets) * 3;
              hexp[e] = {w[b]->ref(false), w[b + 1]->ref(false), w[b + 2]->ref(false)};
              dexp[e] = {w[b]->ref(true), w[b + 1]->ref(true), w[b + 2]->ref(true)};
            }
            const auto x = randn(rng, n * dim);
            auto ids = ragged_ids(rng, n, k, used);
            if (bad_id) ids[k] = -1;  // token 1's first slot contributes nothing
            const auto wts = uniform(rng, n * k, 0.1f, 1.0f);
            const auto res = randn(rng, n * dim, 0.5f);
            // The oracle's tokens, gathered.
            std::vector<float> cx, cw, cres;
            std::vector<int64_t> cids, picked;
            for (int64_t t = 0; t < n; t += cpu_every) {
              picked.push_back(t);
              cx.insert(cx.end(), x.begin() + t * dim, x.begin() + (t + 1) * dim);
              cres.insert(cres.end(), res.begin() + t * dim, res.begin() + (t + 1) * dim);
              cids.insert(cids.end(), ids.begin() + t * k, ids.begin() + (t + 1) * k);
              cw.insert(cw.end(), wts.begin() + t * k, wts.begin() + (t + 1) * k);
            }
            const int64_t m = int64_t(picked.size());
            std::vector<float> y(m * dim);
            ops::cpu::moe_experts({cx.data(), m, k, cids.data(), cw.data(), hexp.data(), E, 10.0f,
                                   residual ? cres.data() : nullptr, y.data(), act});
            const ops::cuda::MoeExpertTable table(dexp);
            const auto mode = invariant ? ops::cuda::LinearMode::kInvariant : ops::cuda::LinearMode::kAuto;
            Dev<float> dx(x), dw(wts), dres(res), dy(n * dim);
            Dev<int64_t> dids(ids);
            auto run_mode = [&](int64_t t0, int64_t cnt, float* out, ops::cuda::LinearMode md) {
              ops::cuda::moe_experts({dx.get() + t0 * dim, cnt, k, dids.get() + t0 * k, dw.get() + t0 * k, nullptr, E,
                                      10.0f, residual ? dres.get() + t0 * dim : nullptr, out, act},
                                     table, md, nullptr);
            };
            auto run = [&](int64_t t0, int64_t cnt, float* out) { run_mode(t0, cnt, out, mode); };
            run(0, n, dy.get());
            const std::vector<float> full = dy.host();
            std::vector<float> got(m * dim);
            for (int64_t i = 0; i < m; ++i)
              std::copy_n(full.begin() + picked[size_t(i)] * dim, dim, got.begin() + i * dim);
            Outputs o{{{"y", y, got}}, {}};
            if (both_big) {
              const kernels::MoeTcBig def = kernels::moe_tc_big();
              for (auto [kern, label] :
                   {std::pair{kernels::MoeTcBig::kWide, "wide_vs_default_differ"},
                    std::pair{kernels::MoeTcBig::kWgmmaWsS, "wgmmawss_vs_default_differ"}}) {
                Dev<float> alt(n * dim);
                kernels::moe_tc_set_big(kern);
                run(0, n, alt.get());
                kernels::moe_tc_set_big(def);
                const std::vector<float> other = alt.host();
                o.ints.push_back({label, {0}, {int64_t(std::memcmp(other.data(), full.data(), full.size() * 4) != 0)}});
                if (kern == kernels::MoeTcBig::kWgmmaWsS) {
                  // Also against the CPU on its own (a rounding difference in the k16 step
                  // would show here only).
                  std::vector<float> og(m * dim);
                  for (int64_t i = 0; i < m; ++i)
                    std::copy_n(other.begin() + picked[size_t(i)] * dim, dim, og.begin() + i * dim);
                  o.floats.push_back({"y_wgmmawss", y, og});
                }
              }
            }
            if (kind == WKind::kFp4E8m0 && inter % 128 == 0 && dim % 128 == 0) {  // moe_tc shapes
              // Every other small-tile kernel on the same batch, then back to the default.
              // Each with the three-launch plan and, where n k <= 1024, the one-launch plan
              // (moe_plan_set_single_launch_max 0 / 1024).
              const kernels::MoeTcSmall def = kernels::moe_tc_small();
              const int def_one = kernels::moe_plan_single_launch_max();
              for (auto [kern, label] : {std::pair{kernels::MoeTcSmall::kFormer, "former"},
                                         std::pair{kernels::MoeTcSmall::kFused, "fused"},
                                         std::pair{kernels::MoeTcSmall::kLean4, "lean4"},
                                         std::pair{kernels::MoeTcSmall::kLean8, "lean8"},
                                         std::pair{kernels::MoeTcSmall::kLean4T, "lean4t"}})
                for (bool one : {false, true}) {
                  if (one && n * k > kernels::kMoePlanOneMax) continue;
                  Dev<float> alt(n * dim);
                  kernels::moe_tc_set_small(kern);
                  kernels::moe_plan_set_single_launch_max(one ? kernels::kMoePlanOneMax : 0);
                  run(0, n, alt.get());
                  kernels::moe_tc_set_small(def);
                  kernels::moe_plan_set_single_launch_max(def_one);
                  const std::vector<float> other = alt.host();
                  o.ints.push_back({std::string(label) + (one ? "_plan1" : "_plan3") + "_vs_default_differ",
                                    {0},
                                    {int64_t(std::memcmp(other.data(), full.data(), full.size() * 4) != 0)}});
                }
            } else {  // other formats: both plans
              const int def_one = kernels::moe_plan_single_launch_max();
              for (bool one : {false, true}) {
                if (one && n * k > kernels::kMoePlanOneMax) continue;
                Dev<float> alt(n * dim);
                kernels::moe_plan_set_single_launch_max(one ? kernels::kMoePlanOneMax : 0);
                run(0, n, alt.get());
                kernels::moe_plan_set_single_launch_max(def_one);
                const std::vector<float> other = alt.host();
                o.ints.push_back({one ? "plan1_vs_default_differ" : "plan3_vs_default_differ", {0},
                                  {int64_t(std::memcmp(other.data(), full.data(), full.size() * 4) != 0)}});
              }
            }
            if (kind == WKind::kFp4E8m0 && inter % 128 == 0 && dim % 128 == 0 && !bf16 && !invariant && n > 8) {
              // kF32 with the big-tile threshold at 8 rows (the former behaviour; the default
              // is 32: experts with 9..32 rows on the small tiles) against the CPU; and the
              // default, where no expert has more than 32 rows, bitwise against kInvariant
              // (small tiles only).
              const int was = kernels::moe_tc_f32_big_threshold();
              Dev<float> alt(n * dim);
              kernels::moe_tc_set_f32_big_threshold(8);
              run(0, n, alt.get());
              kernels::moe_tc_set_f32_big_threshold(was);
              const std::vector<float> other = alt.host();
              std::vector<float> got32(m * dim);
              for (int64_t i = 0; i < m; ++i)
                std::copy_n(other.begin() + picked[size_t(i)] * dim, dim, got32.begin() + i * dim);
              o.floats.push_back({"y_f32big8", y, got32});
              std::vector<int64_t> cnt(size_t(E), 0);
              for (int64_t v : ids)
                if (v >= 0 && v < E) ++cnt[size_t(v)];
              if (*std::max_element(cnt.begin(), cnt.end()) <= kernels::moe_tc_f32_big_threshold()) {
                Dev<float> inv(n * dim);
                run_mode(0, n, inv.get(), ops::cuda::LinearMode::kInvariant);
                const std::vector<float> iv = inv.host();
                o.ints.push_back({"f32big_default_vs_invariant_differ", {0},
                                  {int64_t(std::memcmp(iv.data(), full.data(), iv.size() * 4) != 0)}});
              }
            }
            if (invariant) {
              // Sub-batches against the full batch: with the default small-tile kernel, and
              // at moe_tc shapes with every small-tile kernel (a token's bits may depend
              // on neither the batch nor the kernel).
              const kernels::MoeTcSmall def = kernels::moe_tc_small();
              std::vector<kernels::MoeTcSmall> kinds = {def};
              if (kind == WKind::kFp4E8m0 && inter % 128 == 0 && dim % 128 == 0)
                for (auto kern : {kernels::MoeTcSmall::kFormer, kernels::MoeTcSmall::kFused,
                                  kernels::MoeTcSmall::kLean4, kernels::MoeTcSmall::kLean8, kernels::MoeTcSmall::kLean4T})
                  if (kern != def) kinds.push_back(kern);
              int64_t diff = 0;
              for (auto kern : kinds) {
                kernels::moe_tc_set_small(kern);
                for (auto [t0, cnt] : {std::pair<int64_t, int64_t>{0, 1}, {n / 2, n - n / 2}}) {
                  Dev<float> sub(cnt * dim);
                  run(t0, cnt, sub.get());
                  const std::vector<float> part = sub.host();
                  diff += int64_t(std::memcmp(part.data(), full.data() + t0 * dim, part.size() * 4) != 0);
                }
              }
              kernels::moe_tc_set_small(def);
              o.ints.push_back({"sub_batches_bitwise_differ", {0}, {diff}});
            }
            return o;
          }};
}

// moe_route_experts (router + experts, the selection folded into the one-launch plan where
// n * k <= 64 and n <= 32) against the CPU router + experts, and bitwise against the two
// separate ops (moe_router, moe_experts) and against itself with the fold off
// (kernels::moe_plan_set_select(false): router_select as its own launch). n * k above the
// one-launch plan's 64 takes the unfused path inside the op (checked the same way).
OpCase route_experts_case(std::string name, int64_t n, int64_t E, int64_t k, int64_t inter, int64_t dim,
                          ops::Activations act) {
  const bool bf16 = act == ops::Activations::kBF16;
  return {name, bf16 ? "moe_experts_bf16" : "moe_experts", [=](Rng& rng) {
            const auto& w = expert_weights(WKind::kFp4E8m0, inter, dim, 3);
            std::vector<ops::MoeExpertRef> hexp(E), dexp(E);
            for (int64_t e = 0; e < E; ++e) {
              const size_t b = size_t(e % 3) * 3;
              hexp[e] = {w[b]->ref(false), w[b + 1]->ref(false), w[b + 2]->ref(false)};
              dexp[e] = {w[b]->ref(true), w[b + 1]->ref(true), w[b + 2]->ref(true)};
            }
            const auto gate = random_weight(rng, WKind::kBF16, E, dim, 0.02f);
            const auto x = randn(rng, n * dim);
            const auto bias = randn(rng, E, 0.05f);
            const auto res = randn(rng, n * dim, 0.5f);
            // CPU: router, then experts on its picks.
            std::vector<int64_t> ids(n * k);
            std::vector<float> wts(n * k), y(n * dim);
            ops::MoeRouterParams hr;
            hr.x = x.data();
            hr.n = n;
            hr.gate = gate->ref(false);
            hr.bias = bias.data();
            hr.top_k = k;
            hr.norm_topk_prob = true;
            hr.routed_scaling_factor = 1.5f;
            hr.expert_ids = ids.data();
            hr.expert_weights = wts.data();
            ops::cpu::moe_router(hr);
            ops::cpu::moe_experts({x.data(), n, k, ids.data(), wts.data(), hexp.data(), E, 10.0f, res.data(), y.data(), act});
            const ops::cuda::MoeExpertTable table(dexp);
            Dev<float> dx(x), db(bias), dres(res);
            struct Run {
              std::vector<int64_t> ids;
              std::vector<float> wts, y;
            };
            // 0: fused op, 1: router + experts, 2: fused op with the fold off; 3 / 4: 0 / 2 with
            // the batch-1 kernels of NOTES 28 (kDmmaDeep logits, moe_plan_fast_kernel)
            auto run = [&](int how) {
              Dev<int64_t> did(n * k);
              Dev<float> dw(n * k), dy(n * dim);
              ops::MoeRouterParams r = hr;
              r.x = dx.get();
              r.gate = gate->ref(true);
              r.bias = db.get();
              r.expert_ids = did.get();
              r.expert_weights = dw.get();
              const ops::MoeExpertsParams p{dx.get(), n, k, did.get(), dw.get(), nullptr, E, 10.0f, dres.get(), dy.get(), act};
              const bool def = kernels::moe_plan_select(), def_fast = kernels::moe_plan_fast();
              const kernels::RouterLogitsPath def_path = kernels::router_logits_path();
              kernels::moe_plan_set_select(how != 2 && how != 4);
              const bool def_lean = kernels::moe_plan_lean();
              kernels::router_logits_set_path(how == 5 || how == 7 ? kernels::RouterLogitsPath::kDmmaSplit
                                              : how >= 3           ? kernels::RouterLogitsPath::kDmmaDeep
                                                                   : kernels::RouterLogitsPath::kDmma);
              kernels::moe_plan_set_fast(how >= 3);
              kernels::moe_plan_set_lean(how >= 6);
              if (how == 1) {
                ops::cuda::moe_router(r, nullptr);
                ops::cuda::moe_experts(p, table, ops::cuda::LinearMode::kAuto, nullptr);
              } else {
                ops::cuda::moe_route_experts(r, p, table, ops::cuda::LinearMode::kAuto, nullptr);
              }
              kernels::moe_plan_set_select(def);
              kernels::moe_plan_set_fast(def_fast);
              kernels::moe_plan_set_lean(def_lean);
              kernels::router_logits_set_path(def_path);
              return Run{did.host(), dw.host(), dy.host()};
            };
            const Run fused = run(0), separate = run(1), unfolded = run(2), fresh = run(3), fresh_off = run(4);
            // NOTES 48. 5: the kDmmaSplit logits (other low bits: against the oracle); 6: the lean
            // plan (register pick, ids / weights from shared memory, PDL) after kDmmaDeep, bitwise
            // the fused op; 7: the lean plan after kDmmaSplit (its trigger), bitwise 5.
            const Run split = run(5), lean = run(6), split_lean = run(7);
            auto differ_from = [](const Run& o, const Run& r) {
              return int64_t(o.ids != r.ids || std::memcmp(o.wts.data(), r.wts.data(), o.wts.size() * 4) != 0 ||
                             std::memcmp(o.y.data(), r.y.data(), o.y.size() * 4) != 0);
            };
            auto differ = [&](const Run& o) {
              return int64_t(o.ids != fused.ids || std::memcmp(o.wts.data(), fused.wts.data(), o.wts.size() * 4) != 0 ||
                             std::memcmp(o.y.data(), fused.y.data(), o.y.size() * 4) != 0);
            };
            return Outputs{{{"y", y, fused.y},
                            {"weights", wts, fused.wts},
                            {"y_new_kernels", y, fresh.y},
                            {"y_split", y, split.y},
                            {"weights_split", wts, split.wts}},
                           {{"ids", ids, fused.ids},
                            {"ids_new_kernels", ids, fresh.ids},
                            {"ids_split", ids, split.ids},
                            {"separate_ops_differ", {0}, {differ(separate)}},
                            {"fold_off_differ", {0}, {differ(unfolded)}},
                            {"new_kernels_differ", {0}, {differ(fresh)}},
                            {"new_kernels_fold_off_differ", {0}, {differ(fresh_off)}},
                            {"lean_plan_differ", {0}, {differ(lean)}},
                            {"split_lean_plan_differ", {0}, {differ_from(split_lean, split)}}}};
          }};
}

}  // namespace

std::vector<OpCase> linear_cases() {
  std::vector<OpCase> cases;
  // Batches 1..8 take the gemv path, 9+ the tiled path.
  for (WKind k : {WKind::kF32, WKind::kBF16, WKind::kF16, WKind::kFp8E8m0, WKind::kFp8F32Scale, WKind::kFp4E8m0})
    for (int64_t n : {1, 3, 8, 13, 64}) cases.push_back(linear_case(k, n, 300, 1280));
  // V4.1 shapes: wq_a [1280, 5120] FP8, an expert's w2 [5120, 2304] FP4.
  cases.push_back(linear_case(WKind::kFp8E8m0, 1, 1280, 5120));
  cases.push_back(linear_case(WKind::kFp8E8m0, 64, 1280, 5120));
  cases.push_back(linear_case(WKind::kFp4E8m0, 2, 5120, 2304));
  // A row slice (the grouped wo_a), and columns no vector path can take.
  cases.push_back(linear_case(WKind::kFp8E8m0, 4, 256, 512, 96, 64, "_slice"));
  cases.push_back(linear_case(WKind::kFp8E8m0, 20, 256, 512, 96, 64, "_slice"));
  cases.push_back(linear_case(WKind::kBF16, 2, 70, 100));
  cases.push_back(linear_case(WKind::kF32, 5, 33, 7));
  return cases;
}

std::vector<OpCase> moe_cases() {
  std::vector<OpCase> cases = {
      router_case("moe_router_v41_bf16", WKind::kBF16, 7, 384, 5120, 6, true, false, true),
      router_case("moe_router_ties_f32", WKind::kF32, 4, 64, 256, 6, false, true, true),
      router_case("moe_router_top1_nonorm", WKind::kBF16, 5, 16, 64, 1, true, false, false),
      router_wide_case("router_logits_wide_v41_bf16", WKind::kBF16, 70, 384, 5120),
      router_wide_case("router_logits_wide_odd_f32", WKind::kF32, 9, 13, 256),
      router_dmma_case("router_logits_dmma_v41_bf16", WKind::kBF16, 200, 3, 384, 5120),
      router_dmma_case("router_logits_dmma_odd_f32", WKind::kF32, 70, 9, 13, 256),
      router_dmma_case("router_logits_dmma_f16_small", WKind::kF16, 5, 2, 40, 128),
      // The cases above run the default path (kDmmaDeep: kDmma's bits); the vector kernel against the oracle too.
      router_path_case("moe_router_vec_v41_bf16", kernels::RouterLogitsPath::kVec,
                       router_case("x", WKind::kBF16, 77, 384, 5120, 6, true, false, true)),
      router_path_case("moe_router_vec_ties_f32", kernels::RouterLogitsPath::kVec,
                       router_case("x", WKind::kF32, 4, 64, 256, 6, false, true, true)),
      expert_case("swiglu_expert_fp4_routed", WKind::kFp4E8m0, 3, 256, 512, true, 10.0f),
      expert_case("swiglu_expert_fp8_shared_n12", WKind::kFp8E8m0, 12, 256, 512, false, 10.0f),
      expert_case("swiglu_expert_bf16_nolimit", WKind::kBF16, 2, 64, 128, true, 0.0f),
      // Grouped experts at the V4.1 shapes: 384 FP4 experts [2304 x 5120], top-6; ragged
      // loads (hot experts, 64..383 never picked). n = 256 in kAuto runs both the gemv
      // and the tensor-core tiles; the invariant case checks sub-batch bits too. The
      // large batches check every 16th / 8th token against the CPU (its double sums
      // take seconds per seed at this size).
      moe_experts_case("moe_experts_v41_fp4_n1", WKind::kFp4E8m0, 1, 384, 6, 2304, 5120, 4, 64, false, true),
      moe_experts_case("moe_experts_v41_fp4_n8", WKind::kFp4E8m0, 8, 384, 6, 2304, 5120, 4, 64, false, true),
      // kBF16 at the V4.1 shapes, n = 5 (8-row small tiles; NOTES 28): every small-tile
      // kernel, incl. the row-piece ones (stage 1: 10 chunks per slice, pieces 4 + 4 + 2 / 5 x 2;
      // stage 2: 9, an odd tail), bitwise against the default (n = 1, 8: below).
      moe_experts_case("moe_experts_v41_fp4_bf16_n5", WKind::kFp4E8m0, 5, 384, 6, 2304, 5120, 4, 64, false, true, false,
                       1, ops::Activations::kBF16),
      // Router + experts in one op (the selection folded into the plan): 1 and 8 tokens
      // (fused), 12 x top-6 of 384 (72 assignments: the unfused path), kBF16 and kF32.
      route_experts_case("moe_route_experts_bf16_n1", 1, 384, 6, 128, 256, ops::Activations::kBF16),
      route_experts_case("moe_route_experts_bf16_n8", 8, 384, 6, 128, 256, ops::Activations::kBF16),
      // NOTES 28: n = 2..7 and the V4.1 dim (40 groups per DMMA warp: the deep ring wraps).
      route_experts_case("moe_route_experts_bf16_n3", 3, 384, 6, 128, 256, ops::Activations::kBF16),
      route_experts_case("moe_route_experts_bf16_n6", 6, 384, 6, 128, 256, ops::Activations::kBF16),
      route_experts_case("moe_route_experts_bf16_n2_v41dim", 2, 384, 6, 128, 5120, ops::Activations::kBF16),
      router_dmma_deep_case("router_logits_dmmadeep_v41_bf16", WKind::kBF16, 384, 5120),
      router_dmma_deep_case("router_logits_dmmadeep_odd_f32", WKind::kF32, 13, 384),
      // NOTES 48: kDmmaSplit (K in 16 pieces) against kVec (one f32 ulp), batch-invariant
      // (few tokens alone vs inside n; across n = 1..130 and both tile shapes), deterministic;
      // dim 256 is not a multiple of 512 (kDmma's order there); the router against the oracle.
      router_dmma_case("router_logits_split_v41_bf16", WKind::kBF16, 200, 3, 384, 5120,
                       kernels::RouterLogitsPath::kDmmaSplit),
      router_dmma_case("router_logits_split_v41_bf16_n8", WKind::kBF16, 8, 1, 384, 5120,
                       kernels::RouterLogitsPath::kDmmaSplit),
      router_dmma_case("router_logits_split_odd_f32", WKind::kF32, 70, 9, 13, 512, kernels::RouterLogitsPath::kDmmaSplit),
      router_dmma_case("router_logits_split_f16_small", WKind::kF16, 5, 2, 40, 1024,
                       kernels::RouterLogitsPath::kDmmaSplit),
      router_dmma_case("router_logits_split_fallback_f32", WKind::kF32, 70, 9, 13, 256,
                       kernels::RouterLogitsPath::kDmmaSplit),
      router_split_invariance_case("router_logits_split_invariance_v41_bf16", WKind::kBF16, 384, 5120),
      router_split_invariance_case("router_logits_split_invariance_f32", WKind::kF32, 24, 1536),
      router_path_case("moe_router_split_v41_bf16", kernels::RouterLogitsPath::kDmmaSplit,
                       router_case("x", WKind::kBF16, 77, 384, 5120, 6, true, false, true)),
      router_path_case("moe_router_split_v41_bf16_n1", kernels::RouterLogitsPath::kDmmaSplit,
                       router_case("x", WKind::kBF16, 1, 384, 5120, 6, true, false, true)),
      router_path_case("moe_router_split_ties_f32", kernels::RouterLogitsPath::kDmmaSplit,
                       router_case("x", WKind::kF32, 4, 64, 512, 6, false, true, true)),
      route_experts_case("moe_route_experts_bf16_n12", 12, 384, 6, 128, 256, ops::Activations::kBF16),
      route_experts_case("moe_route_experts_f32_n5_e16", 5, 16, 4, 128, 256, ops::Activations::kF32),
      moe_experts_case("moe_experts_v41_fp4_n256", WKind::kFp4E8m0, 256, 384, 6, 2304, 5120, 4, 64, false, true,
                       false, 16),
      moe_experts_case("moe_experts_v41_fp4_n64_invariant", WKind::kFp4E8m0, 64, 384, 6, 2304, 5120, 4, 64, true,
                       true, false, 8),
      // Small shapes, other formats: f32 (gemv only; a slot with id -1), FP8 with the
      // tensor-core tiles, BF16 in invariant mode.
      moe_experts_case("moe_experts_f32_n13_badid", WKind::kF32, 13, 8, 2, 64, 128, 8, 8, false, false, true),
      moe_experts_case("moe_experts_fp8_n40", WKind::kFp8E8m0, 40, 16, 4, 64, 256, 3, 16, false, true),
      moe_experts_case("moe_experts_bf16_n20_invariant", WKind::kBF16, 20, 8, 2, 64, 128, 2, 8, true, false),
  };
  // The FP4 tensor-core tiles (moe_tc: e2m1, 1x32 ue8m0, K % 128 == 0) at every tile
  // height: n = 1, 3, 8 (1-, 4-, 8-row small tiles), 9 (an expert can get 9 rows: the big
  // tiles), 64 and 300 (big tiles of up to 64 rows, ragged), in both activation modes
  // (kF32: 3 bf16 planes, exact; kBF16: x and h rounded, one MMA per tile, big tiles too).
  for (auto act : {ops::Activations::kF32, ops::Activations::kBF16}) {
    const std::string m = act == ops::Activations::kBF16 ? "_bf16" : "_f32";
    for (int64_t n : {1, 3, 8, 9, 64, 300})
      cases.push_back(moe_experts_case("moe_experts_fp4tc" + m + "_n" + std::to_string(n), WKind::kFp4E8m0, n, 16, 4,
                                       128, 256, 3, 16, false, true, false, 1, act));
    cases.push_back(moe_experts_case("moe_experts_fp4tc" + m + "_n40_invariant", WKind::kFp4E8m0, 40, 16, 4, 128,
                                     384, 3, 16, true, false, false, 1, act));
  }
  // The wide big-tile kernel (kBF16, tiles of up to 80 rows, 256 weight rows per block)
  // against the wgmma tiles, bitwise: ragged loads over 12 experts (~67 rows each, so some
  // experts take two tiles), K = 384 (3 chunks: the whole cp.async ring), dim 384 (the
  // second stage-2 block has inactive warps); and at the V4.1 shape at prefill size
  // (T = 4096: ~48 rows per cold expert, ~1500 per hot one), the oracle on 8 tokens.
  cases.push_back(moe_experts_case("moe_experts_fp4tc_bf16_n200_i384", WKind::kFp4E8m0, 200, 16, 4, 384, 384, 3, 12,
                                   false, true, false, 1, ops::Activations::kBF16, true));
  cases.push_back(moe_experts_case("moe_experts_fp4tc_bf16_n300_both", WKind::kFp4E8m0, 300, 16, 4, 128, 256, 3, 16,
                                   false, true, false, 1, ops::Activations::kBF16, true));
  cases.push_back(moe_experts_case("moe_experts_v41_fp4_bf16_n4096", WKind::kFp4E8m0, 4096, 384, 6, 2304, 5120, 4, 384,
                                   false, true, false, 512, ops::Activations::kBF16, true));
  // Prefill sizes with few experts, for the wgmma tiles (128 rows, a template case per 16
  // rows; kAuto takes them from 2048 tokens, so the default here is the wide kernel and
  // the wgmma kernel runs in the both_big comparison): 8 / 12 experts at ~300 / ~500 rows (hot ones
  // more) give full tiles and tails of many heights; K = 640 / 384 (5 and 3 chunks, 6
  // stage-1 and 5 stage-2 row blocks) and K = 256 / 128 (2 chunks, then one: fewer than the
  // 4-stage ring). One row block per block at these tile counts; the V4.1 n4096 case above
  // runs 3 per block (the last group of stage 2 shorter). The oracle on every 4th token.
  cases.push_back(moe_experts_case("moe_experts_fp4tc_bf16_n1200_wg", WKind::kFp4E8m0, 1200, 8, 2, 384, 640, 3, 8,
                                   false, true, false, 4, ops::Activations::kBF16, true));
  cases.push_back(moe_experts_case("moe_experts_fp4tc_bf16_n2000_wg_k128", WKind::kFp4E8m0, 2000, 12, 3, 128, 256, 3,
                                   12, false, false, false, 4, ops::Activations::kBF16, true));
  // Enough assignments (32100: a tile bound of 514) for 2 row blocks per wgmma block, with
  // odd chunk counts (5 in stage 1, 3 in stage 2): a block's chunk stream then crosses row
  // blocks mid-ring, and a stage-2 group is one row block short. Oracle on every 64th token.
  cases.push_back(moe_experts_case("moe_experts_fp4tc_bf16_n10700_wg_items", WKind::kFp4E8m0, 10700, 12, 3, 384, 640,
                                   3, 12, false, true, false, 64, ops::Activations::kBF16, true));
  // kBF16 at the V4.1 shape (batch 1, 8 and the mixed 256), and on the SIMT paths: FP4
  // whose inter (96) no tensor-core tile takes, FP8 (3-term mma tiles on rounded x).
  cases.push_back(moe_experts_case("moe_experts_v41_fp4_bf16_n1", WKind::kFp4E8m0, 1, 384, 6, 2304, 5120, 4, 64, false,
                                   true, false, 1, ops::Activations::kBF16));
  cases.push_back(moe_experts_case("moe_experts_v41_fp4_bf16_n8", WKind::kFp4E8m0, 8, 384, 6, 2304, 5120, 4, 64, false,
                                   true, false, 1, ops::Activations::kBF16));
  cases.push_back(moe_experts_case("moe_experts_v41_fp4_bf16_n256", WKind::kFp4E8m0, 256, 384, 6, 2304, 5120, 4, 64,
                                   false, true, false, 16, ops::Activations::kBF16));
  cases.push_back(moe_experts_case("moe_experts_fp4simt_bf16_n20", WKind::kFp4E8m0, 20, 8, 2, 96, 256, 2, 8, false,
                                   true, false, 1, ops::Activations::kBF16));
  cases.push_back(moe_experts_case("moe_experts_fp8_bf16_n40", WKind::kFp8E8m0, 40, 16, 4, 64, 256, 3, 16, false,
                                   true, false, 1, ops::Activations::kBF16));
  return cases;
}

}  // namespace deepinfer::testing_cuda
