// linear under Activations::kFP8 (ops/linear.h): x quantized per 32-K block to e4m3 with
// ue8m0 scales, block dot products of the codes, scaled by s_x * s_w. Every path against
// the CPU oracle at the V4.1-Flash FP8 shapes (wq_a, wq_b, wkv, wo_b, the shared expert's
// w1 / w2) and ragged ones: kAuto below linear_fp8_min_n (the dequantized codes through
// the fp32 gemv / mma / tiled kernels), the mma.sync FP8 tensor-core GEMM (under kAuto,
// forced and at kernel level), the cuBLASLt path, a row slice, K % 32 != 0 (kAuto falls
// back), kInvariant, a captured CUDA graph.
//
// Two checks per output element (linear.h says what is exact and what may differ):
//   - |gpu - cpu| <= 2^-9 * S, S = the same linear over |x| and |W| (the sum of the
//     absolute scaled products; the quantization is sign-symmetric, so S is the oracle
//     on |x|, |W|): the fp32 block sum contributes <= K/32 * 2^-23 S, the MMA's internal
//     accumulation of a block a few 2^-13 of that block's share; a wrong code, scale or
//     block gives errors of order S. Violations are counted (an exact "bound" int).
//     The worst err / S seen is printed ("[ fp8 ]" lines).
//   - err / rms(y) <= the "linear_fp8" tolerance (ops_cuda_test.cpp).
// Large n: the oracle runs on a sample of tokens (each token's quantization and outputs
// depend on that token's x only), all rows, and only those tokens' outputs come back.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "common/numeric.h"
#include "harness.h"
#include "kernels/cuda/smxx_linear_fp8.cuh"
#include "ops/cuda/weight_args.h"
#include "ops/quant.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/linear.h"

namespace deepinfer::testing_cuda {

namespace {

namespace gpu = ops::cuda;

// Fast generators (xorshift): the Flash shapes have up to 42M weights and 67M activations,
// which <random>'s normal distribution and the float -> e4m3 rounding take seconds per seed
// to draw.
struct XorShift {
  uint64_t s;
  uint64_t next() {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
  }
  // Roughly normal (a sum of four uniforms, centred, unit variance).
  float normal() {
    const uint64_t r = next();
    float t = 0.0f;
    for (int i = 0; i < 4; ++i) t += float((r >> (16 * i)) & 0xffff) * (1.0f / 65536.0f);
    return (t - 2.0f) * 1.7320508f;
  }
};

// An FP8 weight in the released format (e4m3 codes, 32 x 32 ue8m0 blocks): random codes
// with exponent fields 4..10 (magnitudes 2^-3 .. 2^3.9), a few zeros, scales 2^-9 .. 2^-5.
// block: the scale blocks' side (32 as released; 128 the DeepSeek-V3 layout; 0: no scales).
std::unique_ptr<TestWeight> fp8_weight(Rng& rng, int64_t rows, int64_t cols, int64_t block = 32) {
  auto w = std::make_unique<TestWeight>();
  w->dtype = DType::F8_E4M3;
  w->rows = rows;
  w->cols = cols;
  XorShift xs{rng() | 1};
  if (block > 0) {
    w->block_rows = w->block_cols = block;
    w->scale_dtype = DType::F8_E8M0;
    w->scale_cols = (cols + block - 1) / block;
    w->scale.resize(size_t(((rows + block - 1) / block) * w->scale_cols));
  }
  for (auto& b : w->scale) b = uint8_t(127 - 9 + int(xs.next() % 5));
  w->data.resize(size_t(rows * cols));
  for (auto& b : w->data) {
    const uint64_t r = xs.next();
    b = r % 61 == 0 ? 0 : uint8_t(((r >> 8) & 0x80) | ((4 + (r >> 16) % 7) << 3) | ((r >> 24) & 7));
  }
  w->d_data = std::make_unique<Dev<uint8_t>>(w->data);
  if (!w->scale.empty()) w->d_scale = std::make_unique<Dev<uint8_t>>(w->scale);
  return w;
}

// x with blocks of very different magnitude (different scales per block), blocks under
// the 1e-4 amax clamp, and a few exact zeros.
std::vector<float> fp8_x(Rng& rng, int64_t n, int64_t cols) {
  std::vector<float> x(size_t(n * cols));
  XorShift xs{rng() | 1};
  for (auto& v : x) v = xs.normal();
  const int64_t nb = (cols + 31) / 32;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t b = 0; b < nb; ++b) {
      const float f = (t * nb + b) % 7 == 3 ? 50.0f : (t * nb + b) % 13 == 5 ? 1e-6f : 1.0f;
      if (f == 1.0f) continue;
      for (int64_t i = b * 32; i < std::min(cols, b * 32 + 32); ++i) x[size_t(t * cols + i)] *= f;
    }
  for (size_t i = 0; i < x.size(); i += 1009) x[i] = 0.0f;
  return x;
}

std::vector<int64_t> sample_tokens(int64_t n) {
  if (n <= 32) {
    std::vector<int64_t> all(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) all[size_t(i)] = i;
    return all;
  }
  std::vector<int64_t> s;
  for (int64_t t = 0; t < n; t += std::max<int64_t>(1, n / 20)) s.push_back(t + (t * 7) % std::max<int64_t>(1, n / 20));
  s.push_back(n - 1);  // the ragged last tile
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  while (!s.empty() && s.back() >= n) s.pop_back();
  return s;
}

struct Fp8Check {
  std::vector<float> cpu, gpu;
  int64_t violations = 0;
};

// Oracle y and S on the sampled tokens, compared with the GPU's rows for them.
Fp8Check check_fp8(const std::vector<float>& x, const TestWeight& w, int64_t cols, const std::vector<int64_t>& toks,
                   int64_t row0, int64_t out_rows, const float* dy, const std::string& name) {
  const int64_t m = int64_t(toks.size());
  std::vector<float> xs(size_t(m * cols)), xa(size_t(m * cols));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t c = 0; c < cols; ++c) {
      xs[size_t(i * cols + c)] = x[size_t(toks[size_t(i)] * cols + c)];
      xa[size_t(i * cols + c)] = std::fabs(xs[size_t(i * cols + c)]);
    }
  Fp8Check r;
  r.cpu.resize(size_t(m * out_rows));
  std::vector<float> s(size_t(m * out_rows));
  ops::cpu::linear({xs.data(), r.cpu.data(), m, w.ref(false), row0, out_rows, ops::Activations::kFP8});
  std::vector<uint8_t> wabs = w.data;
  for (auto& b : wabs) b &= 0x7f;  // |code|; NaN codes stay NaN (none drawn)
  ops::WeightRef ra = w.ref(false);
  ra.data = wabs.data();
  ops::cpu::linear({xa.data(), s.data(), m, ra, row0, out_rows, ops::Activations::kFP8});
  r.gpu.resize(size_t(m * out_rows));
  check_cuda(cudaDeviceSynchronize(), "kernel");
  for (int64_t i = 0; i < m; ++i)
    check_cuda(cudaMemcpy(r.gpu.data() + i * out_rows, dy + toks[size_t(i)] * out_rows, size_t(out_rows) * 4,
                          cudaMemcpyDeviceToHost),
               "download");
  double worst = 0;
  for (size_t i = 0; i < r.cpu.size(); ++i) {
    const double err = std::fabs(double(r.cpu[i]) - double(r.gpu[i]));
    const double bound = std::ldexp(double(s[i]), -9);
    if (!(err <= bound)) ++r.violations;  // NaN counts
    if (s[i] > 0) worst = std::max(worst, err / double(s[i]));
  }
  std::printf("[ fp8 ] %s tokens=%lld worst err/S=%.3e (bound 2^-9 = 1.953e-03) violations=%lld\n", name.c_str(),
              (long long)m, worst, (long long)r.violations);
  return r;
}

