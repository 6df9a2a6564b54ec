// rms_norm, rope and the fake quantizations.
#include <cmath>

#include "harness.h"
#include "kernels/cuda/smxx_model.cuh"
#include "model/config.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/norm.h"
#include "ops/quant.h"
#include "ops/rope.h"

namespace deepinfer::testing_cuda {

namespace {

OpCase rms_case(std::string name, int64_t n, int64_t dim, bool weight, float eps) {
  return {name, "rms_norm", [=](Rng& rng) {
            const auto x = randn(rng, n * dim, 3.0f);
            const auto w = uniform(rng, dim, 0.5f, 1.5f);
            std::vector<float> y(n * dim);
            ops::cpu::rms_norm({x.data(), y.data(), n, dim, weight ? w.data() : nullptr, eps});
            Dev<float> dx(x), dw(w), dy(n * dim);
            ops::cuda::rms_norm({dx.get(), dy.get(), n, dim, weight ? dw.get() : nullptr, eps}, nullptr);
            // In place (y aliases x), as the model calls it.
            ops::cuda::rms_norm({dx.get(), dx.get(), n, dim, weight ? dw.get() : nullptr, eps}, nullptr);
            return Outputs{{{"y", y, dy.host()}, {"y_inplace", y, dx.host()}}, {}};
          }};
}

OpCase rope_case(std::string name, int64_t n, int64_t heads, int64_t dim, int64_t rd, bool yarn, bool inverse,
                 float af) {
  return {name, "rope", [=](Rng& rng) {
            RopeParams rp;
            rp.theta = yarn ? 160000 : 10000;
            rp.yarn = yarn;
            rp.factor = 16;
            rp.original_max_position_embeddings = 65536;
            const auto inv = ops::rope_inv_freq(rp, rd);
            std::vector<int64_t> pos(n);
            for (auto& p : pos) p = randint(rng, 0, 1 << 20);
            pos[0] = 0;
            auto x = randn(rng, n * heads * dim);
            Dev<float> dx(x), dinv(inv);
            Dev<int64_t> dpos(pos);
            ops::cpu::rope({x.data(), n, heads, dim, rd, pos.data(), inv.data(), inverse, af});
            ops::cuda::rope({dx.get(), n, heads, dim, rd, dpos.get(), dinv.get(), inverse, af}, nullptr);
            return Outputs{{{"x", x, dx.host()}}, {}};
          }};
}

// Inputs spanning many binades per row (each quantization block gets its own
// magnitude), with an all-zero block and exact grid values mixed in.
std::vector<float> quant_input(Rng& rng, int64_t n, int64_t dim, int64_t block) {
  auto x = randn(rng, n * dim);
  for (int64_t b0 = 0; b0 + block <= n * dim; b0 += block) {
    const float mag = std::ldexp(1.0f, int(randint(rng, -14, 12)));
    for (int64_t i = b0; i < b0 + block; ++i) x[i] *= mag;
  }
  if (n * dim >= 2 * block)
    for (int64_t i = block; i < 2 * block; ++i) x[i] = 0.0f;
  if (n * dim > 3) x[3] = 448.0f * 3.0f, x[2] = 0.25f;
  return x;
}

enum class Q { kFp8, kFp4E4m3, kFp4Ue8m0 };

OpCase quant_case(std::string name, Q q, int64_t n, int64_t dim, int64_t block) {
  return {name, "fake_quant", [=](Rng& rng) {
            auto x = quant_input(rng, n, dim, block);
            Dev<float> dx(x);
            const ops::FakeQuantParams hp{x.data(), n, dim, block}, dp{dx.get(), n, dim, block};
            if (q == Q::kFp8) {
              ops::cpu::fake_quant_fp8(hp);
              ops::cuda::fake_quant_fp8(dp, nullptr);
            } else {
              const auto kind = q == Q::kFp4E4m3 ? ops::Fp4Scale::kE4m3 : ops::Fp4Scale::kUe8m0;
              ops::cpu::fake_quant_fp4(hp, kind);
              ops::cuda::fake_quant_fp4(dp, kind, nullptr);
            }
            return Outputs{{{"x", x, dx.host()}}, {}};
          }};
}

}  // namespace

// kernels::copy_rows (the model's ring / pool / scratch copies): rows gathered into a scrambled order
// from a source buffer, with row starts at every 4-byte offset mod 16 (the scalar and the float4
// paths), dims below, at and across the 8192-float block chunk; the destination's untouched floats
// must stay as they were (they start at a sentinel). Family "former": bitwise.
OpCase copy_rows_case(std::string name, int64_t count, int64_t dim) {
  return {name, "former", [=](Rng& rng) {
            const int64_t pitch = dim + 7;  // row r starts at float r * pitch + (r % 4): every alignment
            const auto src = randn(rng, size_t(count * pitch + 4));
            std::vector<float> dst(size_t(count * pitch + 4), -7.0f), want = dst;
            std::vector<int64_t> perm(count);
            for (int64_t r = 0; r < count; ++r) perm[r] = (r * 5 + 3) % count;  // a bijection when count % 5 != 0
            Dev<float> dsrc(src), ddst(dst);
            std::vector<const float*> sp(count);
            std::vector<float*> dp(count);
            for (int64_t r = 0; r < count; ++r) {
              const int64_t so = perm[r] * pitch + perm[r] % 4, d0 = r * pitch + (r + 1) % 4;
              sp[r] = dsrc.get() + so;
              dp[r] = ddst.get() + d0;
              for (int64_t i = 0; i < dim; ++i) want[d0 + i] = src[so + i];
            }
            Dev<const float*> dsp(sp);
            Dev<float*> ddp(dp);
            check_cuda(kernels::copy_rows({dsp.get(), ddp.get(), count, dim}, nullptr), "copy_rows");
            return Outputs{{{"dst", want, ddst.host()}}, {}};
          }};
}

std::vector<OpCase> elementwise_cases() {
  return {
      rms_case("rms_norm_5120", 7, 5120, true, 1e-6f),
      rms_case("rms_norm_1280_noweight_eps1e20", 5, 1280, false, 1e-20f),
      rms_case("rms_norm_odd333", 3, 333, true, 1e-6f),
      rope_case("rope_q_512_64", 5, 8, 512, 64, false, false, 1.0f),
      rope_case("rope_inverse", 5, 8, 512, 64, false, true, 1.0f),
      rope_case("rope_q_n260_heads64", 260, 64, 512, 64, false, false, 1.0f),  // all heads in one block (n >= 256)
      rope_case("rope_compress_yarn_af", 9, 1, 512, 64, true, false, 1.3f),
      rope_case("rope_indexer_128", 4, 32, 128, 64, true, false, 1.0f),
      quant_case("fake_quant_fp8_b32", Q::kFp8, 9, 512, 32),
      quant_case("fake_quant_fp4_e4m3_b16", Q::kFp4E4m3, 9, 512, 16),
      quant_case("fake_quant_fp4_ue8m0_b32", Q::kFp4Ue8m0, 33, 128, 32),
      quant_case("fake_quant_fp8_untouched_dim100", Q::kFp8, 3, 100, 32),
      copy_rows_case("copy_rows_dim512_n129", 129, 512),
      copy_rows_case("copy_rows_dim5_n3", 3, 5),
      copy_rows_case("copy_rows_dim20480_n4", 4, 20480),
      copy_rows_case("copy_rows_dim129281_n1", 1, 129281),
      copy_rows_case("copy_rows_dim8193_n2", 2, 8193),
  };
}

}  // namespace deepinfer::testing_cuda
