// linear in every weight format (both kernel paths), the MoE router and the
// SwiGLU expert.
#include <algorithm>
#include <cmath>

#include "harness.h"
#include "ops/cuda/cuda_ops.h"
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
  return {
      router_case("moe_router_v41_bf16", WKind::kBF16, 7, 384, 5120, 6, true, false, true),
      router_case("moe_router_ties_f32", WKind::kF32, 4, 64, 256, 6, false, true, true),
      router_case("moe_router_top1_nonorm", WKind::kBF16, 5, 16, 64, 1, true, false, false),
      expert_case("swiglu_expert_fp4_routed", WKind::kFp4E8m0, 3, 256, 512, true, 10.0f),
      expert_case("swiglu_expert_fp8_shared_n12", WKind::kFp8E8m0, 12, 256, 512, false, 10.0f),
      expert_case("swiglu_expert_bf16_nolimit", WKind::kBF16, 2, 64, 128, true, 0.0f),
  };
}

}  // namespace deepinfer::testing_cuda