const char* kernel_name(gpu::LinearKernel k) {
  switch (k) {
    case gpu::LinearKernel::kFp8Mma: return "mma8";
    case gpu::LinearKernel::kGemv: return "gemv";
    case gpu::LinearKernel::kMma: return "mma";
    case gpu::LinearKernel::kTiled: return "tiled";
    default: return "auto";
  }
}

// One call of the op: kernel forced or kAuto, optional row slice, a workspace or none
// (the op then takes scratch from the stream-ordered allocator), invariant mode.
OpCase fp8_case(const char* label, gpu::LinearKernel kernel, int64_t n, int64_t rows, int64_t cols, int64_t row0 = 0,
                int64_t num_rows = -1, bool with_ws = true, gpu::LinearMode mode = gpu::LinearMode::kAuto) {
  std::string name = std::string("linear_fp8_") + kernel_name(kernel) + "_" + label + "_n" + std::to_string(n) + "_" +
                     std::to_string(rows) + "x" + std::to_string(cols);
  if (row0 > 0 || num_rows >= 0) name += "_slice" + std::to_string(row0);
  if (!with_ws) name += "_nows";
  if (mode == gpu::LinearMode::kInvariant) name += "_invariant";
  return {name, "linear_fp8", [=](Rng& rng) {
            const auto w = fp8_weight(rng, rows, cols);
            const auto x = fp8_x(rng, n, cols);
            const int64_t out_rows = num_rows < 0 ? rows - row0 : num_rows;
            const size_t bytes = gpu::linear_fp8_workspace_bytes(n, cols);
            Dev<uint8_t> ws(with_ws ? bytes : 1);
            Dev<float> dx(x), dy(size_t(n * out_rows));
            // min_n = max: kAuto keeps to the FP8 kernels here (fp8_gemm_case takes the cuBLASLt path).
            gpu::linear({dx.get(), dy.get(), n, w->ref(true), row0, num_rows, ops::Activations::kFP8}, mode, nullptr,
                        with_ws ? gpu::LinearWorkspace{ws.get(), bytes, INT64_MAX} : gpu::LinearWorkspace{}, kernel);
            const Fp8Check c = check_fp8(x, *w, cols, sample_tokens(n), row0, out_rows, dy.get(), name);
            return Outputs{{{"y", c.cpu, c.gpu}}, {{"bound", {0}, {c.violations}}}};
          }};
}

