// Fused decode kernels against what they replace: kernels::norm_rope_quant (rms_norm +
// rope + fake_quant of a row), kernels::hc_collapse_norm (hc_collapse + rms_norm) and
// the grouped gemv (LinearArgs::x_group_rows: V4.1's wo_a in one launch).
//   - family "fused" (bitwise): the fused kernel vs the same CUDA ops run one after
//     the other, and, where every step is exact against the CPU (rope, fake_quant,
//     hc_collapse), vs the CPU composition too;
//   - family "rms_norm" / "linear": vs the CPU composition where a step sums in
//     another order than the oracle (the norm's fp32 sum, the gemv's dots).
#include <algorithm>
#include <cmath>

#include "harness.h"
#include "kernels/cuda/smxx_elementwise.cuh"
#include "kernels/cuda/smxx_hyper_connection.cuh"
#include "kernels/cuda/smxx_linear.cuh"
#include "kernels/cuda/smxx_model.cuh"
#include "model/config.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"
#include "ops/hyper_connection.h"
#include "ops/linear.h"
#include "ops/norm.h"
#include "ops/quant.h"
#include "ops/rope.h"

namespace deepinfer::testing_cuda {

namespace {

struct NrqShape {
  int64_t n = 1, dim = 512, rope_dim = 64, heads = 1;  // n rows = n / heads tokens of `heads` heads
  bool norm = true, weight = true, yarn = false, in_place = true;
  float factor = 1.0f;
  int block = 32;  // 0: no quantization
  kernels::QuantKind kind = kernels::QuantKind::kFp8E4m3;
};

struct NrqInputs {
  std::vector<float> x, w, inv;
  std::vector<int64_t> pos;
};

NrqInputs nrq_inputs(Rng& rng, const NrqShape& s) {
  NrqInputs in;
  RopeParams rp;
  rp.theta = s.yarn ? 160000 : 10000;
  rp.yarn = s.yarn;
  rp.factor = 16;
  rp.original_max_position_embeddings = 65536;
  in.inv = ops::rope_inv_freq(rp, s.rope_dim > 0 ? s.rope_dim : 2);
  in.pos.resize(size_t(s.n / s.heads));
  for (auto& p : in.pos) p = randint(rng, 0, 1 << 20);
  in.pos[0] = 0;
  in.x = randn(rng, size_t(s.n * s.dim), 3.0f);
  // Spread the magnitudes per 32 channels so quantization blocks see many binades.
  for (int64_t i = 0; i < s.n * s.dim; i += 32) {
    const float mag = std::ldexp(1.0f, int(randint(rng, -6, 6)));
    for (int64_t j = i; j < std::min(i + 32, s.n * s.dim); ++j) in.x[size_t(j)] *= mag;
  }
  in.w = uniform(rng, size_t(s.dim), 0.5f, 1.5f);
  return in;
}

// The fused kernel's output for inputs `in` (device, out of place or in place).
std::vector<float> nrq_fused(const NrqShape& s, const NrqInputs& in, float eps, int variant = 0) {
  Dev<float> dx(in.x), dw(in.w), dinv(in.inv), dy(size_t(s.n * s.dim));
  Dev<int64_t> dpos(in.pos);
  kernels::NormRopeQuantArgs a;
  a.x = dx.get();
  a.y = s.in_place ? dx.get() : dy.get();
  a.n = s.n;
  a.dim = s.dim;
  a.norm = s.norm;
  a.weight = s.weight ? dw.get() : nullptr;
  a.eps = eps;
  a.positions = dpos.get();
  a.heads = s.heads;
  a.inv_freq = dinv.get();
  a.rope_dim = s.rope_dim;
  a.attention_factor = s.factor;
  a.quant_block = s.block;
  a.kind = s.kind;
  a.variant = variant;
  check_cuda(kernels::norm_rope_quant(a, nullptr), "norm_rope_quant");
  return s.in_place ? dx.host() : dy.host();
}

ops::Fp4Scale fp4_scale(kernels::QuantKind k) {
  return k == kernels::QuantKind::kFp4E4m3 ? ops::Fp4Scale::kE4m3 : ops::Fp4Scale::kUe8m0;
}

// The sequence the model ran before: rms_norm, rope, fake_quant as separate CUDA ops.
std::vector<float> nrq_sequence_cuda(const NrqShape& s, const NrqInputs& in, float eps) {
  Dev<float> dx(in.x), dw(in.w), dinv(in.inv);
  Dev<int64_t> dpos(in.pos);
  if (s.norm) ops::cuda::rms_norm({dx.get(), dx.get(), s.n, s.dim, s.weight ? dw.get() : nullptr, eps}, nullptr);
  if (s.rope_dim > 0)
    ops::cuda::rope({dx.get(), s.n / s.heads, s.heads, s.dim, s.rope_dim, dpos.get(), dinv.get(), false, s.factor},
                    nullptr);
  if (s.block > 0) {
    const ops::FakeQuantParams p{dx.get(), s.n, s.dim, s.block};
    if (s.kind == kernels::QuantKind::kFp8E4m3) ops::cuda::fake_quant_fp8(p, nullptr);
    else ops::cuda::fake_quant_fp4(p, fp4_scale(s.kind), nullptr);
  }
  return dx.host();
}

// The CPU composition (the oracle).
std::vector<float> nrq_cpu(const NrqShape& s, const NrqInputs& in, float eps) {
  std::vector<float> x = in.x;
  if (s.norm) ops::cpu::rms_norm({x.data(), x.data(), s.n, s.dim, s.weight ? in.w.data() : nullptr, eps});
  if (s.rope_dim > 0)
    ops::cpu::rope({x.data(), s.n / s.heads, s.heads, s.dim, s.rope_dim, in.pos.data(), in.inv.data(), false, s.factor});
  if (s.block > 0) {
    const ops::FakeQuantParams p{x.data(), s.n, s.dim, s.block};
    if (s.kind == kernels::QuantKind::kFp8E4m3) ops::cpu::fake_quant_fp8(p);
    else ops::cpu::fake_quant_fp4(p, fp4_scale(s.kind));
  }
  return x;
}

// Bitwise: fused vs the CUDA sequence; without the norm every step is exact, so also
// fused vs the CPU composition.
OpCase nrq_exact_case(std::string name, NrqShape s) {
  return {name, "fused", [=](Rng& rng) {
            const float eps = 1e-6f;
            const NrqInputs in = nrq_inputs(rng, s);
            const auto fused = nrq_fused(s, in, eps);
            Outputs o{{{"vs_cuda_sequence", nrq_sequence_cuda(s, in, eps), fused},
                       // Narrow rows run a warp per row: against the block-per-row kernel.
                       {"vs_block_kernel", nrq_fused(s, in, eps, 1), fused}},
                      {}};
            if (!s.norm) o.floats.push_back({"vs_cpu", nrq_cpu(s, in, eps), fused});
            return o;
          }};
}

// kernels::rms_norm_and_norm_rope_quant (the decode layer's q norm and kv norm_rope_quant
// in one launch, rows also copied to copy_to) against kernels::rms_norm then
// kernels::norm_rope_quant on the block kernel, bitwise; and each copy_to row against y.
OpCase norm_pair_case(std::string name, int64_t n, int64_t qdim, NrqShape s, bool copies) {
  s.n = n;
  s.heads = 1;
  return {name, "fused", [=](Rng& rng) {
            const float eps = 1e-6f;
            const NrqInputs in = nrq_inputs(rng, s);
            const auto qx = randn(rng, size_t(n * qdim), 2.0f);
            const auto qw = uniform(rng, size_t(qdim), 0.5f, 1.5f);
            Dev<float> dqw(qw), dw(in.w), dinv(in.inv);
            Dev<int64_t> dpos(in.pos);
            auto nrq_args = [&](float* x) {
              kernels::NormRopeQuantArgs a;
              a.x = x, a.y = x, a.n = s.n, a.dim = s.dim, a.norm = s.norm, a.weight = s.weight ? dw.get() : nullptr;
              a.eps = eps, a.positions = dpos.get(), a.heads = 1, a.inv_freq = dinv.get(), a.rope_dim = s.rope_dim;
              a.attention_factor = s.factor, a.quant_block = s.block, a.kind = s.kind, a.variant = 1;
              return a;
            };
            // The former launches.
            Dev<float> q1(qx), k1(in.x);
            check_cuda(kernels::rms_norm({q1.get(), q1.get(), dqw.get(), n, qdim, eps}, nullptr), "rms_norm");
            check_cuda(kernels::norm_rope_quant(nrq_args(k1.get()), nullptr), "norm_rope_quant");
            // The pair, with copies into rows of a scratch buffer in reverse order.
            Dev<float> q2(qx), k2(in.x), rows(size_t(n * s.dim));
            std::vector<float*> dst;
            for (int64_t t = 0; t < n; ++t) dst.push_back(rows.get() + (n - 1 - t) * s.dim);
            Dev<float*> ddst(dst);
            kernels::NormRopeQuantArgs a2 = nrq_args(k2.get());
            if (copies) a2.copy_to = ddst.get();
            check_cuda(kernels::rms_norm_and_norm_rope_quant({q2.get(), q2.get(), dqw.get(), n, qdim, eps}, a2, nullptr),
                       "rms_norm_and_norm_rope_quant");
            Outputs o{{{"q", q1.host(), q2.host()}, {"kv", k1.host(), k2.host()}}, {}};
            if (copies) {
              const auto kv = k2.host(), cp = rows.host();
              std::vector<float> expect(cp.size());
              for (int64_t t = 0; t < n; ++t)
                std::copy(kv.begin() + t * s.dim, kv.begin() + (t + 1) * s.dim, expect.begin() + (n - 1 - t) * s.dim);
              o.floats.push_back({"copy_to", expect, cp});
            }
            return o;
          }};
}

// norm_rope_quant with copy_to (NOTES 54: the compressed entry and the index key written to their
// history rows by the launch, not by a copy_rows after it) against the same launch without it:
// y bitwise, and each copy_to row (rows of a scratch buffer in reverse order) bitwise y's row.
// Both kernels: the block kernel (dim 512, the entry) and the warp kernel (dim 128, the key).
OpCase nrq_copy_case(std::string name, NrqShape s) {
  return {name, "fused", [=](Rng& rng) {
            const float eps = 1e-6f;
            const NrqInputs in = nrq_inputs(rng, s);
            const auto plain = nrq_fused(s, in, eps);
            Dev<float> dx(in.x), dw(in.w), dinv(in.inv), dy(size_t(s.n * s.dim)), rows(size_t(s.n * s.dim));
            Dev<int64_t> dpos(in.pos);
            std::vector<float*> dst;
            for (int64_t t = 0; t < s.n; ++t) dst.push_back(rows.get() + (s.n - 1 - t) * s.dim);
            Dev<float*> ddst(dst);
            kernels::NormRopeQuantArgs a;
            a.x = dx.get();
            a.y = s.in_place ? dx.get() : dy.get();
            a.n = s.n, a.dim = s.dim, a.norm = s.norm, a.weight = s.weight ? dw.get() : nullptr, a.eps = eps;
            a.positions = dpos.get(), a.heads = s.heads, a.inv_freq = dinv.get(), a.rope_dim = s.rope_dim;
            a.attention_factor = s.factor, a.quant_block = s.block, a.kind = s.kind;
            a.copy_to = ddst.get();
            check_cuda(kernels::norm_rope_quant(a, nullptr), "norm_rope_quant copy_to");
            const auto y = s.in_place ? dx.host() : dy.host(), cp = rows.host();
            std::vector<float> expect(cp.size());
            for (int64_t t = 0; t < s.n; ++t)
              std::copy(y.begin() + t * s.dim, y.begin() + (t + 1) * s.dim, expect.begin() + (s.n - 1 - t) * s.dim);
            return Outputs{{{"y", plain, y}, {"copy_to", expect, cp}}, {}};
          }};
}

// kernels::compress_gather_pool_norm (NOTES 54: the compressor's gather, pooling and norm in
// one launch) against what the model ran: copy_rows of the group rows into consecutive
// scratch rows (ratio 1: into the latent), compress_pool, rms_norm in place; bitwise. The
// rows sit in a shuffled order in one buffer (the list names them, as the pending / new rows).
OpCase compress_gather_case(std::string name, int64_t groups, int64_t ratio, int64_t dim, bool weight) {
  return {name, "fused", [=](Rng& rng) {
            const float eps = 1e-20f;
            const int64_t per = ratio > 1 ? 2 : 1, nrows = groups * ratio * per;
            auto x = randn(rng, size_t(nrows * dim), 2.0f);
            for (int64_t r = 0; r < nrows; ++r)  // gates of several scales (the softmax's range)
              if (per == 2 && r % 2 == 1)
                for (int64_t i = 0; i < dim; ++i) x[size_t(r * dim + i)] *= 4.0f;
            const auto w = uniform(rng, size_t(dim), 0.5f, 1.5f);
            std::vector<int64_t> perm(static_cast<size_t>(nrows));
            for (int64_t r = 0; r < nrows; ++r) perm[size_t(r)] = r;
            std::shuffle(perm.begin(), perm.end(), rng);
            Dev<float> dx(x), dw(w);
            std::vector<const float*> src;
            for (int64_t r = 0; r < nrows; ++r) src.push_back(dx.get() + perm[size_t(r)] * dim);
            Dev<const float*> dsrc(src);
            // The former launches.
            Dev<float> lat1(size_t(groups * dim)), cat_kv(size_t(groups * ratio * dim)), cat_gate(size_t(groups * ratio * dim));
            std::vector<float*> dst;
            for (int64_t g = 0; g < groups; ++g)
              for (int64_t k = 0; k < ratio; ++k) {
                dst.push_back(ratio == 1 ? lat1.get() + g * dim : cat_kv.get() + (g * ratio + k) * dim);
                if (ratio > 1) dst.push_back(cat_gate.get() + (g * ratio + k) * dim);
              }
            Dev<float*> ddst(dst);
            check_cuda(kernels::copy_rows({dsrc.get(), ddst.get(), nrows, dim}, nullptr), "copy_rows");
            if (ratio > 1)
              check_cuda(kernels::compress_pool({cat_kv.get(), cat_gate.get(), lat1.get(), groups, ratio, dim}, nullptr),
                         "compress_pool");
            check_cuda(kernels::rms_norm({lat1.get(), lat1.get(), weight ? dw.get() : nullptr, groups, dim, eps}, nullptr),
                       "rms_norm");
            // The one launch.
            Dev<float> lat2(size_t(groups * dim));
            check_cuda(kernels::compress_gather_pool_norm(
                           {dsrc.get(), lat2.get(), weight ? dw.get() : nullptr, groups, ratio, dim, eps}, nullptr),
                       "compress_gather_pool_norm");
            return Outputs{{{"latent", lat1.host(), lat2.host()}}, {}};
          }};
}

// With the norm and no quantization: fused vs the CPU composition (the norm's fp32 sum).
OpCase nrq_norm_case(std::string name, NrqShape s) {
  s.block = 0;
  return {name, "rms_norm", [=](Rng& rng) {
            const float eps = 1e-6f;
            const NrqInputs in = nrq_inputs(rng, s);
            return Outputs{{{"vs_cpu", nrq_cpu(s, in, eps), nrq_fused(s, in, eps)}}, {}};
          }};
}

// hc_collapse + rms_norm: vs the two CUDA ops (bitwise) or vs the CPU composition.
OpCase collapse_norm_case(std::string name, bool vs_cpu, int64_t n, int64_t hc, int64_t dim, bool weight,
                          float eps) {
  return {name, vs_cpu ? "rms_norm" : "fused", [=](Rng& rng) {
            const auto h = randn(rng, size_t(n * hc * dim), 2.0f);
            const auto pre = uniform(rng, size_t(n * hc), 0.0f, 1.0f);
            const auto w = uniform(rng, size_t(dim), 0.5f, 1.5f);
            Dev<float> dh(h), dpre(pre), dw(w), dx(size_t(n * dim));
            check_cuda(kernels::hc_collapse_norm({dh.get(), dpre.get(), weight ? dw.get() : nullptr, dx.get(), n, hc,
                                                  dim, eps},
                                                 nullptr),
                       "hc_collapse_norm");
            const auto fused = dx.host();
            std::vector<float> ref(size_t(n * dim));
            if (vs_cpu) {
              ops::cpu::hc_collapse({h.data(), pre.data(), ref.data(), n, hc, dim});
              ops::cpu::rms_norm({ref.data(), ref.data(), n, dim, weight ? w.data() : nullptr, eps});
            } else {
              Dev<float> dy(size_t(n * dim));
              ops::cuda::hc_collapse({dh.get(), dpre.get(), dy.get(), n, hc, dim}, nullptr);
              ops::cuda::rms_norm({dy.get(), dy.get(), n, dim, weight ? dw.get() : nullptr, eps}, nullptr);
              ref = dy.host();
            }
            return Outputs{{{vs_cpu ? "vs_cpu" : "vs_cuda_sequence", ref, fused}}, {}};
          }};
}

// Grouped gemv: y[:, g * rank + r] = x[:, g * group_in : (g + 1) * group_in] . W[g * rank + r, :]
// for `groups` groups in one launch (x rows x_stride apart), vs one CPU linear per group.
OpCase grouped_gemv_case(std::string name, WKind kind, int64_t n, int64_t groups, int64_t rank, int64_t group_in,
                         int64_t pad) {
  return {name, "linear", [=](Rng& rng) {
            const int64_t rows = groups * rank, stride = groups * group_in + pad;
            const auto w = random_weight(rng, kind, rows, group_in, 0.05f);
            const auto x = randn(rng, size_t(n * stride));
            std::vector<float> y(size_t(n * rows));
            std::vector<float> xg(size_t(n * group_in)), yg(size_t(n * rank));
            for (int64_t g = 0; g < groups; ++g) {
              for (int64_t t = 0; t < n; ++t)
                std::copy_n(x.begin() + t * stride + g * group_in, group_in, xg.begin() + t * group_in);
              ops::cpu::linear({xg.data(), yg.data(), n, w->ref(false), g * rank, rank});
              for (int64_t t = 0; t < n; ++t) std::copy_n(yg.begin() + t * rank, rank, y.begin() + t * rows + g * rank);
            }
            Dev<float> dx(x), dy(size_t(n * rows));
            kernels::LinearArgs a;
            a.x = dx.get();
            a.y = dy.get();
            a.n = n;
            a.w = ops::cuda::to_weight_args(w->ref(true));
            a.num_rows = rows;
            a.x_stride = stride;
            a.x_group_rows = rank;
            a.x_group_step = group_in;
            check_cuda(kernels::linear(a, nullptr), name.c_str());
            return Outputs{{{"y", y, dy.host()}}, {}};
          }};
}

}  // namespace

std::vector<OpCase> fused_cases() {
  using QK = kernels::QuantKind;
  std::vector<OpCase> c;
  // The attention KV row: norm (weight) + RoPE 64 + FP8 blocks of 32, in place.
  NrqShape kv;
  kv.n = 7;
  c.push_back(nrq_exact_case("fused_kv_norm_rope_fp8", kv));
  c.push_back(nrq_norm_case("fused_kv_norm_rope_vs_cpu", kv));
  NrqShape kv1 = kv;
  kv1.n = 1;
  kv1.factor = 1.25f;
  kv1.yarn = true;
  c.push_back(nrq_exact_case("fused_kv_norm_rope_fp8_n1_yarn", kv1));
  // The compressed entry: RoPE + FP4 (e4m3 scales, blocks of 16), out of place, no norm.
  NrqShape ce;
  ce.n = 9;
  ce.norm = false;
  ce.yarn = true;
  ce.factor = 1.3f;
  ce.block = 16;
  ce.kind = QK::kFp4E4m3;
  ce.in_place = false;
  c.push_back(nrq_exact_case("fused_entry_rope_fp4e4m3", ce));
  // The index key: norm + RoPE + FP4 (ue8m0 scales, blocks of 32), dim 128.
  NrqShape ik;
  ik.n = 5;
  ik.dim = 128;
  ik.yarn = true;
  ik.kind = QK::kFp4Ue8m0;
  c.push_back(nrq_exact_case("fused_key_norm_rope_fp4ue8m0", ik));
  c.push_back(nrq_norm_case("fused_key_norm_rope_vs_cpu", ik));
  // The compressor's gather + pool + norm (NOTES 54): V4.1's ratios 2 and 1 at one group
  // (batch-1 decode) and several, V4's 4 and 128, a dim that is not a multiple of the block.
  c.push_back(compress_gather_case("fused_compress_gather_r2_g1", 1, 2, 512, true));
  c.push_back(compress_gather_case("fused_compress_gather_r2_g5", 5, 2, 512, true));
  c.push_back(compress_gather_case("fused_compress_gather_r1_g1", 1, 1, 512, true));
  c.push_back(compress_gather_case("fused_compress_gather_r1_g3", 3, 1, 512, false));
  c.push_back(compress_gather_case("fused_compress_gather_r4_g2", 2, 4, 512, true));
  c.push_back(compress_gather_case("fused_compress_gather_r128_g1", 1, 128, 512, true));
  c.push_back(compress_gather_case("fused_compress_gather_odd", 3, 2, 333, true));
  // Both with copy_to (NOTES 54): the entry on the block kernel, the key on the warp kernel,
  // at one row (batch-1 decode) and several.
  for (const int64_t rows : {int64_t(1), int64_t(9)}) {
    NrqShape e = ce, k = ik;
    e.n = rows;
    k.n = rows;
    c.push_back(nrq_copy_case("fused_entry_copy_to_n" + std::to_string(rows), e));
    c.push_back(nrq_copy_case("fused_key_copy_to_n" + std::to_string(rows), k));
  }
  // The indexer query: 32 heads of 128 per token, RoPE + FP4 (ue8m0), no norm.
  NrqShape iq;
  iq.n = 3 * 32;
  iq.heads = 32;
  iq.dim = 128;
  iq.norm = false;
  iq.yarn = true;
  iq.kind = QK::kFp4Ue8m0;
  c.push_back(nrq_exact_case("fused_index_query_rope_fp4ue8m0", iq));
  // Narrow rows on the warp-per-row kernel: 8 warps' sums (dim 256), 5 (dim 160, a
  // partial block of rows: n % 8 != 0), RoPE over the whole row (dim 64).
  NrqShape n256 = ik;
  n256.n = 13;
  n256.dim = 256;
  c.push_back(nrq_exact_case("fused_norm_rope_warp_dim256", n256));
  NrqShape n160 = ik;
  n160.n = 11;
  n160.dim = 160;
  n160.weight = false;
  n160.kind = QK::kFp8E4m3;
  c.push_back(nrq_exact_case("fused_norm_rope_warp_dim160", n160));
  NrqShape n64 = iq;
  n64.n = 4 * 8;
  n64.heads = 8;
  n64.dim = 64;
  n64.norm = true;
  c.push_back(nrq_exact_case("fused_norm_rope_warp_dim64_full_rope", n64));
  // Odd width: quantization skipped (dim % block != 0, as fake_quant), no weight.
  NrqShape odd;
  odd.n = 3;
  odd.dim = 333;
  odd.rope_dim = 30;
  odd.weight = false;
  c.push_back(nrq_exact_case("fused_norm_rope_odd333_untouched", odd));
  // A row wider than the block (8192): several 256-element sweeps.
  NrqShape wide;
  wide.n = 2;
  wide.dim = 8192;
  c.push_back(nrq_exact_case("fused_norm_rope_fp8_8192", wide));

  // The decode layer's q norm (q_lora_rank 1024 at V4.1-Flash; 1536 at V4.1) and kv row
  // (512, RoPE 64, FP8 blocks of 32) in one launch, the kv rows also written elsewhere.
  NrqShape kvs;
  c.push_back(norm_pair_case("fused_norm_pair_v41_n1", 1, 1024, kvs, true));
  c.push_back(norm_pair_case("fused_norm_pair_v41_n8", 8, 1536, kvs, true));
  c.push_back(norm_pair_case("fused_norm_pair_odd", 3, 333, odd, false));
  c.push_back(nrq_exact_case("fused_norm_rope_v41_kv_n1", [] {
    NrqShape k;
    k.n = 1;
    return k;
  }()));

  c.push_back(collapse_norm_case("fused_hc_collapse_norm_v41", false, 5, 4, 5120, true, 1e-20f));
  c.push_back(collapse_norm_case("fused_hc_collapse_norm_v41_vs_cpu", true, 5, 4, 5120, true, 1e-20f));
  c.push_back(collapse_norm_case("fused_hc_collapse_norm_odd", false, 3, 3, 333, false, 1e-6f));
  c.push_back(collapse_norm_case("fused_hc_collapse_norm_odd_vs_cpu", true, 3, 3, 333, false, 1e-6f));

  // wo_a's shape (8 groups of 1024 rows over 4096 inputs, x rows 32768 wide) and
  // small ones with padding between x rows, at several batch widths.
  c.push_back(grouped_gemv_case("fused_grouped_gemv_fp8_v41_n3", WKind::kFp8E8m0, 3, 8, 1024, 4096, 0));
  for (int64_t n : {1, 3, 8})
    c.push_back(grouped_gemv_case("fused_grouped_gemv_fp8_small_n" + std::to_string(n), WKind::kFp8E8m0, n, 4, 64,
                                  256, 32));
  c.push_back(grouped_gemv_case("fused_grouped_gemv_bf16_n2", WKind::kBF16, 2, 3, 36, 128, 4));
  return c;
}

}  // namespace deepinfer::testing_cuda
