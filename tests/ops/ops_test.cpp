// Op-level checks of the CPU oracle against values stated in MODEL_V41.md and
// against small hand-computed cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>
#include <vector>

#include "common/numeric.h"
#include "ops/attention.h"
#include "ops/hyper_connection.h"
#include "ops/indexer.h"
#include "ops/linear.h"
#include "ops/moe.h"
#include "ops/rope.h"
#include "fp8_test_weight.h"

namespace deepinfer {
namespace {

TEST(Rope, CompressRopeYarnFrequenciesMatchSpec) {
  RopeParams r;
  r.theta = 160000;
  r.yarn = true;
  r.factor = 16;
  r.beta_fast = 32;
  r.beta_slow = 1;
  r.original_max_position_embeddings = 65536;
  auto f = ops::rope_inv_freq(r, 64);
  ASSERT_EQ(f.size(), 32u);
  EXPECT_NEAR(f[15], 3.635539e-3, 1e-9);
  EXPECT_NEAR(f[16], 2.265625e-3, 1e-9);
  EXPECT_NEAR(f[20], 2.969778e-4, 1e-10);
  EXPECT_NEAR(f[24], 1.953125e-5, 1e-11);
  EXPECT_NEAR(f[25], 5.3723e-6, 1e-10);
  EXPECT_NEAR(f[31], 5.680529e-7, 1e-12);
  RopeParams m;
  m.theta = 10000;
  EXPECT_NEAR(ops::rope_inv_freq(m, 64)[31], 1.3335e-4, 1e-8);
}

TEST(Rope, InverseUndoesForward) {
  std::vector<float> x(2 * 8), orig;
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * float(i) - 0.5f;
  orig = x;
  std::vector<int64_t> pos = {3, 1000};
  std::vector<float> inv = {0.5f, 0.01f};
  ops::cpu::rope({x.data(), 2, 1, 8, 4, pos.data(), inv.data()});
  EXPECT_EQ(x[0], orig[0]);  // leading channels untouched
  EXPECT_NE(x[4], orig[4]);
  ops::cpu::rope({x.data(), 2, 1, 8, 4, pos.data(), inv.data(), true});
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], orig[i], 1e-5);
}

TEST(SinkAttention, SinkOnlyEnlargesTheDenominator) {
  // One head, one entry with logit 0 and a sink of 0: p = 1/2.
  std::vector<float> q = {0, 0}, kv = {2, 4}, out(2), sink = {0};
  std::vector<int64_t> off = {0, 1}, ids = {0};
  ops::cpu::sink_attention({q.data(), kv.data(), off.data(), ids.data(), sink.data(), 1.0f, out.data(), 1, 1, 2});
  EXPECT_FLOAT_EQ(out[0], 1.0f);
  EXPECT_FLOAT_EQ(out[1], 2.0f);
  // No entries: finite zero output.
  std::vector<int64_t> off0 = {0, 0};
  ops::cpu::sink_attention({q.data(), kv.data(), off0.data(), ids.data(), sink.data(), 1.0f, out.data(), 1, 1, 2});
  EXPECT_EQ(out[0], 0.0f);
}