// The cuBLASLt path of Activations::kFP8: x quantized per 32-K block, code * scale in bf16
// (exact), a bf16 GEMM with fp32 accumulation against the exact bf16 image of the weight
// (dequantized per call, or its persistent copy). Checked against the oracle with the
// same bound as the FP8 kernels, the copy against the per-call dequantization bitwise,
// and which way each call went (linear_gemm_stats: calls, dequantized, bf16_copy), so a
// call that silently took the FP8 kernel fails. kAuto from min_n, or kGemm forced.
OpCase fp8_gemm_case(gpu::LinearKernel kernel, int64_t n, int64_t rows, int64_t cols, int64_t ws_tokens = 0) {
  std::string name = std::string("linear_fp8_cublaslt_") + kernel_name(kernel) + "_n" + std::to_string(n) + "_" +
                     std::to_string(rows) + "x" + std::to_string(cols);
  if (ws_tokens > 0) name += "_pieces" + std::to_string(ws_tokens);
  return {name, "linear_fp8", [=](Rng& rng) {
            const auto w = fp8_weight(rng, rows, cols);
            const auto x = fp8_x(rng, n, cols);
            const size_t bytes = gpu::linear_gemm_workspace_bytes(rows * cols, (ws_tokens > 0 ? ws_tokens : n) * cols);
            Dev<uint8_t> ws(bytes);
            const ops::WeightRef plain = w->ref(true);
            Dev<uint8_t> copy(gpu::linear_bf16_copy_bytes(plain));
            gpu::linear_make_bf16_copy(plain, reinterpret_cast<uint16_t*>(copy.get()), nullptr);
            ops::WeightRef with = plain;
            with.bf16 = reinterpret_cast<const uint16_t*>(copy.get());
            Dev<float> dx(x), dy1(size_t(n * rows)), dy2(size_t(n * rows));
            const gpu::LinearWorkspace lw{ws.get(), bytes, kernel == gpu::LinearKernel::kAuto ? 2 : 0};
            std::vector<int64_t> ways;
            for (auto [wr, y] : {std::pair{plain, dy1.get()}, std::pair{with, dy2.get()}}) {
              check_cuda(cudaMemset(y, 0xff, size_t(n * rows) * 4), "poison");
              const gpu::LinearGemmStats s0 = gpu::linear_gemm_stats();
              gpu::linear({dx.get(), y, n, wr, 0, -1, ops::Activations::kFP8}, gpu::LinearMode::kAuto, nullptr, lw,
                          kernel);
              const gpu::LinearGemmStats s1 = gpu::linear_gemm_stats();
              ways.insert(ways.end(), {s1.calls - s0.calls, s1.dequantized - s0.dequantized, s1.bf16_copy - s0.bf16_copy});
            }
            const Fp8Check c = check_fp8(x, *w, cols, sample_tokens(n), 0, rows, dy1.get(), name);
            const std::vector<float> y1 = dy1.host(), y2 = dy2.host();
            int64_t differ = 0;  // the copy gives the per-call bits
            for (size_t i = 0; i < y1.size(); ++i) differ += std::memcmp(&y1[i], &y2[i], 4) != 0;
            return Outputs{{{"y", c.cpu, c.gpu}},
                           {{"bound", {0}, {c.violations}},
                            {"gemm_ways", {1, 1, 0, 1, 0, 1}, ways},
                            {"copy_bits_differ", {0}, {differ}}}};
          }};
}

// The FP8 GEMM (kAuto without a workspace) captured in a CUDA graph (scratch from the
// allocator inside the capture), replayed twice onto a poisoned output.
OpCase fp8_graph_case(int64_t n, int64_t rows, int64_t cols) {
  const std::string name = "linear_fp8_graph_n" + std::to_string(n) + "_" + std::to_string(rows) + "x" +
                           std::to_string(cols);
  return {name, "linear_fp8", [=](Rng& rng) {
            const auto w = fp8_weight(rng, rows, cols);
            const auto x = fp8_x(rng, n, cols);
            Dev<float> dx(x), dy(size_t(n * rows));
            cudaStream_t s = nullptr;
            check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
            cudaGraph_t g = nullptr;
            cudaGraphExec_t e = nullptr;
            check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
            try {
              gpu::linear({dx.get(), dy.get(), n, w->ref(true), 0, -1, ops::Activations::kFP8}, gpu::LinearMode::kAuto,
                          s, gpu::LinearWorkspace{}, gpu::LinearKernel::kAuto);
            } catch (...) {
              cudaStreamEndCapture(s, &g);
              if (g) cudaGraphDestroy(g);
              cudaStreamDestroy(s);
              throw;
            }
            check_cuda(cudaStreamEndCapture(s, &g), "end capture");
            check_cuda(cudaGraphInstantiate(&e, g, 0), "instantiate");
            check_cuda(cudaMemsetAsync(dy.get(), 0xff, size_t(n * rows) * 4, s), "poison");
            check_cuda(cudaGraphLaunch(e, s), "launch");
            check_cuda(cudaGraphLaunch(e, s), "launch");
            check_cuda(cudaStreamSynchronize(s), "sync");
            cudaGraphExecDestroy(e);
            cudaGraphDestroy(g);
            cudaStreamDestroy(s);
            const Fp8Check c = check_fp8(x, *w, cols, sample_tokens(n), 0, rows, dy.get(), name);
            return Outputs{{{"y", c.cpu, c.gpu}}, {{"bound", {0}, {c.violations}}}};
          }};
}

