// linear under Activations::kBF16 (x rounded to bf16 first, ops/linear.h) on every
// kernel path against the CPU oracle with the same rounding: gemv and tiled (round on
// load), mma (one bf16 MMA per tile), and the cuBLASLt GEMM (x -> bf16 scratch, the
// weight dequantized into the workspace, bf16 x bf16 -> fp32), the latter at several
// shapes with odd sizes (n not a multiple of 8, rows / cols off the tiles), in token
// pieces (a workspace smaller than x), on a row slice, twice in a row (bitwise: the
// cached algorithm is deterministic), and inside a captured CUDA graph.
//
// Products are exact in every path (bf16 x times a weight exact in bf16), so only the
// fp32 summation order differs from the oracle's double sums: the "linear" tolerance
// (3e-5 of the output RMS) for the hand-written kernels, which promote their tensor-core
// sums per K step, and "linear_gemm" (the same 3e-5) for cuBLASLt: measured <= 7.5e-6
// on the H200 (bench/results/2026-11-30-bf16-gemm.md).
#include <gtest/gtest.h>

#include "harness.h"
#include "kernels/cuda/smxx_linear.cuh"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"
#include "ops/linear.h"

namespace deepinfer::testing_cuda {

namespace {

namespace gpu = ops::cuda;

const char* path_name(kernels::LinearPath p) {
  switch (p) {
    case kernels::LinearPath::kGemv: return "gemv";
    case kernels::LinearPath::kMma: return "mma";
    case kernels::LinearPath::kTiled: return "tiled";
    default: return "auto";
  }
}

// x with values that bf16 rounding changes (and a few exact ties), so a path that
// skipped the rounding would differ from the oracle by ~1e-3 of the RMS.
std::vector<float> rough_x(Rng& rng, int64_t count) {
  std::vector<float> x = randn(rng, size_t(count));
  for (size_t i = 0; i < x.size(); i += 97) x[i] = 1.0f + 1.0f / 256.0f;  // a tie: rounds to even (1.0)
  return x;
}

std::vector<float> cpu_bf16(const std::vector<float>& x, const TestWeight& w, int64_t n, int64_t row0, int64_t num_rows) {
  const int64_t out_rows = num_rows < 0 ? w.rows - row0 : num_rows;
  std::vector<float> y(size_t(n * out_rows));
  ops::cpu::linear({x.data(), y.data(), n, w.ref(false), row0, num_rows, ops::Activations::kBF16});
  return y;
}

// A weight of the kind's format (no data), for linear_gemm_min_n.
ops::WeightRef shape_of(WKind kind, int64_t rows) {
  static const uint8_t dummy = 0;
  ops::WeightRef w;
  w.rows = rows;
  w.dtype = kind == WKind::kBF16 ? DType::BF16 : kind == WKind::kF16 ? DType::F16 : kind == WKind::kF32 ? DType::F32
            : kind == WKind::kFp4E8m0 ? DType::I8 : DType::F8_E4M3;
  if (kind == WKind::kFp8E8m0 || kind == WKind::kFp4E8m0 || kind == WKind::kFp8F32Scale) {
    w.scale = &dummy;
    w.scale_dtype = kind == WKind::kFp8F32Scale ? DType::F32 : DType::F8_E8M0;
  }
  return w;
}

// A kernel path forced through kernels::linear with bf16_x.
OpCase path_case(kernels::LinearPath path, WKind kind, int64_t n, int64_t rows, int64_t cols) {
  const std::string name = std::string("linear_bf16_") + path_name(path) + "_" + wkind_name(kind) + "_n" +
                           std::to_string(n) + "_" + std::to_string(rows) + "x" + std::to_string(cols);
  return {name, "linear", [=](Rng& rng) {
            const auto w = random_weight(rng, kind, rows, cols, 0.05f);
            const auto x = rough_x(rng, n * cols);
            const auto y = cpu_bf16(x, *w, n, 0, -1);
            Dev<float> dx(x), dy(size_t(n * rows));
            kernels::LinearArgs a;
            a.x = dx.get();
            a.y = dy.get();
            a.n = n;
            a.w = ops::cuda::to_weight_args(w->ref(true));
            a.num_rows = rows;
            a.path = path;
            a.bf16_x = true;
            check_cuda(kernels::linear(a, nullptr), name.c_str());
            return Outputs{{{"y", y, dy.host()}}, {}};
          }};
}

// Through the op (ops::cuda::linear) with a workspace: kAuto (whatever it picks for n)
// or forced onto the cuBLASLt GEMM. ws_tokens > 0: a workspace with room for the
// weight and only that many tokens of x (the GEMM runs in pieces).
OpCase op_case(gpu::LinearKernel kernel, WKind kind, int64_t n, int64_t rows, int64_t cols, int64_t row0 = 0,
               int64_t num_rows = -1, int64_t ws_tokens = 0) {
  const bool gemm = kernel == gpu::LinearKernel::kGemm;
  std::string name = std::string("linear_bf16_") + (gemm ? "gemm_" : "auto_") + wkind_name(kind) + "_n" +
                     std::to_string(n) + "_" + std::to_string(rows) + "x" + std::to_string(cols);
  if (row0 > 0) name += "_slice";
  if (ws_tokens > 0) name += "_pieces" + std::to_string(ws_tokens);
  // kAuto takes cuBLASLt from linear_gemm_min_n rows for the weights it can take.
  const bool via_lt = gemm || n >= gpu::linear_gemm_min_n(shape_of(kind, rows), num_rows < 0 ? rows - row0 : num_rows);
  return {name, via_lt ? "linear_gemm" : "linear", [=](Rng& rng) {
            const auto w = random_weight(rng, kind, rows, cols, 0.05f);
            const auto x = rough_x(rng, n * cols);
            const int64_t out_rows = num_rows < 0 ? rows - row0 : num_rows;
            const auto y = cpu_bf16(x, *w, n, row0, num_rows);
            const size_t bytes = gpu::linear_gemm_workspace_bytes(out_rows * cols, (ws_tokens > 0 ? ws_tokens : n) * cols);
            Dev<uint8_t> ws(bytes);
            Dev<float> dx(x), dy(size_t(n * out_rows));
            gpu::linear({dx.get(), dy.get(), n, w->ref(true), row0, num_rows, ops::Activations::kBF16},
                        gpu::LinearMode::kAuto, nullptr, {ws.get(), bytes}, kernel);
            return Outputs{{{"y", y, dy.host()}}, {}};
          }};
}

// The GEMM twice on the same inputs: bitwise the same (one cached algorithm per shape,
// no in-place split-K reduction). cpu = first call, gpu = second.
OpCase repeat_case(WKind kind, int64_t n, int64_t rows, int64_t cols) {
  const std::string name = std::string("linear_bf16_gemm_repeat_") + wkind_name(kind) + "_n" + std::to_string(n) + "_" +
                           std::to_string(rows) + "x" + std::to_string(cols);
  return {name, "linear_repeat", [=](Rng& rng) {
            const auto w = random_weight(rng, kind, rows, cols, 0.05f);
            const auto x = rough_x(rng, n * cols);
            const size_t bytes = gpu::linear_gemm_workspace_bytes(rows * cols, n * cols);
            Dev<uint8_t> ws(bytes);
            Dev<float> dx(x), dy1(size_t(n * rows)), dy2(size_t(n * rows));
            for (float* y : {dy1.get(), dy2.get()})
              gpu::linear({dx.get(), y, n, w->ref(true), 0, -1, ops::Activations::kBF16}, gpu::LinearMode::kAuto,
                          nullptr, {ws.get(), bytes}, gpu::LinearKernel::kGemm);
            return Outputs{{{"y", dy1.host(), dy2.host()}}, {}};
          }};
}

// The op captured into a CUDA graph on a shape no other case uses (the heuristic is
// queried during the capture), replayed twice, against the CPU.
OpCase graph_case(gpu::LinearKernel kernel, WKind kind, int64_t n, int64_t rows, int64_t cols) {
  const std::string name = std::string("linear_bf16_graph_") +
                           (kernel == gpu::LinearKernel::kGemm ? "gemm_" : "auto_") + wkind_name(kind) + "_n" +
                           std::to_string(n) + "_" + std::to_string(rows) + "x" + std::to_string(cols);
  return {name, kernel == gpu::LinearKernel::kGemm ? "linear_gemm" : "linear", [=](Rng& rng) {
            const auto w = random_weight(rng, kind, rows, cols, 0.05f);
            const auto x = rough_x(rng, n * cols);
            const auto y = cpu_bf16(x, *w, n, 0, -1);
            const size_t bytes = gpu::linear_gemm_workspace_bytes(rows * cols, n * cols);
            Dev<uint8_t> ws(bytes);
            Dev<float> dx(x), dy(size_t(n * rows));
            cudaStream_t s = nullptr;
            check_cuda(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
            cudaGraph_t g = nullptr;
            cudaGraphExec_t e = nullptr;
            check_cuda(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "begin capture");
            try {
              gpu::linear({dx.get(), dy.get(), n, w->ref(true), 0, -1, ops::Activations::kBF16}, gpu::LinearMode::kAuto,
                          s, {ws.get(), bytes}, kernel);
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
            return Outputs{{{"y", y, dy.host()}}, {}};
          }};
}

// A persistent bf16 copy (WeightRef::bf16, --bf16-weights) against the per-call
// dequantization: the same call (forced kGemm, or kAuto with the GEMM from min_n) once
// on the plain weight and once on the weight carrying its copy: bitwise the same
// (cpu = per call, gpu = copy). The ints check which way each call went
// (linear_gemm_stats: {dequantized, bf16_copy} per call), so a copy that was silently
// ignored fails; copy_used = false is the case of a row slice whose start in the copy is
// less aligned than the workspace: it dequantizes per call.
OpCase copy_case(gpu::LinearKernel kernel, WKind kind, int64_t n, int64_t rows, int64_t cols, int64_t row0 = 0,
                 int64_t num_rows = -1, int64_t ws_tokens = 0, bool copy_used = true) {
  std::string name = std::string("linear_bf16_copy_") +
                     (kernel == gpu::LinearKernel::kGemm ? "gemm_" : "auto_") + wkind_name(kind) + "_n" +
                     std::to_string(n) + "_" + std::to_string(rows) + "x" + std::to_string(cols);
  if (row0 > 0) name += "_slice" + std::to_string(row0);
  if (ws_tokens > 0) name += "_pieces" + std::to_string(ws_tokens);
  return {name, "linear_repeat", [=](Rng& rng) {
            const auto w = random_weight(rng, kind, rows, cols, 0.05f);
            const auto x = rough_x(rng, n * cols);
            const int64_t out_rows = num_rows < 0 ? rows - row0 : num_rows;
            const size_t bytes = gpu::linear_gemm_workspace_bytes(out_rows * cols, (ws_tokens > 0 ? ws_tokens : n) * cols);
            Dev<uint8_t> ws(bytes);
            const ops::WeightRef plain = w->ref(true);
            const size_t copy_bytes = gpu::linear_bf16_copy_bytes(plain);
            if (copy_bytes != size_t(rows * cols * 2)) throw std::runtime_error("linear_bf16_copy_bytes: wrong size");
            Dev<uint8_t> copy(copy_bytes);
            ops::WeightRef with = plain;
            with.bf16 = reinterpret_cast<const uint16_t*>(copy.get());
            gpu::linear_make_bf16_copy(plain, reinterpret_cast<uint16_t*>(copy.get()), nullptr);
            Dev<float> dx(x), dy1(size_t(n * out_rows)), dy2(size_t(n * out_rows));
            const gpu::LinearWorkspace lw{ws.get(), bytes, kernel == gpu::LinearKernel::kAuto ? 2 : 0};
            std::vector<int64_t> ways;
            for (auto [wr, y] : {std::pair{plain, dy1.get()}, std::pair{with, dy2.get()}}) {
              check_cuda(cudaMemset(y, 0xff, size_t(n * out_rows) * 4), "poison");
              const gpu::LinearGemmStats s0 = gpu::linear_gemm_stats();
              gpu::linear({dx.get(), y, n, wr, row0, num_rows, ops::Activations::kBF16}, gpu::LinearMode::kAuto,
                          nullptr, lw, kernel);
              const gpu::LinearGemmStats s1 = gpu::linear_gemm_stats();
              ways.push_back(s1.dequantized - s0.dequantized);
              ways.push_back(s1.bf16_copy - s0.bf16_copy);
            }
            const std::vector<int64_t> want = {1, 0, copy_used ? 0 : 1, copy_used ? 1 : 0};
            return Outputs{{{"y", dy1.host(), dy2.host()}}, {{"gemm_ways", want, ways}}};
          }};
}

}  // namespace

std::vector<OpCase> linear_bf16_cases() {
  using P = kernels::LinearPath;
  using K = gpu::LinearKernel;
  std::vector<OpCase> c;
  // Hand-written kernels, each format they take.
  for (int64_t n : {1, 5, 8}) c.push_back(path_case(P::kGemv, WKind::kFp8E8m0, n, 200, 1280));
  c.push_back(path_case(P::kGemv, WKind::kFp4E8m0, 3, 200, 1280));
  c.push_back(path_case(P::kGemv, WKind::kBF16, 2, 200, 1280));
  c.push_back(path_case(P::kGemv, WKind::kFp8F32Scale, 4, 200, 1280));
  for (int64_t n : {9, 64, 100}) c.push_back(path_case(P::kMma, WKind::kFp8E8m0, n, 200, 1280));
  c.push_back(path_case(P::kMma, WKind::kFp4E8m0, 37, 200, 1280));
  c.push_back(path_case(P::kMma, WKind::kBF16, 70, 200, 1280));
  c.push_back(path_case(P::kTiled, WKind::kFp8E8m0, 3, 200, 1280));
  c.push_back(path_case(P::kTiled, WKind::kF32, 70, 33, 7));
  c.push_back(path_case(P::kTiled, WKind::kF16, 20, 70, 100));
  // The op's own choice: gemv, mma, then (n >= linear_gemm_min_n) cuBLASLt.
  for (int64_t n : {1, 8, 40, 64, 130, 300}) c.push_back(op_case(K::kAuto, WKind::kFp8E8m0, n, 256, 1280));
  for (int64_t n : {1, 7, 8, 20}) c.push_back(op_case(K::kAuto, WKind::kBF16, n, 200, 1280));
  c.push_back(op_case(K::kAuto, WKind::kFp8F32Scale, 200, 256, 1280));  // fp32 scales: not the GEMM's
  // cuBLASLt: FP8 (32x32 blocks), FP4 (1x32), BF16 in place; odd n, rows, cols.
  for (int64_t n : {8, 37, 129, 256}) c.push_back(op_case(K::kGemm, WKind::kFp8E8m0, n, 256, 1280));
  c.push_back(op_case(K::kGemm, WKind::kFp8E8m0, 61, 200, 1280));
  c.push_back(op_case(K::kGemm, WKind::kFp8E8m0, 19, 1280, 5120));
  c.push_back(op_case(K::kGemm, WKind::kFp8E8m0, 45, 100, 99));  // odd cols: the scalar dequant, lda 99
  c.push_back(op_case(K::kGemm, WKind::kFp4E8m0, 129, 300, 512));
  c.push_back(op_case(K::kGemm, WKind::kFp4E8m0, 33, 70, 104));
  c.push_back(op_case(K::kGemm, WKind::kBF16, 77, 200, 1280));
  c.push_back(op_case(K::kGemm, WKind::kBF16, 13, 70, 100));
  c.push_back(op_case(K::kGemm, WKind::kFp8E8m0, 150, 256, 512, 96, 64));    // a row slice (wo_a's groups)
  c.push_back(op_case(K::kGemm, WKind::kFp8E8m0, 130, 256, 512, 0, -1, 50));  // x in pieces of 50 tokens
  c.push_back(op_case(K::kGemm, WKind::kFp4E8m0, 100, 130, 256, 0, -1, 33));
  c.push_back(repeat_case(WKind::kFp8E8m0, 300, 512, 2048));
  c.push_back(repeat_case(WKind::kBF16, 64, 1000, 512));
  c.push_back(graph_case(K::kGemm, WKind::kFp8E8m0, 140, 320, 768));
  c.push_back(graph_case(K::kGemm, WKind::kFp4E8m0, 21, 96, 640));
  c.push_back(graph_case(K::kAuto, WKind::kFp8E8m0, 40, 320, 768));  // mma, one MMA per tile
  // Persistent bf16 copies: bitwise the per-call path (FP8 32x32 blocks, FP4 1x32, the
  // vector and scalar dequant, a wo_a-style slice, token pieces, kAuto from min_n).
  c.push_back(copy_case(K::kGemm, WKind::kFp8E8m0, 37, 256, 1280));
  c.push_back(copy_case(K::kGemm, WKind::kFp8E8m0, 256, 1280, 5120));
  c.push_back(copy_case(K::kGemm, WKind::kFp4E8m0, 129, 300, 512));
  c.push_back(copy_case(K::kGemm, WKind::kFp8E8m0, 45, 100, 99, 0, -1, 0, true));  // odd cols: scalar dequant
  c.push_back(copy_case(K::kGemm, WKind::kFp8E8m0, 150, 256, 512, 96, 64));        // a row slice (wo_a's groups)
  c.push_back(copy_case(K::kGemm, WKind::kFp8E8m0, 30, 100, 100, 3, 40, 0, false)); // slice 600 bytes in: per call
  c.push_back(copy_case(K::kGemm, WKind::kFp8E8m0, 130, 256, 512, 0, -1, 50));     // x in pieces of 50 tokens
  c.push_back(copy_case(K::kAuto, WKind::kFp4E8m0, 70, 320, 768));
  c.push_back(copy_case(K::kAuto, WKind::kFp8E8m0, 9, 320, 768));
  return c;
}

// The forced GEMM refuses what it cannot take, with an error (not a silent fallback).
TEST(LinearBf16, ForcedGemmRejectsWhatItCannotTake) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
  Rng rng(5);
  const int64_t n = 16, rows = 64, cols = 256;
  const auto fp8 = random_weight(rng, WKind::kFp8E8m0, rows, cols, 0.05f);
  const auto fp8_f32s = random_weight(rng, WKind::kFp8F32Scale, rows, cols, 0.05f);
  Dev<float> dx(randn(rng, size_t(n * cols))), dy(size_t(n * rows));
  const size_t bytes = gpu::linear_gemm_workspace_bytes(rows * cols, n * cols);
  Dev<uint8_t> ws(bytes);
  auto run = [&](const TestWeight& w, ops::Activations act, gpu::LinearWorkspace lw) {
    gpu::linear({dx.get(), dy.get(), n, w.ref(true), 0, -1, act}, gpu::LinearMode::kAuto, nullptr, lw,
                gpu::LinearKernel::kGemm);
  };
  EXPECT_THROW(run(*fp8, ops::Activations::kF32, {ws.get(), bytes}), std::runtime_error);       // f32 activations
  EXPECT_THROW(run(*fp8_f32s, ops::Activations::kBF16, {ws.get(), bytes}), std::runtime_error);  // fp32 scales
  EXPECT_THROW(run(*fp8, ops::Activations::kBF16, {}), std::runtime_error);                      // no workspace
  EXPECT_THROW(run(*fp8, ops::Activations::kBF16, {ws.get(), size_t(1) << 20}), std::runtime_error);  // too small
  EXPECT_NO_THROW(run(*fp8, ops::Activations::kBF16, {ws.get(), bytes}));
  // kInvariant with a forced kernel is a contradiction.
  EXPECT_THROW(gpu::linear({dx.get(), dy.get(), n, fp8->ref(true), 0, -1, ops::Activations::kBF16},
                           gpu::LinearMode::kInvariant, nullptr, {ws.get(), bytes}, gpu::LinearKernel::kMma),
               std::runtime_error);
  // Without a workspace kAuto falls back to the hand-written kernels at any n.
  Dev<float> dx2(randn(rng, size_t(300 * cols))), dy2(size_t(300 * rows));
  EXPECT_NO_THROW(gpu::linear({dx2.get(), dy2.get(), 300, fp8->ref(true), 0, -1, ops::Activations::kBF16},
                              gpu::LinearMode::kAuto, nullptr, {}, gpu::LinearKernel::kAuto));
  check_cuda(cudaDeviceSynchronize(), "sync");
}

// Which weights get a bf16 copy: exactly those the GEMM path would dequantize.
TEST(LinearBf16, CopyBytesOnlyForDequantizedWeights) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
  Rng rng(6);
  for (WKind k : {WKind::kF32, WKind::kBF16, WKind::kF16, WKind::kFp8F32Scale, WKind::kFp8E8m0, WKind::kFp4E8m0}) {
    SCOPED_TRACE(wkind_name(k));
    const auto w = random_weight(rng, k, 64, 256, 0.05f);
    const bool want = k == WKind::kFp8E8m0 || k == WKind::kFp4E8m0;
    EXPECT_EQ(gpu::linear_bf16_copy_bytes(w->ref(true)), want ? size_t(64 * 256 * 2) : size_t(0));
    Dev<uint8_t> out(64 * 256 * 2);
    if (!want) {
      EXPECT_THROW(gpu::linear_make_bf16_copy(w->ref(true), reinterpret_cast<uint16_t*>(out.get()), nullptr),
                   std::runtime_error);
    }
  }
  EXPECT_EQ(gpu::linear_bf16_copy_bytes(ops::WeightRef{}), size_t(0));
}

}  // namespace deepinfer::testing_cuda