// Activations::kBF16 (ops/attention.h): q and entries rounded to bf16, base-2 logits,
// an integer max, probabilities rounded to bf16 before PV. One head, dim 1, q = 1 + 2^-10
// (rounds to 1), entries +-(1 + 2^-10) (round to +-1), a scale whose base-2 factor is
// 0.5: y = +-0.5, no sink (-inf), M = ceil(0.5) = 1, so e = 2^-0.5, 2^-1.5 (fp32) and
// p = bf16(e) = 0.70703125, 0.353515625; D = e0 + e1 = 1.5 * 2^-0.5 (unrounded);
// out = (p0 - p1) / D = 0.33329... kF32 gives tanh(ln 2 / 2) = 1/3 instead.
TEST(SinkAttention, Bf16ModeRoundsOperandsAndProbabilities) {
  const float scale = float(0.5 / 1.44269504088896340736);
  ASSERT_EQ(ops::attention_log2_scale(scale), 0.5f);
  const float a = 1.0f + 1.0f / 1024.0f;
  std::vector<float> q = {a}, kv = {a, -a}, out(1), sink = {-INFINITY};
  std::vector<int64_t> off = {0, 2}, ids = {0, 1};
  ops::SinkAttentionParams p{q.data(), kv.data(), off.data(), ids.data(), sink.data(), scale, out.data(), 1, 1, 1};
  p.act = ops::Activations::kBF16;
  ops::cpu::sink_attention(p);
  const double d = 1.5 * std::sqrt(0.5);
  EXPECT_NEAR(out[0], (0.70703125 - 0.353515625) / d, 1e-7);
  EXPECT_LT(out[0], 1.0f / 3.0f - 2e-5f);  // the rounding is visible
  // kF32 on the same inputs: unrounded a, exact softmax: a * tanh(a^2 * scale).
  p.act = ops::Activations::kF32;
  ops::cpu::sink_attention(p);
  EXPECT_NEAR(out[0], double(a) * std::tanh(double(a) * a * scale), 1e-6);
  // The integer max: the same logits shifted by a whole number (q scaled by 2 doubles the
  // logits: y = +-1, M = 1, e = 1, 2^-2, both exact in bf16) leave nothing to round.
  q[0] = 2.0f;
  kv = {1.0f, -1.0f};
  p.act = ops::Activations::kBF16;
  ops::cpu::sink_attention(p);
  EXPECT_FLOAT_EQ(out[0], float((1.0 - 0.25) / 1.25));
  // No entries: zeros, also with a finite sink.
  sink[0] = 0.3f;
  std::vector<int64_t> off0 = {0, 0};
  p.offsets = off0.data();
  out[0] = 7.0f;
  ops::cpu::sink_attention(p);
  EXPECT_EQ(out[0], 0.0f);
}

TEST(HyperConnection, SinkhornIsNearlyDoublyStochastic) {
  const int64_t hc = 4, dim = 8, mix = (2 + hc) * hc;
  std::vector<float> h(hc * dim), fn(mix * hc * dim), base(mix), scale = {1.0f, 1.0f, 1.0f};
  for (size_t i = 0; i < h.size(); ++i) h[i] = std::sin(float(i));
  for (size_t i = 0; i < fn.size(); ++i) fn[i] = 0.3f * std::cos(float(i) * 0.7f);
  for (size_t i = 0; i < base.size(); ++i) base[i] = 0.1f * float(i % 5);
  std::vector<float> pre(hc), post(hc), comb(hc * hc);
  ops::cpu::hc_mixes({h.data(), 1, hc, dim, fn.data(), base.data(), scale.data(), 1e-20f, 1e-6f, 20, pre.data(),
                      post.data(), comb.data()});
  for (int64_t k = 0; k < hc; ++k) {
    float col = 0, row = 0;
    for (int64_t j = 0; j < hc; ++j) {
      col += comb[j * hc + k];
      row += comb[k * hc + j];
    }
    EXPECT_NEAR(col, 1.0f, 1e-5);  // ends on a column step
    EXPECT_NEAR(row, 1.0f, 1e-3);
    EXPECT_GT(pre[k], 0.0f);
    EXPECT_LT(post[k], 2.0f);
  }
}

TEST(IndexerSelect, VisibilityTiesAndCandidates) {
  // 2 queries, 8 keys, ratio 1. Query positions 3 and 7: 4 and 8 visible keys.
  std::vector<float> scores = {1, 5, 5, 2, 9, 9, 9, 9,  //
                               1, 5, 5, 2, 0, 0, 3, 3};
  std::vector<int64_t> pos = {3, 7};
  ops::IndexerSelectParams p;
  p.scores = scores.data();
  p.n = 2;
  p.num_keys = 8;
  p.positions = pos.data();
  p.ratio = 1;
  p.top_k = 2;
  auto sel = ops::cpu::indexer_select(p);
  // Query 0: keys 4..7 invisible; ties 5/5 -> ids 1, 2.
  EXPECT_EQ(std::vector<int64_t>(sel.ids.begin(), sel.ids.begin() + sel.offsets[1]), (std::vector<int64_t>{1, 2}));
  // Query 1: 5, 5 best.
  EXPECT_EQ(std::vector<int64_t>(sel.ids.begin() + sel.offsets[1], sel.ids.end()), (std::vector<int64_t>{1, 2}));

  // Level 1 with blocks of 4, keep 1 block: the newest block (pinned) wins for query 1.
  std::vector<float> s2 = {1, 5, 5, 2, 0, 0, 3, 3};
  std::vector<int64_t> pos2 = {7};
  std::vector<uint8_t> cand(8);
  ops::IndexerSelectParams c;
  c.scores = s2.data();
  c.n = 1;
  c.num_keys = 8;
  c.positions = pos2.data();
  c.ratio = 1;
  c.top_k = 2;
  c.candidates_out = cand.data();
  c.candidate_topk_blocks = 1;
  c.candidate_block_size = 4;
  ops::cpu::indexer_select(c);
  EXPECT_EQ(cand, (std::vector<uint8_t>{0, 0, 0, 0, 1, 1, 1, 1}));
}