// Forcing a GEMM where it cannot run throws (K % 32 != 0); kFP8 on a BF16 weight throws.
OpCase fp8_reject_case() {
  return {"linear_fp8_rejects", "linear_fp8", [](Rng& rng) {
            int64_t thrown = 0;
            const auto w = random_weight(rng, WKind::kFp8E8m0, 64, 40, 0.05f);
            const auto wb = random_weight(rng, WKind::kBF16, 64, 64, 0.05f);
            Dev<float> dx(std::vector<float>(128 * 64, 1.0f)), dy(size_t(128 * 64));
            try {
              gpu::linear({dx.get(), dy.get(), 128, w->ref(true), 0, -1, ops::Activations::kFP8},
                          gpu::LinearMode::kAuto, nullptr, gpu::LinearWorkspace{}, gpu::LinearKernel::kFp8Mma);
            } catch (const std::exception&) {
              ++thrown;
            }
            try {
              gpu::linear({dx.get(), dy.get(), 128, wb->ref(true), 0, -1, ops::Activations::kFP8},
                          gpu::LinearMode::kAuto, nullptr, gpu::LinearWorkspace{}, gpu::LinearKernel::kAuto);
            } catch (const std::exception&) {
              ++thrown;
            }
            check_cuda(cudaDeviceSynchronize(), "sync");
            return Outputs{{}, {{"thrown", {2}, {thrown}}}};
          }};
}

// The quantizer alone: codes, scales and dequantized values bitwise against
// ops::quant_fp8_block, K with a ragged tail, blocks under the amax clamp, zeros.
OpCase fp8_quant_case(int64_t n, int64_t cols) {
  const std::string name = "linear_fp8_quant_n" + std::to_string(n) + "_k" + std::to_string(cols);
  return {name, "linear_repeat", [=](Rng& rng) {
            const auto x = fp8_x(rng, n, cols);
            const int64_t nb = (cols + 31) / 32;
            std::vector<float> scales(size_t(n * nb)), deq(size_t(n * cols));
            std::vector<int64_t> codes(size_t(n * cols));
            std::vector<uint8_t> c(32);
            for (int64_t t = 0; t < n; ++t)
              for (int64_t b = 0; b < nb; ++b) {
                const int64_t len = std::min<int64_t>(32, cols - b * 32);
                const float sc = ops::quant_fp8_block(x.data() + t * cols + b * 32, len, c.data());
                scales[size_t(t * nb + b)] = sc;
                for (int64_t i = 0; i < len; ++i) {
                  codes[size_t(t * cols + b * 32 + i)] = c[size_t(i)];
                  deq[size_t(t * cols + b * 32 + i)] = e4m3_to_float(c[size_t(i)]) * sc;
                }
              }
            Dev<float> dx(x), ds(size_t(n * nb)), dd(size_t(n * cols));
            Dev<uint8_t> dc(size_t(n * cols));
            check_cuda(kernels::quant_act_fp8(dx.get(), n, cols, dc.get(), ds.get(), dd.get(), nullptr), "quant");
            const std::vector<uint8_t> gc = dc.host();
            return Outputs{{{"scales", scales, ds.host()}, {"deq", deq, dd.host()}},
                           {{"codes", codes, std::vector<int64_t>(gc.begin(), gc.end())}}};
          }};
}

// The kernel-level GEMM (mma.sync) on codes from the quantizer.
OpCase fp8_kernel_case(int64_t n, int64_t rows, int64_t cols) {
  const std::string name = "linear_fp8_kernel_mma8_n" + std::to_string(n) + "_" + std::to_string(rows) + "x" +
                           std::to_string(cols);
  return {name, "linear_fp8", [=](Rng& rng) {
            const auto w = fp8_weight(rng, rows, cols);
            const auto x = fp8_x(rng, n, cols);
            Dev<float> dx(x), ds(size_t(n * (cols / 32))), dy(size_t(n * rows));
            Dev<uint8_t> dc(size_t(n * cols));
            check_cuda(kernels::quant_act_fp8(dx.get(), n, cols, dc.get(), ds.get(), nullptr, nullptr), "quant");
            kernels::Fp8GemmArgs g;
            g.x_codes = dc.get();
            g.x_scales = ds.get();
            g.n = n;
            g.w = ops::cuda::to_weight_args(w->ref(true));
            g.num_rows = rows;
            g.y = dy.get();
            check_cuda(kernels::linear_fp8_gemm(g, nullptr), name.c_str());
            const Fp8Check c = check_fp8(x, *w, cols, sample_tokens(n), 0, rows, dy.get(), name);
            return Outputs{{{"y", c.cpu, c.gpu}}, {{"bound", {0}, {c.violations}}}};
          }};
}


