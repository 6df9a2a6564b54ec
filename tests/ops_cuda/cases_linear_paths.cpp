// linear through each kernel path explicitly (kernels::linear with a forced path),
// so every path is checked against the oracle whatever the automatic choice is.
#include "harness.h"
#include "kernels/cuda/smxx_linear.cuh"
#include "ops/cuda/weight_args.h"
#include "ops/linear.h"

namespace deepinfer::testing_cuda {

namespace {

const char* path_name(kernels::LinearPath p) {
  switch (p) {
    case kernels::LinearPath::kGemv: return "gemv";
    case kernels::LinearPath::kMma: return "mma";
    case kernels::LinearPath::kTiled: return "tiled";
    default: return "auto";
  }
}

OpCase path_case(kernels::LinearPath path, WKind kind, int64_t n, int64_t rows, int64_t cols, int64_t row0 = 0,
                 int64_t num_rows = -1) {
  std::string name = std::string("linear_path_") + path_name(path) + "_" + wkind_name(kind) + "_n" +
                     std::to_string(n) + "_" + std::to_string(rows) + "x" + std::to_string(cols);
  if (row0 > 0) name += "_slice";
  return {name, "linear", [=](Rng& rng) {
            const auto w = random_weight(rng, kind, rows, cols, 0.05f);
            const auto x = randn(rng, n * cols);
            const int64_t out_rows = num_rows < 0 ? rows - row0 : num_rows;
            std::vector<float> y(n * out_rows);
            ops::cpu::linear({x.data(), y.data(), n, w->ref(false), row0, num_rows});
            Dev<float> dx(x), dy(n * out_rows);
            kernels::LinearArgs a;
            a.x = dx.get();
            a.y = dy.get();
            a.n = n;
            a.w = ops::cuda::to_weight_args(w->ref(true));
            a.row0 = row0;
            a.num_rows = out_rows;
            a.path = path;
            check_cuda(kernels::linear(a, nullptr), name.c_str());
            return Outputs{{{"y", y, dy.host()}}, {}};
          }};
}

}  // namespace

std::vector<OpCase> linear_path_cases() {
  using P = kernels::LinearPath;
  std::vector<OpCase> c;
  // Tensor-core path: row tails (200 = 3 x 64 + 8), token tails, a slice.
  for (int64_t n : {9, 64, 100}) c.push_back(path_case(P::kMma, WKind::kFp8E8m0, n, 200, 1280));
  for (int64_t n : {16, 64}) c.push_back(path_case(P::kMma, WKind::kFp4E8m0, n, 200, 1280));
  for (int64_t n : {9, 64}) c.push_back(path_case(P::kMma, WKind::kBF16, n, 200, 1280));
  c.push_back(path_case(P::kMma, WKind::kFp8E8m0, 1, 130, 256));
  c.push_back(path_case(P::kMma, WKind::kFp8E8m0, 33, 256, 512, 40, 150));
  // gemv at every batch width it instantiates.
  for (int64_t n : {1, 2, 4, 7, 8}) c.push_back(path_case(P::kGemv, WKind::kFp8E8m0, n, 200, 1280));
  c.push_back(path_case(P::kGemv, WKind::kFp4E8m0, 5, 200, 1280));
  c.push_back(path_case(P::kGemv, WKind::kFp8F32Scale, 3, 200, 1280));
  // The SIMT fallback on formats the others also take.
  c.push_back(path_case(P::kTiled, WKind::kFp8E8m0, 1, 200, 1280));
  c.push_back(path_case(P::kTiled, WKind::kFp8E8m0, 64, 200, 1280));
  c.push_back(path_case(P::kTiled, WKind::kFp4E8m0, 3, 200, 1280));
  c.push_back(path_case(P::kTiled, WKind::kBF16, 70, 200, 1280));
  return c;
}

}  // namespace deepinfer::testing_cuda