// moe_experts: a token's output is 0 + its experts' outputs in ascending expert id (not
// slot order), then + residual; ids outside [0, E) contribute nothing. The expected
// values are built from swiglu_expert on single rows in that order, so equality is exact.
TEST(MoeExperts, AscendingIdOrderThenResidual) {
  const int64_t E = 4, dim = 8, inter = 4, k = 3, n = 2;
  std::vector<std::vector<float>> w(E * 3);
  for (int64_t i = 0; i < E * 3; ++i) {
    w[i].resize(dim * inter);
    for (int64_t j = 0; j < dim * inter; ++j) w[i][j] = std::sin(0.37f * float(i * 97 + j)) * 0.7f;
  }
  auto ref = [&](int64_t i, int64_t rows, int64_t cols) {
    ops::WeightRef r;
    r.data = reinterpret_cast<const uint8_t*>(w[i].data());
    r.rows = rows;
    r.cols = cols;
    return r;
  };
  std::vector<ops::MoeExpertRef> ex(E);
  for (int64_t e = 0; e < E; ++e) ex[e] = {ref(3 * e, inter, dim), ref(3 * e + 1, inter, dim), ref(3 * e + 2, dim, inter)};
  std::vector<float> x(n * dim), res(n * dim);
  for (int64_t j = 0; j < n * dim; ++j) x[j] = std::cos(1.3f * float(j)) * 3.0f, res[j] = 0.01f * float(j) - 0.05f;
  const std::vector<int64_t> ids = {3, 0, 2, 1, -1, 9};
  const std::vector<float> wts = {0.5f, 0.3f, 0.2f, 0.9f, 0.7f, 0.1f};
  std::vector<float> y(n * dim);
  ops::cpu::moe_experts({x.data(), n, k, ids.data(), wts.data(), ex.data(), E, 10.0f, res.data(), y.data()});
  for (int64_t t = 0; t < n; ++t) {
    std::vector<std::pair<int64_t, float>> picks;
    for (int64_t j = 0; j < k; ++j)
      if (ids[t * k + j] >= 0 && ids[t * k + j] < E) picks.push_back({ids[t * k + j], wts[t * k + j]});
    std::sort(picks.begin(), picks.end());
    std::vector<float> acc(dim, 0.0f), ye(dim);
    for (auto [e, rw] : picks) {
      ops::cpu::swiglu_expert({x.data() + t * dim, 1, ex[e].w1, ex[e].w3, ex[e].w2, &rw, 10.0f, ye.data()});
      for (int64_t j = 0; j < dim; ++j) acc[j] += ye[j];
    }
    for (int64_t j = 0; j < dim; ++j) EXPECT_EQ(y[t * dim + j], acc[j] + res[t * dim + j]) << "token " << t << " col " << j;
  }
}