// The decode kernel (kernels::linear_fp8_gemv, NOTES 31: x quantized in the kernel, mma.sync
// m16n8k32 e4m3) forced with kFp8Gemv against the oracle; "launches" checks that exactly one
// launch of it ran. block: the weight's scale blocks (0: none).
// The kernel variant for the duration of a case (linear_fp8_gemv_set_variant), restored after.
struct VariantScope {
  int was;
  explicit VariantScope(int v) : was(kernels::linear_fp8_gemv_variant()) { kernels::linear_fp8_gemv_set_variant(v); }
  ~VariantScope() { kernels::linear_fp8_gemv_set_variant(was); }
};

OpCase fp8gemv_case(const char* label, int64_t n, int64_t rows, int64_t cols, int64_t row0 = 0, int64_t num_rows = -1,
                    int64_t block = 32, int variant = 0) {
  std::string name = std::string(variant == 1 ? "linear_fp8gemv_lean_" : "linear_fp8gemv_") + label + "_n" +
                     std::to_string(n) + "_" + std::to_string(rows) + "x" + std::to_string(cols);
  if (row0 > 0 || num_rows >= 0) name += "_slice" + std::to_string(row0) + "_" + std::to_string(num_rows);
  if (block != 32) name += "_block" + std::to_string(block);
  return {name, "linear_fp8", [=](Rng& rng) {
            const auto w = fp8_weight(rng, rows, cols, block);
            const auto x = fp8_x(rng, n, cols);
            const int64_t out_rows = num_rows < 0 ? rows - row0 : num_rows;
            Dev<float> dx(x), dy(size_t(n * out_rows));
            const VariantScope vs(variant);
            const int64_t before = kernels::linear_fp8_gemv_launches();
            gpu::linear({dx.get(), dy.get(), n, w->ref(true), row0, num_rows, ops::Activations::kFP8},
                        gpu::LinearMode::kAuto, nullptr, gpu::LinearWorkspace{}, gpu::LinearKernel::kFp8Gemv);
            const int64_t launches = kernels::linear_fp8_gemv_launches() - before;
            const Fp8Check c = check_fp8(x, *w, cols, sample_tokens(n), row0, out_rows, dy.get(), name);
            return Outputs{{{"y", c.cpu, c.gpu}}, {{"bound", {0}, {c.violations}}, {"launches", {1}, {launches}}}};
          }};
}

// kAuto at decode sizes takes the kernel from linear_fp8_gemv_min_n() tokens (one launch;
// min_n = 1 here, as DEEPINFER_FP8_GEMV=1), and with it switched off (min_n = 9, as
// DEEPINFER_FP8_GEMV=0) the former path (none); both against the oracle.
OpCase fp8gemv_auto_case(int64_t n, int64_t rows, int64_t cols) {
  const std::string name = "linear_fp8gemv_auto_switch_n" + std::to_string(n) + "_" + std::to_string(rows) + "x" +
                           std::to_string(cols);
  return {name, "linear_fp8", [=](Rng& rng) {
            const auto w = fp8_weight(rng, rows, cols);
            const auto x = fp8_x(rng, n, cols);
            Dev<float> dx(x), dy(size_t(n * rows)), dy0(size_t(n * rows));
            const int was = kernels::linear_fp8_gemv_min_n();
            const ops::LinearParams p{dx.get(), dy.get(), n, w->ref(true), 0, -1, ops::Activations::kFP8};
            kernels::linear_fp8_gemv_set_min_n(1);
            int64_t before = kernels::linear_fp8_gemv_launches();
            gpu::linear(p, gpu::LinearMode::kAuto, nullptr);
            const int64_t on = kernels::linear_fp8_gemv_launches() - before;
            kernels::linear_fp8_gemv_set_min_n(9);
            ops::LinearParams p0 = p;
            p0.y = dy0.get();
            before = kernels::linear_fp8_gemv_launches();
            gpu::linear(p0, gpu::LinearMode::kAuto, nullptr);
            const int64_t off = kernels::linear_fp8_gemv_launches() - before;
            kernels::linear_fp8_gemv_set_min_n(was);
            const Fp8Check c = check_fp8(x, *w, cols, sample_tokens(n), 0, rows, dy.get(), name);
            const Fp8Check c0 = check_fp8(x, *w, cols, sample_tokens(n), 0, rows, dy0.get(), name + "_off");
            return Outputs{{{"y", c.cpu, c.gpu}, {"y_off", c0.cpu, c0.gpu}},
                           {{"bound", {0, 0}, {c.violations, c0.violations}}, {"launches", {1, 0}, {on, off}}}};
          }};
}

// Batch invariance: n tokens in one launch against each token alone, bitwise ("cpu" holds
// the single-token outputs).
OpCase fp8gemv_invariance_case(int64_t n, int64_t rows, int64_t cols, int64_t row0 = 0, int64_t num_rows = -1,
                               int variant = 0) {
  const std::string name = std::string(variant == 1 ? "linear_fp8gemv_lean_invariant_n" : "linear_fp8gemv_invariant_n") +
                           std::to_string(n) + "_" + std::to_string(rows) + "x" + std::to_string(cols) +
                           (row0 > 0 ? "_slice" + std::to_string(row0) : std::string());
  return {name, "former", [=](Rng& rng) {
            const VariantScope vs(variant);
            const auto w = fp8_weight(rng, rows, cols);
            const auto x = fp8_x(rng, n, cols);
            const int64_t out_rows = num_rows < 0 ? rows - row0 : num_rows;
            auto run = [&](const float* hx, int64_t m) {
              Dev<float> dx(std::vector<float>(hx, hx + m * cols)), dy(size_t(m * out_rows));
              gpu::linear({dx.get(), dy.get(), m, w->ref(true), row0, num_rows, ops::Activations::kFP8},
                          gpu::LinearMode::kAuto, nullptr, gpu::LinearWorkspace{}, gpu::LinearKernel::kFp8Gemv);
              check_cuda(cudaDeviceSynchronize(), "fp8gemv");
              return dy.host();
            };
            const auto all = run(x.data(), n);
            std::vector<float> alone(all.size());
            for (int64_t t = 0; t < n; ++t) {
              const auto y1 = run(x.data() + t * cols, 1);
              std::copy(y1.begin(), y1.end(), alone.begin() + t * out_rows);
            }
            return Outputs{{{"y", alone, all}}, {}};
          }};
}

// linear_multi under kFP8 at decode sizes: the calls in one launch where their K and split
// agree (wq_a + wkv, the shared w1 + w3), each output bitwise its own linear() ("cpu"), and
// the launch count (1 fused, else one per call).
OpCase fp8gemv_multi_case(int64_t n, int64_t rows_a, int64_t rows_b, int64_t cols_a, int64_t cols_b) {
  const std::string name = "linear_fp8gemv_multi_n" + std::to_string(n) + "_" + std::to_string(rows_a) + "x" +
                           std::to_string(cols_a) + "_" + std::to_string(rows_b) + "x" + std::to_string(cols_b);
  return {name, "former", [=](Rng& rng) {
            const auto wa = fp8_weight(rng, rows_a, cols_a);
            const auto wb = fp8_weight(rng, rows_b, cols_b);
            const auto xa = fp8_x(rng, n, cols_a);
            const auto xb = cols_b == cols_a ? xa : fp8_x(rng, n, cols_b);
            Dev<float> dxa(xa), dxb(xb), ya(size_t(n * rows_a)), yb(size_t(n * rows_b)), ya1(size_t(n * rows_a)),
                yb1(size_t(n * rows_b));
            const ops::LinearParams ps[2] = {{dxa.get(), ya.get(), n, wa->ref(true), 0, -1, ops::Activations::kFP8},
                                             {dxb.get(), yb.get(), n, wb->ref(true), 0, -1, ops::Activations::kFP8}};
            const int was = kernels::linear_fp8_gemv_min_n();
            kernels::linear_fp8_gemv_set_min_n(1);
            const int64_t before = kernels::linear_fp8_gemv_launches();
            gpu::linear_multi(ps, 2, gpu::LinearMode::kAuto, nullptr, gpu::LinearWorkspace{});
            const int64_t launches = kernels::linear_fp8_gemv_launches() - before;
            ops::LinearParams p1 = ps[0], p2 = ps[1];
            p1.y = ya1.get();
            p2.y = yb1.get();
            gpu::linear(p1, gpu::LinearMode::kAuto, nullptr);
            gpu::linear(p2, gpu::LinearMode::kAuto, nullptr);
            kernels::linear_fp8_gemv_set_min_n(was);
            check_cuda(cudaDeviceSynchronize(), "fp8gemv multi");
            const auto sa = kernels::linear_fp8_gemv_split(rows_a, cols_a), sb = kernels::linear_fp8_gemv_split(rows_b, cols_b);
            const bool same = cols_a == cols_b && sa.row_tiles_per_block == sb.row_tiles_per_block && sa.cluster == sb.cluster;
            return Outputs{{{"y1", ya1.host(), ya.host()}, {"y2", yb1.host(), yb.host()}},
                           {{"launches", {same ? 1 : 2}, {launches}}}};
          }};
}