// Activations::kBF16 in moe_experts: x is rounded to bf16 before w1 / w3 and the scaled
// SwiGLU output (route weight included) before w2. One expert, unit weights picking x[0]:
// x[0] = 1 + 2^-10 rounds to 1, so g = u = 1 and h = 0.5 * silu(1) * 1 = 0.36552..., which
// rounds to 187 / 512 = 0.365234375; w2 = [1, 2] copies it into y exactly. kF32 keeps
// both unrounded (the check that the mode matters).
TEST(MoeExperts, Bf16ActivationsRoundXAndScaledSwiglu) {
  const float w13[2] = {1.0f, 0.0f}, w2[2] = {1.0f, 2.0f};
  auto ref = [](const float* d, int64_t rows, int64_t cols) {
    ops::WeightRef r;
    r.data = reinterpret_cast<const uint8_t*>(d);
    r.rows = rows;
    r.cols = cols;
    return r;
  };
  const ops::MoeExpertRef ex = {ref(w13, 1, 2), ref(w13, 1, 2), ref(w2, 2, 1)};
  const float x[2] = {1.0f + 1.0f / 1024.0f, 3.0f};
  const int64_t ids[1] = {0};
  const float wts[1] = {0.5f};
  float y[2] = {0, 0};
  ops::MoeExpertsParams p{x, 1, 1, ids, wts, &ex, 1, 0.0f, nullptr, y};
  p.act = ops::Activations::kBF16;
  ops::cpu::moe_experts(p);
  EXPECT_EQ(y[0], 0.365234375f);
  EXPECT_EQ(y[1], 0.73046875f);
  p.act = ops::Activations::kF32;
  ops::cpu::moe_experts(p);
  const double g = 1.0 + 1.0 / 1024.0, h = 0.5 * g / (1.0 + std::exp(-g)) * g;
  EXPECT_NEAR(y[0], h, 1e-6);
  EXPECT_NE(y[0], 0.365234375f);
}

// Activations::kBF16 (ops/linear.h): x is rounded to bf16 (nearest even) before the
// products; the CPU oracle then sums exactly as in f32 mode. Reference: a double sum
// over round_to_bf16(x) and the dequantized weight, in the oracle's order (bitwise).
TEST(Linear, Bf16ActivationsRoundXFirst) {
  // round_to_bf16: ties to even, carries into the exponent, inf / NaN unchanged.
  EXPECT_EQ(ops::round_to_bf16(1.0f + 1.0f / 256), 1.0f);                  // tie, even below
  EXPECT_EQ(ops::round_to_bf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);     // tie, even above
  EXPECT_EQ(ops::round_to_bf16(1.0f + 1.5f / 256), 1.0f + 2.0f / 256);     // above the tie
  EXPECT_EQ(ops::round_to_bf16(-(1.0f + 1.0f / 256)), -1.0f);
  EXPECT_EQ(ops::round_to_bf16(2.0f - 1.0f / 512), 2.0f);                  // carry into the exponent
  EXPECT_TRUE(std::isinf(ops::round_to_bf16(INFINITY)));
  EXPECT_TRUE(std::isnan(ops::round_to_bf16(NAN)));
  EXPECT_TRUE(std::isinf(ops::round_to_bf16(3.4028235e38f)));              // above bf16's largest finite
  for (float v : {0.1f, -3.3f, 1e-30f, 7.0e5f}) EXPECT_EQ(ops::round_to_bf16(v), round_bf16(v)) << v;

  // FP8 e4m3 with 32x32 e8m0 blocks (the released dense format), 40 x 96, n = 5.
  std::mt19937 rng(3);
  const int64_t rows = 40, cols = 96, n = 5;
  const testing::Fp8TestWeight fw(rng, rows, cols);
  const ops::WeightRef ref = fw.ref();
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(n * cols);
  for (auto& v : x) v = nd(rng);
  std::vector<float> y_bf16(n * rows), y_f32(n * rows);
  ops::cpu::linear({x.data(), y_bf16.data(), n, ref, 0, -1, ops::Activations::kBF16});
  ops::cpu::linear({x.data(), y_f32.data(), n, ref, 0, -1, ops::Activations::kF32});
  std::vector<float> wr(cols);
  double max_shift = 0;
  for (int64_t r = 0; r < rows; ++r) {
    ops::dequant_row(ref, r, wr.data());
    for (int64_t t = 0; t < n; ++t) {
      double acc = 0;
      for (int64_t i = 0; i < cols; ++i) acc += double(ops::round_to_bf16(x[t * cols + i])) * double(wr[i]);
      EXPECT_EQ(y_bf16[t * rows + r], float(acc)) << r << "," << t;
      max_shift = std::max(max_shift, std::fabs(double(y_bf16[t * rows + r]) - double(y_f32[t * rows + r])));
    }
  }
  EXPECT_GT(max_shift, 0.0);  // the rounding happened
  // x is not modified, and a row slice rounds the same way.
  std::vector<float> y_slice(n * 8);
  ops::cpu::linear({x.data(), y_slice.data(), n, ref, 16, 8, ops::Activations::kBF16});
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = 0; r < 8; ++r) EXPECT_EQ(y_slice[t * 8 + r], y_bf16[t * rows + 16 + r]);
}

}  // namespace
}  // namespace deepinfer