// The lean variant against the first kernel, bitwise ("cpu" holds the first kernel's
// outputs): the same codes, products, promotion and reduction order.
OpCase fp8gemv_lean_bitwise_case(int64_t n, int64_t rows, int64_t cols, int64_t row0 = 0, int64_t num_rows = -1,
                                 int64_t block = 32) {
  std::string name = "linear_fp8gemv_lean_vs_first_n" + std::to_string(n) + "_" + std::to_string(rows) + "x" +
                     std::to_string(cols);
  if (row0 > 0 || num_rows >= 0) name += "_slice" + std::to_string(row0) + "_" + std::to_string(num_rows);
  if (block != 32) name += "_block" + std::to_string(block);
  return {name, "former", [=](Rng& rng) {
            const auto w = fp8_weight(rng, rows, cols, block);
            const auto x = fp8_x(rng, n, cols);
            const int64_t out_rows = num_rows < 0 ? rows - row0 : num_rows;
            Dev<float> dx(x);
            auto run = [&](int variant) {
              const VariantScope vs(variant);
              Dev<float> dy(size_t(n * out_rows));
              gpu::linear({dx.get(), dy.get(), n, w->ref(true), row0, num_rows, ops::Activations::kFP8},
                          gpu::LinearMode::kAuto, nullptr, gpu::LinearWorkspace{}, gpu::LinearKernel::kFp8Gemv);
              check_cuda(cudaDeviceSynchronize(), "fp8gemv");
              return dy.host();
            };
            const auto first = run(0);
            return Outputs{{{"y", first, run(1)}}, {}};
          }};
}
}  // namespace

std::vector<OpCase> linear_fp8_cases() {
  using K = gpu::LinearKernel;
  struct Shape {
    const char* name;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{"wq_a", 1280, 5120}, {"wq_b", 32768, 1280},     {"wkv", 512, 5120},
                          {"wo_b", 5120, 8192}, {"shared_w1", 2304, 5120}, {"shared_w2", 5120, 2304}};
  std::vector<OpCase> cases;
  for (const Shape& s : shapes) {
    const bool big = s.rows * s.cols > (int64_t(16) << 20);  // wq_b, wo_b: the oracle's sums take longest
    cases.push_back(fp8_case(s.name, K::kAuto, 1, s.rows, s.cols));
    if (!big) cases.push_back(fp8_case(s.name, K::kAuto, 8, s.rows, s.cols));
    // From linear_fp8_min_n tokens kAuto (min_n = max: no cuBLASLt) and kFp8Mma run the same
    // mma.sync kernel, so one case per size (the session-6 wgmma kinds are deleted, NOTES 24).
    cases.push_back(fp8_case(s.name, K::kAuto, 4096, s.rows, s.cols));
    if (big) cases.push_back(fp8_case(s.name, K::kAuto, 8192, s.rows, s.cols));  // prefill size
    if (!big) cases.push_back(fp8_case(s.name, K::kAuto, 256, s.rows, s.cols));   // batch 256
  }
  // Ragged tokens and rows (tile edges), a row slice starting on a scale block, no
  // workspace, kAuto on both sides of the threshold, the fp32 kernels forced.
  for (K k : {K::kFp8Mma, K::kAuto}) {
    cases.push_back(fp8_case("ragged", k, 300, 1000, 2080));
    cases.push_back(fp8_case("ragged", k, 77, 1000, 2080, 64, 200, false));
  }
  for (K k : {K::kGemv, K::kMma, K::kTiled}) cases.push_back(fp8_case("fp32", k, 8, 520, 1024));
  cases.push_back(fp8_case("fp32", K::kMma, 100, 520, 1024));
  cases.push_back(fp8_case("kragged", K::kAuto, 100, 300, 1000));  // K % 32 = 8: the fp32 path
  cases.push_back(fp8_case("kragged", K::kAuto, 3, 300, 1000));
  cases.push_back(fp8_case("inv", K::kAuto, 20, 512, 5120, 0, -1, true, gpu::LinearMode::kInvariant));
  cases.push_back(fp8_graph_case(200, 1280, 5120));
  // The cuBLASLt path: Flash shapes at batch 256 and a prefill piece, ragged tokens / rows /
  // K, the forced kernel, and x in token pieces (a workspace for 100 tokens).
  cases.push_back(fp8_gemm_case(K::kAuto, 256, 1280, 5120));
  cases.push_back(fp8_gemm_case(K::kAuto, 4096, 2304, 5120));
  cases.push_back(fp8_gemm_case(K::kAuto, 1024, 5120, 8192));
  cases.push_back(fp8_gemm_case(K::kAuto, 77, 1000, 2080));
  cases.push_back(fp8_gemm_case(K::kGemm, 5, 300, 1024));
  cases.push_back(fp8_gemm_case(K::kAuto, 300, 520, 1024, 100));
  cases.push_back(fp8_kernel_case(4096, 2304, 5120));
  cases.push_back(fp8_kernel_case(250, 1000, 1280));  // ragged tiles
  cases.push_back(fp8_quant_case(7, 5120));
  cases.push_back(fp8_quant_case(5, 1000));  // K % 32 = 8 (the vectorized kernel: K % 4 == 0)
  cases.push_back(fp8_quant_case(3, 1002));  // K % 4 = 2: the one-element-per-thread kernel
  cases.push_back(fp8_reject_case());
  // The decode kernel (NOTES 31): n = 1 .. 8 with ragged rows and K (2080 = 65 blocks: not a
  // multiple of 128 / 512), the three kinds of split (cluster ranks c > 1 with one or two
  // K-slices per block, and c = 1), row slices (on and off a scale block), 128-blocks, no
  // scales, kAuto with the switch on / off, invariance, linear_multi.
  for (int64_t n = 1; n <= 8; ++n) cases.push_back(fp8gemv_case("ragged", n, 1000, 2080));
  cases.push_back(fp8gemv_case("c1", 3, 4100, 256));    // split tw 8, c 1: direct stores
  cases.push_back(fp8gemv_case("c1", 8, 4100, 256));
  cases.push_back(fp8gemv_case("s2", 2, 1280, 5120));   // wq_a: tw 4 (2 K-slices), c 8
  cases.push_back(fp8gemv_case("s2", 7, 520, 5120));    // wkv-like, ragged rows
  cases.push_back(fp8gemv_case("wq_b", 8, 32768, 1280));
  cases.push_back(fp8gemv_case("wo_b", 4, 5120, 8192));
  cases.push_back(fp8gemv_case("w2", 8, 5120, 2304));
  cases.push_back(fp8gemv_case("slice", 5, 1000, 2080, 64, 200));
  cases.push_back(fp8gemv_case("slice", 3, 1000, 2080, 40, 77));   // off a 32-row scale block
  cases.push_back(fp8gemv_case("block", 4, 1000, 2048, 0, -1, 128));
  cases.push_back(fp8gemv_case("noscale", 6, 300, 1024, 0, -1, 0));
  cases.push_back(fp8gemv_case("kbig", 2, 200, 32768));  // a K range of 128 blocks per rank (the cap)
  cases.push_back(fp8gemv_auto_case(3, 1000, 2080));
  cases.push_back(fp8gemv_auto_case(1, 2304, 5120));
  cases.push_back(fp8gemv_invariance_case(8, 1000, 2080));
  cases.push_back(fp8gemv_invariance_case(5, 1280, 5120));
  cases.push_back(fp8gemv_invariance_case(8, 4100, 256));
  cases.push_back(fp8gemv_invariance_case(5, 1000, 2080, 40, 77));
  cases.push_back(fp8gemv_multi_case(1, 1280, 512, 5120, 5120));  // wq_a + wkv
  cases.push_back(fp8gemv_multi_case(8, 2304, 2304, 5120, 5120)); // shared w1 + w3
  cases.push_back(fp8gemv_multi_case(4, 512, 512, 1024, 2048));   // different K: two launches
  // The lean variant (linear_fp8_gemv_set_variant(1)): the oracle, invariance, and bitwise
  // the first kernel on every split kind, slices, 128-blocks, no scales, the K-range cap.
  for (int64_t n : {1, 3, 8}) cases.push_back(fp8gemv_case("ragged", n, 1000, 2080, 0, -1, 32, 1));
  cases.push_back(fp8gemv_case("c1", 8, 4100, 256, 0, -1, 32, 1));
  cases.push_back(fp8gemv_case("s2", 2, 1280, 5120, 0, -1, 32, 1));
  cases.push_back(fp8gemv_case("wq_b", 1, 32768, 1280, 0, -1, 32, 1));
  cases.push_back(fp8gemv_case("slice", 3, 1000, 2080, 40, 77, 32, 1));
  cases.push_back(fp8gemv_case("noscale", 6, 300, 1024, 0, -1, 0, 1));
  cases.push_back(fp8gemv_invariance_case(8, 1000, 2080, 0, -1, 1));
  cases.push_back(fp8gemv_invariance_case(5, 1280, 5120, 0, -1, 1));
  for (int64_t n : {1, 2, 5, 8}) cases.push_back(fp8gemv_lean_bitwise_case(n, 1000, 2080));
  cases.push_back(fp8gemv_lean_bitwise_case(8, 4100, 256));
  cases.push_back(fp8gemv_lean_bitwise_case(4, 1280, 5120));
  cases.push_back(fp8gemv_lean_bitwise_case(1, 5120, 8192));
  cases.push_back(fp8gemv_lean_bitwise_case(7, 5120, 2304));
  cases.push_back(fp8gemv_lean_bitwise_case(3, 1000, 2080, 40, 77));
  cases.push_back(fp8gemv_lean_bitwise_case(4, 1000, 2048, 0, -1, 128));
  cases.push_back(fp8gemv_lean_bitwise_case(6, 300, 1024, 0, -1, 0));
  cases.push_back(fp8gemv_lean_bitwise_case(2, 200, 32768));
  return cases;
}

}  // namespace deepinfer::testing_cuda
