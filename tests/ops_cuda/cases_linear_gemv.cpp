// The gemv path's kernels (kernels/cuda/smxx_linear_gemv.cuh): the bulk-copy kernel
// (tiles of whole rows through a ring of shared-memory stages) and the persistent kernel
// (one wave of blocks streaming contiguous tile ranges, loads in flight in a register or
// cp.async ring) against the CPU oracle (family "linear"), and against the former
// streaming kernel on the same inputs, bitwise (family "former": all follow one per-row
// summation order, so every output must carry the same bits). Covered: every weight format, n = 1 .. 8 (each NT
// instantiation and partial ones), bf16-rounded x, row slices, strided and grouped x
// (the grouped wo_a launch), row tails, one-stage launches and rings that wrap many
// times (a capped grid), and several weights in one launch (linear_gemv_multi).
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>

#include <gtest/gtest.h>

#include "harness.h"
#include "kernels/cuda/smxx_elementwise.cuh"
#include "kernels/cuda/smxx_linear.cuh"
#include "kernels/cuda/smxx_linear_tmap.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"
#include "ops/linear.h"

namespace deepinfer::testing_cuda {

namespace {

// Sets the gemv kernel, the grid cap (bulk and persistent kernels) and the persistent
// kernel's ring depth for one scope.
struct GemvScope {
  GemvScope(kernels::GemvKind k, int cap, int depth = 0) {
    kernels::gemv_set_kind(k);
    kernels::gemv_set_bulk_grid_cap(cap);
    kernels::gemv_set_persist(depth, 0);
  }
  ~GemvScope() {
    kernels::gemv_set_kind(kernels::GemvKind::kAuto);
    kernels::gemv_set_bulk_grid_cap(0);
    kernels::gemv_set_persist(0, 0);  // the default ring
  }
};

struct Shape {
  WKind kind;
  int64_t n, rows, cols;
  int64_t row0 = 0, num_rows = -1;  // a slice of rows
  bool bf16_x = false;
  int cap = 0;         // bulk grid cap (0: none)
  int64_t groups = 0;  // > 0: grouped x (x_group_rows = rows / groups, x_stride = groups * cols)
};

std::string shape_name(const char* what, const Shape& s) {
  std::string name = std::string(what) + "_" + wkind_name(s.kind) + "_n" + std::to_string(s.n) + "_" +
                     std::to_string(s.rows) + "x" + std::to_string(s.cols);
  if (s.row0 > 0 || s.num_rows >= 0) name += "_slice";
  if (s.bf16_x) name += "_bf16x";
  if (s.cap > 0) name += "_cap" + std::to_string(s.cap);
  if (s.groups > 0) name += "_groups" + std::to_string(s.groups);
  return name;
}

// x for a shape: [n, cols] or, grouped, [n, groups * cols] (group g's columns at g * cols).
int64_t x_width(const Shape& s) { return s.groups > 0 ? s.groups * s.cols : s.cols; }

ops::Activations act_of(const Shape& s) { return s.bf16_x ? ops::Activations::kBF16 : ops::Activations::kF32; }

// The CPU oracle of a shape (grouped: each group's rows through its own slice of x).
std::vector<float> oracle(const Shape& s, const TestWeight& w, const std::vector<float>& x) {
  const int64_t out_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
  std::vector<float> y(size_t(s.n * out_rows));
  if (s.groups == 0) {
    ops::cpu::linear({x.data(), y.data(), s.n, w.ref(false), s.row0, s.num_rows, act_of(s)});
    return y;
  }
  const int64_t gr = out_rows / s.groups, width = x_width(s);
  std::vector<float> xg(size_t(s.n * s.cols)), yg(size_t(s.n * gr));
  for (int64_t g = 0; g < s.groups; ++g) {
    for (int64_t t = 0; t < s.n; ++t)
      std::copy_n(x.begin() + t * width + g * s.cols, s.cols, xg.begin() + t * s.cols);
    ops::cpu::linear({xg.data(), yg.data(), s.n, w.ref(false), s.row0 + g * gr, gr, act_of(s)});
    for (int64_t t = 0; t < s.n; ++t) std::copy_n(yg.begin() + t * gr, gr, y.begin() + t * out_rows + g * gr);
  }
  return y;
}

kernels::LinearArgs args(const Shape& s, const TestWeight& w, const float* x, float* y) {
  kernels::LinearArgs a;
  a.x = x;
  a.y = y;
  a.n = s.n;
  a.w = ops::cuda::to_weight_args(w.ref(true));
  a.row0 = s.row0;
  a.num_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
  a.bf16_x = s.bf16_x;
  a.path = kernels::LinearPath::kGemv;
  if (s.groups > 0) {
    a.x_stride = x_width(s);
    a.x_group_rows = a.num_rows / s.groups;
    a.x_group_step = s.cols;
  }
  return a;
}

// y of a shape through one gemv kernel (depth: the persistent kernel's ring).
std::vector<float> run_kind(const Shape& s, kernels::GemvKind kind, const TestWeight& w, const Dev<float>& dx,
                            int depth = 0) {
  const int64_t out_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
  Dev<float> dy(size_t(s.n * out_rows));
  GemvScope scope(kind, kind == kernels::GemvKind::kBulk || kind == kernels::GemvKind::kPersist ? s.cap : 0, depth);
  check_cuda(kernels::linear(args(s, w, dx.get(), dy.get()), nullptr), "gemv");
  return dy.host();
}

// Bulk kernel vs the CPU oracle.
OpCase oracle_case(const Shape& s) {
  return {shape_name("gemv_bulk", s), "linear", [=](Rng& rng) {
            const auto w = random_weight(rng, s.kind, s.rows, s.cols, 0.05f);
            const auto x = randn(rng, size_t(s.n * x_width(s)));
            const Dev<float> dx(x);
            return Outputs{{{"y", oracle(s, *w, x), run_kind(s, kernels::GemvKind::kBulk, *w, dx)}}, {}};
          }};
}

// Bulk kernel vs the former kernel, bitwise ("cpu" holds the former kernel's output).
OpCase ab_case(const Shape& s) {
  return {shape_name("gemv_ab", s), "former", [=](Rng& rng) {
            const auto w = random_weight(rng, s.kind, s.rows, s.cols, 0.05f);
            const Dev<float> dx(randn(rng, size_t(s.n * x_width(s))));
            return Outputs{{{"y", run_kind(s, kernels::GemvKind::kStream, *w, dx),
                             run_kind(s, kernels::GemvKind::kBulk, *w, dx)}},
                           {}};
          }};
}

// Persistent kernel (ring depth 2: registers; 4, 6: cp.async into shared memory) vs the
// former kernel, bitwise; n <= 4 (at 5 .. 8 tokens kPersist runs what kAuto0 runs).
OpCase persist_case(const Shape& s, int depth) {
  return {shape_name(("gemv_persist_d" + std::to_string(depth)).c_str(), s), "former", [=](Rng& rng) {
            const auto w = random_weight(rng, s.kind, s.rows, s.cols, 0.05f);
            const Dev<float> dx(randn(rng, size_t(s.n * x_width(s))));
            return Outputs{{{"y", run_kind(s, kernels::GemvKind::kStream, *w, dx),
                             run_kind(s, kernels::GemvKind::kPersist, *w, dx, depth)}},
                           {}};
          }};
}

// Persistent kernel vs the CPU oracle.
OpCase persist_oracle_case(const Shape& s, int depth) {
  return {shape_name(("gemv_persist_oracle_d" + std::to_string(depth)).c_str(), s), "linear", [=](Rng& rng) {
            const auto w = random_weight(rng, s.kind, s.rows, s.cols, 0.05f);
            const auto x = randn(rng, size_t(s.n * x_width(s)));
            const Dev<float> dx(x);
            return Outputs{{{"y", oracle(s, *w, x), run_kind(s, kernels::GemvKind::kPersist, *w, dx, depth)}}, {}};
          }};
}

// Several weights in one launch (linear_gemv_multi) against each one's own former-kernel
// launch, bitwise. shapes: the same format, n and bf16_x; each its own x and y. kind:
// the kernel of the multi launch (kBulk, or kPersist at ring depth `depth`).
// sm_cap > 0: the launch under gemv_set_bulk_blocks_per_sm(sm_cap) (a concurrent branch's
// cap: fewer resident blocks, each looping over more tiles through its ring).
OpCase multi_case(std::string name, std::vector<Shape> shapes,
                  kernels::GemvKind kind = kernels::GemvKind::kBulk, int depth = 0, int sm_cap = 0) {
  return {name, "former", [=](Rng& rng) {
            std::vector<std::unique_ptr<TestWeight>> ws;
            std::vector<std::unique_ptr<Dev<float>>> xs, ys;
            std::vector<kernels::LinearArgs> calls;
            Outputs out;
            for (const Shape& s : shapes) {
              ws.push_back(random_weight(rng, s.kind, s.rows, s.cols, 0.05f));
              xs.push_back(std::make_unique<Dev<float>>(randn(rng, size_t(s.n * x_width(s)))));
              const int64_t out_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
              ys.push_back(std::make_unique<Dev<float>>(size_t(s.n * out_rows)));
              calls.push_back(args(s, *ws.back(), xs.back()->get(), ys.back()->get()));
            }
            {
              GemvScope scope(kind, shapes[0].cap, depth);
              kernels::gemv_set_bulk_blocks_per_sm(sm_cap);
              const cudaError_t e = kernels::linear_gemv_multi(calls.data(), int(calls.size()), nullptr);
              kernels::gemv_set_bulk_blocks_per_sm(0);
              check_cuda(e, "gemv_multi");
            }
            for (size_t k = 0; k < shapes.size(); ++k)
              out.floats.push_back({"y" + std::to_string(k),
                                    run_kind(shapes[k], kernels::GemvKind::kStream, *ws[k], *xs[k]), ys[k]->host()});
            return out;
          }};
}

// The tensor-core kernel (GemvKind::kTensor, smxx_linear_gemv_tc.cu): FP8 e4m3 under
// bf16 x on mma.sync. Not bitwise the SIMT kernels (other fp32 sum order): against the
// CPU oracle (family "linear"). Each case first checks that kTensor really takes the call
// (linear_gemv_tc_eligible), so a silent fallback to the SIMT kernel cannot pass for it.
// scales: 0 the drawn e8m0 scales; 1 none (raw e4m3 values); 2 one row block's scale
// codes above 142 (the kernel's two-factor path) and one at 0 (2^-127).
std::vector<float> run_tc(const Shape& s, const TestWeight& w, const Dev<float>& dx) {
  const int64_t out_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
  Dev<float> dy(size_t(s.n * out_rows));
  const kernels::LinearArgs a = args(s, w, dx.get(), dy.get());
  if (!kernels::linear_gemv_tc_eligible(a)) throw std::runtime_error("kTensor does not take " + shape_name("tc", s));
  GemvScope scope(kernels::GemvKind::kTensor, 0);
  check_cuda(kernels::linear(a, nullptr), "gemv tc");
  return dy.host();
}

// Weights of >= 16 M elements with drawn scales are drawn once per (kind, shape) from their own seed
// and shared by every case that asks (read only): drawing 42 MB of FP8 costs ~6 s on the host, which
// made the tensor-map cases on the full V4.1-Flash shapes most of the GPU op suite's time.
std::shared_ptr<TestWeight> tc_weight(Rng& rng, const Shape& s, int scales) {
  if (scales == 0 && s.rows * s.cols >= (int64_t(16) << 20)) {
    static std::map<std::tuple<int, int64_t, int64_t>, std::shared_ptr<TestWeight>> cache;
    auto& w = cache[{int(s.kind), s.rows, s.cols}];
    if (!w) {
      Rng own(uint64_t(s.rows) * 1000003u + uint64_t(s.cols) * 31u + uint64_t(s.kind));
      w = random_weight(own, s.kind, s.rows, s.cols, 0.05f);
    }
    return w;
  }
  std::shared_ptr<TestWeight> w = random_weight(rng, s.kind, s.rows, s.cols, 0.05f);
  if (scales == 1) {
    w->scale.clear();
    w->d_scale.reset();
  } else if (scales == 2) {
    const int64_t rb = std::min<int64_t>(1, (s.rows - 1) / w->block_rows);  // row block 1 (or 0)
    for (int64_t c = 0; c < w->scale_cols; ++c) w->scale[size_t(rb * w->scale_cols + c)] = uint8_t(143 + c % 8);
    w->scale[0] = 0;
    w->d_scale = std::make_unique<Dev<uint8_t>>(w->scale);
  } else if (scales == 3) {
    // 16 x 16 scale blocks (the tensor-map kernel's one-code-per-MMA path): new codes around
    // the drawn ones' level, on the same e4m3 data (any power-of-two scale is a valid weight).
    const uint8_t level = w->scale[0];
    w->block_rows = w->block_cols = 16;
    w->scale_cols = (s.cols + 15) / 16;
    w->scale.resize(size_t((s.rows + 15) / 16 * w->scale_cols));
    for (auto& c : w->scale) c = uint8_t(std::clamp<int64_t>(int64_t(level) + randint(rng, -3, 3), 1, 254));
    w->d_scale = std::make_unique<Dev<uint8_t>>(w->scale);
  }
  return w;
}

OpCase tc_oracle_case(const Shape& s, int scales = 0) {
  const char* what = scales == 1 ? "gemv_tc_noscale" : scales == 2 ? "gemv_tc_bigscale" : "gemv_tc";
  return {shape_name(what, s), "linear", [=](Rng& rng) {
            const auto w = tc_weight(rng, s, scales);
            const auto x = randn(rng, size_t(s.n * x_width(s)));
            const Dev<float> dx(x);
            return Outputs{{{"y", oracle(s, *w, x), run_tc(s, *w, dx)}}, {}};
          }};
}

// Batch invariance: n tokens in one launch against each token alone (n = 1), bitwise
// ("cpu" holds the single-token outputs). x_stride keeps the tokens' rows in place.
OpCase tc_invariance_case(const Shape& s) {
  return {shape_name("gemv_tc_invariant", s), "former", [=](Rng& rng) {
            const auto w = tc_weight(rng, s, 0);
            const int64_t width = x_width(s), out_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
            const auto x = randn(rng, size_t(s.n * width));
            const Dev<float> dx(x);
            const auto all = run_tc(s, *w, dx);
            std::vector<float> alone(all.size());
            for (int64_t t = 0; t < s.n; ++t) {
              Shape one = s;
              one.n = 1;
              const Dev<float> dx1(std::vector<float>(x.begin() + t * width, x.begin() + (t + 1) * width));
              const auto y1 = run_tc(one, *w, dx1);
              std::copy(y1.begin(), y1.end(), alone.begin() + t * out_rows);
            }
            return Outputs{{{"y", alone, all}}, {}};
          }};
}

// kTensor on calls its kernel does not take (f32 x, fp32 scales): kAuto0's SIMT kernel,
// bitwise the former kernel ("cpu").
OpCase tc_fallback_case(const Shape& s) {
  return {shape_name("gemv_tc_fallback", s), "former", [=](Rng& rng) {
            const auto w = random_weight(rng, s.kind, s.rows, s.cols, 0.05f);
            const Dev<float> dx(randn(rng, size_t(s.n * x_width(s))));
            Dev<float> dy(size_t(s.n * s.rows));
            if (kernels::linear_gemv_tc_eligible(args(s, *w, dx.get(), dy.get())))
              throw std::runtime_error("expected kTensor to fall back on " + shape_name("tc", s));
            return Outputs{{{"y", run_kind(s, kernels::GemvKind::kStream, *w, dx),
                             run_kind(s, kernels::GemvKind::kTensor, *w, dx)}},
                           {}};
          }};
}

// The x-in-shared-memory kernel (GemvKind::kXs, or kAuto where it takes the call) vs the
// former kernel, bitwise ("cpu" holds the former kernel's output). xscale multiplies x
// (1000: elements over 2^8); big_group >= 0 scales only that group of a grouped x. At n = 1 the
// case first checks that the kernel really takes the call (linear_gemv_xs_eligible), so a
// silent fallback cannot pass for it; at n > 1 it checks the fallback (kAuto0's kernels).
OpCase xs_case(const Shape& s, kernels::GemvKind kind, float xscale = 1.0f, int big_group = -1) {
  std::string what = kind == kernels::GemvKind::kAuto ? "gemv_xsauto" : "gemv_xs";
  if (xscale != 1.0f) what += big_group >= 0 ? "_biggroup" : "_bigx";
  return {shape_name(what.c_str(), s), "former", [=](Rng& rng) {
            const auto w = random_weight(rng, s.kind, s.rows, s.cols, 0.05f);
            auto x = randn(rng, size_t(s.n * x_width(s)));
            for (int64_t t = 0; t < s.n; ++t)
              for (int64_t c = 0; c < x_width(s); ++c)
                if (big_group < 0 || c / s.cols == big_group) x[size_t(t * x_width(s) + c)] *= xscale;
            const Dev<float> dx(x);
            const int64_t out_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
            Dev<float> dy(size_t(s.n * out_rows));
            if (kernels::linear_gemv_xs_eligible(args(s, *w, dx.get(), dy.get())) != (s.n == 1))
              throw std::runtime_error("xs eligibility not as expected for " + shape_name("xs", s));
            return Outputs{{{"y", run_kind(s, kernels::GemvKind::kStream, *w, dx), run_kind(s, kind, *w, dx)}}, {}};
          }};
}

// The tensor-map TMA kernel (GemvKind::kTmap, smxx_linear_gemv_tmap.cu): FP8 e4m3 at one
// token under bf16 x, mma.sync on exactly decoded weights, the K split over clusters. Not
// bitwise the SIMT kernels: against the CPU oracle (family "linear"). Each case first checks
// that kTmap really takes the call (linear_gemv_tmap_eligible) and prints its plan, so a silent
// fallback cannot pass for it. scales as tc_weight (0 drawn, 1 none, 2 codes above 142).
// Consumer variants (smxx_linear_tmap.h): warps 8 / 16, f16 the f16 decode.
struct TmapConsumer {
  int warps = 8;
  bool f16 = false;
  bool slim = false;  // the slim consumer (NOTES 41): 16 warps, f16, no per-stage overhead
  int force_tr = 0, force_cs = 0;  // a forced split (gemv_set_tmap_force), 0: the plan's
  int order = 0;                   // the slim kernel's start order (gemv_set_tmap_order)
};

std::vector<float> run_tmap(const Shape& s, const TestWeight& w, const Dev<float>& dx, int stages = 0,
                            TmapConsumer cons = {}) {
  const int64_t out_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
  Dev<float> dy(size_t(s.n * out_rows));
  const kernels::LinearArgs a = args(s, w, dx.get(), dy.get());
  GemvScope scope(kernels::GemvKind::kTmap, 0);
  kernels::gemv_set_tmap(stages, false);
  kernels::gemv_set_tmap_consumer(cons.warps, cons.f16);
  kernels::gemv_set_tmap_slim(cons.slim);
  kernels::gemv_set_tmap_force(cons.force_tr, cons.force_cs);
  kernels::gemv_set_tmap_order(cons.order);
  if (!kernels::linear_gemv_tmap_eligible(a)) {
    kernels::gemv_set_tmap(0, false);
    kernels::gemv_set_tmap_consumer(8, false);
    kernels::gemv_set_tmap_slim(false);
    kernels::gemv_set_tmap_force(0, 0);
    kernels::gemv_set_tmap_order(0);
    throw std::runtime_error("kTmap does not take " + shape_name("tmap", s));
  }
  int tr = 0, cs = 0, nc = 0, st = 0;
  kernels::gemv_tmap_plan(a, &tr, &cs, &nc, &st);
  std::printf("  tmap plan %s: tr=%d cs=%d clusters=%d stages=%d\n", shape_name("tmap", s).c_str(), tr, cs, nc, st);
  const bool forced_ok = cons.force_tr == 0 || (tr == cons.force_tr && (cons.force_cs == 0 || cs == cons.force_cs));
  const cudaError_t e = forced_ok ? kernels::linear(a, nullptr) : cudaSuccess;
  kernels::gemv_set_tmap(0, false);
  kernels::gemv_set_tmap_consumer(8, false);
  kernels::gemv_set_tmap_slim(false);
  kernels::gemv_set_tmap_force(0, 0);
  kernels::gemv_set_tmap_order(0);
  if (!forced_ok) throw std::runtime_error("the forced split did not take " + shape_name("tmap", s));
  check_cuda(e, "gemv tmap");
  check_cuda(cudaDeviceSynchronize(), "gemv tmap sync");
  return dy.host();
}

// wide_x: each x element times 2^k, k uniform in -40 .. 12 (the f16 consumer's shift and its
// rounding of the smallest elements; the bf16 consumer takes them exactly).
OpCase tmap_oracle_case(const Shape& s, int scales = 0, int stages = 0, TmapConsumer cons = {}, bool wide_x = false) {
  std::string what = scales == 1 ? "gemv_tmap_noscale" : scales == 2 ? "gemv_tmap_bigscale"
                     : scales == 3 ? "gemv_tmap_block16" : "gemv_tmap";
  if (stages > 0) what += "_s" + std::to_string(stages);
  if (cons.warps == 16) what += "_w16";
  if (cons.f16) what += "_f16";
  if (cons.slim) what += "_slim";
  if (cons.force_tr > 0) what += "_t" + std::to_string(cons.force_tr) + "c" + std::to_string(cons.force_cs);
  if (wide_x) what += "_widex";
  return {shape_name(what.c_str(), s), "linear", [=](Rng& rng) {
            const auto w = tc_weight(rng, s, scales);
            auto x = randn(rng, size_t(s.n * x_width(s)));
            if (wide_x)
              for (auto& v : x) v = std::ldexp(v, int(randint(rng, -40, 12)));
            const Dev<float> dx(x);
            return Outputs{{{"y", oracle(s, *w, x), run_tmap(s, *w, dx, stages, cons)}}, {}};
          }};
}

// The slim consumer against the 16-warp f16 one on the same inputs, bitwise (family "former"): the
// same products and sums, its factors without x's shift 2^-sh, which it applies once per row
// instead -- exact where no partial sum leaves fp32's normal range (these inputs: normal ranges).
OpCase tmap_slim_bitwise_case(const Shape& s, int stages = 0) {
  std::string what = "gemv_tmap_slim_eq";
  if (stages > 0) what += "_s" + std::to_string(stages);
  return {shape_name(what.c_str(), s), "former", [=](Rng& rng) {
            const auto w = tc_weight(rng, s, 0);
            const Dev<float> dx(randn(rng, size_t(s.n * x_width(s))));
            return Outputs{{{"y", run_tmap(s, *w, dx, stages, TmapConsumer{16, true, false}),
                             run_tmap(s, *w, dx, stages, TmapConsumer{16, true, true})}},
                           {}};
          }};
}

// The slim kernel's start orders (NOTES 44: its producer gated until the consumers issued their first
// loads) against order 0, bitwise (family "former"): the order moves only when copies are issued.
// scales as tc_weight (0 drawn, 1 none).
OpCase tmap_order_bitwise_case(const Shape& s, int order, int force_tr = 0, int force_cs = 0, int scales = 0) {
  std::string what = "gemv_tmap_slim_order" + std::to_string(order);
  if (force_tr > 0) what += "_t" + std::to_string(force_tr) + "c" + std::to_string(force_cs);
  if (scales == 1) what += "_noscale";
  return {shape_name(what.c_str(), s), "former", [=](Rng& rng) {
            const auto w = tc_weight(rng, s, scales);
            const Dev<float> dx(randn(rng, size_t(s.n * x_width(s))));
            return Outputs{{{"y", run_tmap(s, *w, dx, 4, TmapConsumer{16, true, true, force_tr, force_cs, 0}),
                             run_tmap(s, *w, dx, 4, TmapConsumer{16, true, true, force_tr, force_cs, order})}},
                           {}};
          }};
}

// kAuto at one token on the big FP8 weights (>= kGemvTmapAutoMinBytes): the tensor-map kernel's slim
// consumer on 4 stages, whole-K 64-row tiles where they fill one round of half the SMs or more (wo_b,
// the grouped wo_a), the plan's own split elsewhere (wq_b). Each case first checks that kAuto takes
// the call (gemv_tmap_auto_takes), so a silent fallback to kXs cannot pass; then against the CPU
// oracle (family "linear"), or bitwise against kTmap forced to that configuration ("former").
OpCase tmap_auto_case(const Shape& s, bool bitwise) {
  return {shape_name(bitwise ? "gemv_auto_tmap_eq" : "gemv_auto_tmap", s), bitwise ? "former" : "linear",
          [=](Rng& rng) {
            const auto w = tc_weight(rng, s, 0);
            const auto x = randn(rng, size_t(s.n * x_width(s)));
            const Dev<float> dx(x);
            {
              const int64_t out_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
              Dev<float> dy(size_t(s.n * out_rows));
              if (!kernels::gemv_tmap_auto_takes(args(s, *w, dx.get(), dy.get())))
                throw std::runtime_error("kAuto does not take the tensor-map kernel on " + shape_name("auto", s));
            }
            const auto autok = run_kind(s, kernels::GemvKind::kAuto, *w, dx);
            if (!bitwise) return Outputs{{{"y", oracle(s, *w, x), autok}}, {}};
            int dev = 0, sms = 0;
            check_cuda(cudaGetDevice(&dev), "device");
            check_cuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "SM count");
            // kAuto's split (auto_config): whole-K 64-row tiles where they fill half of the SMs or
            // more, and either fit one round or the plan would split K over clusters.
            int plan_cs = 0;
            {
              const int64_t out_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
              Dev<float> dy(size_t(s.n * out_rows));
              GemvScope scope(kernels::GemvKind::kTmap, 0);
              kernels::gemv_set_tmap(4, false);
              kernels::gemv_set_tmap_slim(true);
              kernels::gemv_tmap_plan(args(s, *w, dx.get(), dy.get()), nullptr, &plan_cs, nullptr, nullptr);
              kernels::gemv_set_tmap(0, false);
              kernels::gemv_set_tmap_slim(false);
            }
            const int64_t tiles64 = (s.rows + 63) / 64;
            const bool whole_k = 2 * tiles64 >= sms && (tiles64 <= sms || plan_cs > 1);
            const TmapConsumer cons{16, true, true, whole_k ? 64 : 0, whole_k ? 1 : 0};
            return Outputs{{{"y", run_tmap(s, *w, dx, 4, cons), autok}}, {}};
          }};
}

// kAuto's pairs (NOTES 47): two weights of one x (n = 1, bf16 x) in one launch of the slim tensor-map
// kernel (gemv_tmap_pair_kernel), under the pair rule's mode 1 and a pair configuration (stages, a
// forced split tr / cs, 0: kAuto's pair split -- whole-K 64-row tiles where both weights' tiles fill
// one round of half the SMs or more, else the plan's). Each case first checks that the rule takes the pair
// (gemv_tmap_pair_takes), so a silent fallback to the bulk kernel cannot pass. bitwise: each weight's y
// against a single slim launch of that weight (kTmap forced to the pair's split, kAuto's start order
// 3), family "former"; else against the CPU oracle ("linear"), the pair run through ops::cuda::
// linear_multi (the model's route). scales as tc_weight (0 drawn, 1 none).
struct PairScope {
  PairScope(int mode, int stages, int tr, int cs) {
    kernels::gemv_set_tmap_pair(mode);
    kernels::gemv_set_tmap_pair_config(stages, tr, cs);
  }
  ~PairScope() {
    kernels::gemv_set_tmap_pair(-1);
    kernels::gemv_set_tmap_pair_config(0, 0, 0);
  }
};
OpCase tmap_pair_case(const char* tag, const Shape& sa, const Shape& sb, bool bitwise, int stages = 0, int tr = 0,
                      int cs = 0, int scales = 0) {
  std::string name = std::string(bitwise ? "gemv_pair_eq_" : "gemv_pair_") + tag;
  if (stages > 0) name += "_s" + std::to_string(stages);
  if (tr > 0) name += "_t" + std::to_string(tr) + "c" + std::to_string(cs);
  if (scales == 1) name += "_noscale";
  return {name, bitwise ? "former" : "linear", [=](Rng& rng) {
            const auto wa = tc_weight(rng, sa, scales);
            const auto wb = tc_weight(rng, sb, scales);
            const auto x = randn(rng, size_t(sa.cols));
            const Dev<float> dx(x);
            const int64_t ra = sa.num_rows < 0 ? sa.rows - sa.row0 : sa.num_rows;
            const int64_t rb = sb.num_rows < 0 ? sb.rows - sb.row0 : sb.num_rows;
            Dev<float> ya(static_cast<size_t>(ra)), yb(static_cast<size_t>(rb));
            const kernels::LinearArgs calls[2] = {args(sa, *wa, dx.get(), ya.get()), args(sb, *wb, dx.get(), yb.get())};
            int ptr = 0, pcs = 0, pnc = 0, pst = 0;
            {
              GemvScope scope(kernels::GemvKind::kAuto, 0);
              PairScope pair(1, stages, tr, cs);
              if (!kernels::gemv_tmap_pair_takes(calls, 2)) throw std::runtime_error("the pair rule does not take " + name);
              kernels::gemv_tmap_pair_plan(calls, &ptr, &pcs, &pnc, &pst);
              std::printf("  pair plan %s: tr=%d cs=%d clusters=%d stages=%d\n", name.c_str(), ptr, pcs, pnc, pst);
              if (tr > 0 && (ptr != tr || pcs != cs)) throw std::runtime_error("the forced split did not take " + name);
              if (bitwise) {
                check_cuda(kernels::linear_gemv_multi(calls, 2, nullptr), "gemv pair");
              } else {
                const ops::LinearParams ps[2] = {
                    {dx.get(), ya.get(), 1, wa->ref(true), sa.row0, sa.num_rows, ops::Activations::kBF16},
                    {dx.get(), yb.get(), 1, wb->ref(true), sb.row0, sb.num_rows, ops::Activations::kBF16}};
                ops::cuda::linear_multi(ps, 2, ops::cuda::LinearMode::kAuto, nullptr, ops::cuda::LinearWorkspace{});
              }
              check_cuda(cudaDeviceSynchronize(), "gemv pair sync");
            }
            if (!bitwise)
              return Outputs{{{"y0", oracle(sa, *wa, x), ya.host()}, {"y1", oracle(sb, *wb, x), yb.host()}}, {}};
            const TmapConsumer single{16, true, true, ptr, pcs, 3};
            return Outputs{{{"y0", run_tmap(sa, *wa, dx, 4, single), ya.host()},
                            {"y1", run_tmap(sb, *wb, dx, 4, single), yb.host()}},
                           {}};
          }};
}

// kTmap on calls its kernel does not take (f32 x, n = 2, fp32 scales, a slice off 16 rows):
// what kAuto runs, bitwise ("cpu" holds kAuto's output).
OpCase tmap_fallback_case(const Shape& s) {
  return {shape_name("gemv_tmap_fallback", s), "former", [=](Rng& rng) {
            const auto w = random_weight(rng, s.kind, s.rows, s.cols, 0.05f);
            const Dev<float> dx(randn(rng, size_t(s.n * x_width(s))));
            const int64_t out_rows = s.num_rows < 0 ? s.rows - s.row0 : s.num_rows;
            Dev<float> dy(size_t(s.n * out_rows));
            if (kernels::linear_gemv_tmap_eligible(args(s, *w, dx.get(), dy.get())))
              throw std::runtime_error("expected kTmap to fall back on " + shape_name("tmap", s));
            return Outputs{{{"y", run_kind(s, kernels::GemvKind::kAuto, *w, dx), run_kind(s, kernels::GemvKind::kTmap, *w, dx)}},
                           {}};
          }};
}

}  // namespace

std::vector<OpCase> linear_gemv_cases() {
  using K = WKind;
  std::vector<OpCase> c;
  // Sizes: the CPU weight generation dominates (~0.07 us per element and seed), so the
  // shapes keep V4.1's column counts (hence its K splits) with fewer rows; ~10 s in all.
  std::vector<Shape> both = {
      // wq_a / wkv columns (ks = 8, tiles of 4 rows) at each NT instantiation and partial widths.
      {K::kFp8E8m0, 1, 640, 5120}, {K::kFp8E8m0, 3, 640, 5120}, {K::kFp8E8m0, 8, 256, 5120},
      {K::kFp8E8m0, 2, 256, 5120, 0, -1, true},
      // Row tails (200 = 6 x 32 + 8 rows; tiles of 4 .. 32 rows), slices, other formats.
      {K::kFp8E8m0, 5, 200, 1280}, {K::kFp8E8m0, 4, 256, 1280, 40, 150}, {K::kFp8F32Scale, 3, 200, 1280},
      // Fewer rows than a tile, not a multiple of 4 (a warp's rows past the end).
      {K::kFp8E8m0, 3, 6, 1024}, {K::kBF16, 1, 10, 512, 0, -1, false, 2},
      {K::kFp4E8m0, 1, 576, 5120}, {K::kFp4E8m0, 6, 200, 2304, 0, -1, true}, {K::kBF16, 1, 520, 4096},
      {K::kBF16, 8, 200, 1280, 0, -1, true}, {K::kF16, 2, 200, 1024}, {K::kF32, 4, 136, 1024},
      // Rings that wrap: a grid of 3 .. 7 blocks over 40 .. 95 tiles.
      {K::kFp8E8m0, 1, 320, 5120, 0, -1, false, 7}, {K::kFp8E8m0, 7, 600, 1280, 0, -1, false, 3},
      {K::kFp4E8m0, 2, 400, 2304, 0, -1, true, 5}, {K::kBF16, 4, 760, 2048, 0, -1, false, 7},
      // Grouped x (the model's wo_a launch: 8 groups of rows, each its own slice of x).
      {K::kFp8E8m0, 1, 1024, 1024, 0, -1, false, 0, 8}, {K::kFp8E8m0, 5, 512, 1024, 0, -1, true, 6, 8},
  };
  for (const Shape& s : both) {
    c.push_back(oracle_case(s));
    c.push_back(ab_case(s));
  }
  // A ring without a cap: 400 tiles of 64 KB (fp32, 4 rows of 4096 columns), more than
  // one wave of resident blocks (A/B only).
  c.push_back(ab_case({K::kF32, 1, 1600, 4096}));
  // Several weights per launch: wq_a + wkv shapes (the same x width), two shared-expert
  // halves and a slice, and a mix of widths and K splits with a wrapping ring.
  c.push_back(multi_case("gemv_multi_wq_a_wkv_n1", {{K::kFp8E8m0, 1, 640, 5120}, {K::kFp8E8m0, 1, 256, 5120}}));
  c.push_back(multi_case("gemv_multi_three_n4_bf16x", {{K::kFp4E8m0, 4, 600, 2304, 0, -1, true},
                                                      {K::kFp4E8m0, 4, 600, 2304, 0, -1, true},
                                                      {K::kFp4E8m0, 4, 256, 2304, 40, 150, true}}));
  c.push_back(multi_case("gemv_multi_mixed_n2_cap", {{K::kFp8E8m0, 2, 300, 5120, 0, -1, false, 5},
                                                     {K::kFp8E8m0, 2, 1000, 1280, 0, -1, false, 5},
                                                     {K::kFp8E8m0, 2, 6, 2048, 0, -1, false, 5},
                                                     {K::kFp8E8m0, 2, 512, 1024, 0, -1, false, 5, 8}}));
  // The shared expert's w1 + w3 at V4.1's shapes (2 x 2304 x 5120 FP8: 2 bulk blocks per SM
  // fill the GPU in one wave) under a branch's per-SM cap of 1 and 2 (a ring per block,
  // NOTES 34): the same tiles, bitwise the former kernel. n = 1 and 8.
  for (int sm_cap : {1, 2})
    for (int64_t n : {1, 8})
      c.push_back(multi_case("gemv_multi_shared_w13_n" + std::to_string(n) + "_smcap" + std::to_string(sm_cap),
                             {{K::kFp8E8m0, n, 2304, 5120, 0, -1, true}, {K::kFp8E8m0, n, 2304, 5120, 0, -1, true}},
                             kernels::GemvKind::kBulk, 0, sm_cap));
  // The persistent kernel: every shape above of 1 .. 4 tokens at the default ring (depth 4;
  // the capped grids give a block 10 .. 40 tiles, so its ring runs across many tile
  // boundaries), the ks = 1 path (rows with no K split: no shared-memory sum, the warp
  // stores) on 8192 x 1280 with a capped grid, an fp32 weight of 80 KB tiles (over the
  // bulk stage); the other rings (2: registers, 6: six shared-memory slots) on a few shapes
  // that still take every path (ks = 1 and > 1, caps, groups, FP4 per-row scales), so the
  // cases stay at ~15 s of test time.
  std::vector<Shape> persist = both;
  persist.push_back({K::kFp8E8m0, 1, 8192, 1280, 0, -1, false, 13});
  persist.push_back({K::kFp8E8m0, 4, 8192, 1280, 0, -1, true, 0});
  persist.push_back({K::kF32, 3, 64, 5120});
  for (const Shape& s : persist)
    if (s.n <= 4) c.push_back(persist_case(s, 4));
  const std::vector<Shape> other_rings = {
      {K::kFp8E8m0, 1, 320, 5120, 0, -1, false, 7}, {K::kBF16, 1, 10, 512, 0, -1, false, 2},
      {K::kFp8E8m0, 1, 1024, 1024, 0, -1, false, 0, 8}, {K::kFp4E8m0, 2, 400, 2304, 0, -1, true, 5},
      {K::kFp8E8m0, 3, 640, 5120}, {K::kFp8E8m0, 4, 256, 1280, 40, 150}};
  for (const Shape& s : other_rings)
    for (int depth : {2, 6})
      if (depth < 6 || s.n == 1) c.push_back(persist_case(s, depth));
  c.push_back(persist_oracle_case({K::kFp8E8m0, 1, 640, 5120}, 4));
  c.push_back(persist_oracle_case({K::kFp8E8m0, 2, 512, 1024, 0, -1, true, 6, 8}, 2));
  c.push_back(persist_oracle_case({K::kFp4E8m0, 1, 576, 5120, 0, -1, true}, 6));
  c.push_back(multi_case("gemv_persist_multi_wq_a_wkv_n1_d4", {{K::kFp8E8m0, 1, 640, 5120}, {K::kFp8E8m0, 1, 256, 5120}},
                         kernels::GemvKind::kPersist, 4));
  c.push_back(multi_case("gemv_persist_multi_mixed_n1_cap_d4",
                         {{K::kFp8E8m0, 1, 300, 5120, 0, -1, false, 5},
                          {K::kFp8E8m0, 1, 1000, 1280, 0, -1, false, 5},
                          {K::kFp8E8m0, 1, 6, 2048, 0, -1, false, 5},
                          {K::kFp8E8m0, 1, 512, 1024, 0, -1, false, 5, 8}},
                         kernels::GemvKind::kPersist, 4));
  c.push_back(multi_case("gemv_persist_multi_three_n4_bf16x_d4",
                         {{K::kFp4E8m0, 4, 600, 2304, 0, -1, true},
                          {K::kFp4E8m0, 4, 600, 2304, 0, -1, true},
                          {K::kFp4E8m0, 4, 256, 2304, 40, 150, true}},
                         kernels::GemvKind::kPersist, 4));
  for (int depth : {2, 4})
    c.push_back(multi_case("gemv_persist_multi_mixed_n2_cap_d" + std::to_string(depth),
                           {{K::kFp8E8m0, 2, 300, 5120, 0, -1, false, 5},
                            {K::kFp8E8m0, 2, 1000, 1280, 0, -1, false, 5},
                            {K::kFp8E8m0, 2, 6, 2048, 0, -1, false, 5, 0}},
                           kernels::GemvKind::kPersist, depth));
  c.push_back(multi_case("gemv_persist_multi_wq_a_wkv_n1_d6", {{K::kFp8E8m0, 1, 640, 5120}, {K::kFp8E8m0, 1, 256, 5120}},
                         kernels::GemvKind::kPersist, 6));
  // The tensor-core kernel (kTensor): n = 1, 3, 8 on V4.1's column counts (wq_a 5120,
  // wq_b 1280, wo_b 8192; K splits 8 .. 2) at fewer rows, row tails (200 = 12 x 16 + 8;
  // 6 rows), a slice, a last chunk of 32 columns (1056), grouped x (wo_a), no scales,
  // scale codes on the two-factor path; batch invariance at n = 8 and 5 (grouped); the
  // fallback for calls it does not take.
  using K2 = WKind;
  for (const Shape& s : std::vector<Shape>{
           {K2::kFp8E8m0, 1, 640, 5120, 0, -1, true}, {K2::kFp8E8m0, 3, 640, 5120, 0, -1, true},
           {K2::kFp8E8m0, 8, 256, 5120, 0, -1, true}, {K2::kFp8E8m0, 1, 1024, 1280, 0, -1, true},
           {K2::kFp8E8m0, 8, 512, 1280, 0, -1, true}, {K2::kFp8E8m0, 1, 160, 8192, 0, -1, true},
           {K2::kFp8E8m0, 4, 96, 8192, 0, -1, true},  {K2::kFp8E8m0, 5, 200, 1280, 0, -1, true},
           {K2::kFp8E8m0, 3, 6, 1024, 0, -1, true},   {K2::kFp8E8m0, 4, 256, 1280, 40, 150, true},
           {K2::kFp8E8m0, 2, 64, 1056, 0, -1, true},  {K2::kFp8E8m0, 1, 1024, 1024, 0, -1, true, 0, 8},
           {K2::kFp8E8m0, 6, 512, 1024, 0, -1, true, 0, 8}})
    c.push_back(tc_oracle_case(s));
  c.push_back(tc_oracle_case({K2::kFp8E8m0, 3, 200, 1280, 0, -1, true}, 1));
  c.push_back(tc_oracle_case({K2::kFp8E8m0, 2, 96, 2048, 0, -1, true}, 2));
  c.push_back(tc_invariance_case({K2::kFp8E8m0, 8, 512, 1280, 0, -1, true}));
  c.push_back(tc_invariance_case({K2::kFp8E8m0, 8, 160, 8192, 0, -1, true}));
  c.push_back(tc_invariance_case({K2::kFp8E8m0, 5, 512, 1024, 0, -1, true, 0, 8}));
  // The x-in-shared-memory kernel (kXs) vs the former kernel, bitwise: V4.1's column
  // counts at fewer rows (wq_b 1280: ks = 1, 2.5 steps per lane; wo_b 8192: ks = 4; wq_a
  // 5120: ks = 8; shared w2 2304 and 1056: ragged K, lanes with one step less), row tails
  // (200, 6 rows), a slice, grouped x (wo_a), e4m3 with fp32 scales, both activation
  // modes; x over 2^8 in every block or in one group only; n = 2 .. 4 (the fallback to
  // kAuto0's kernels).
  {
    const kernels::GemvKind kind = kernels::GemvKind::kXs;
    for (const bool bx : {false, true})
      for (const Shape& s : std::vector<Shape>{
               {K2::kFp8E8m0, 1, 1024, 1280, 0, -1, bx},      {K2::kFp8E8m0, 1, 640, 8192, 0, -1, bx},
               {K2::kFp8E8m0, 1, 640, 5120, 0, -1, bx},       {K2::kFp8E8m0, 1, 512, 2304, 0, -1, bx},
               {K2::kFp8E8m0, 1, 200, 1056, 0, -1, bx},       {K2::kFp8E8m0, 1, 6, 1024, 0, -1, bx},
               {K2::kFp8E8m0, 1, 256, 1280, 40, 150, bx},     {K2::kFp8E8m0, 1, 1024, 1024, 0, -1, bx, 0, 8},
               {K2::kFp8F32Scale, 1, 200, 1280, 0, -1, bx}})
        c.push_back(xs_case(s, kind));
    c.push_back(xs_case({K2::kFp8E8m0, 1, 512, 1280, 0, -1, true}, kind, 1000.0f));
    c.push_back(xs_case({K2::kFp8E8m0, 1, 1024, 1024, 0, -1, false, 0, 8}, kind, 1000.0f, 3));
    for (const int64_t n : {2, 3, 4}) c.push_back(xs_case({K2::kFp8E8m0, n, 256, 1280, 0, -1, n == 3}, kind));
  }
  // kAuto at one token (gemv_xs_kernel on <= 4096 columns at ks <= 4, the former kernel
  // elsewhere): wq_b, grouped wo_a, shared w2 and wo_b / wq_a column counts, bitwise.
  for (const Shape& s : std::vector<Shape>{{K2::kFp8E8m0, 1, 1024, 1280, 0, -1, true},
                                           {K2::kFp8E8m0, 1, 1024, 4096, 0, -1, true, 0, 8},
                                           {K2::kFp8E8m0, 1, 512, 2304, 0, -1, false},
                                           {K2::kFp8E8m0, 1, 320, 8192, 0, -1, true},
                                           {K2::kFp8E8m0, 1, 640, 5120, 0, -1, false}})
    c.push_back(xs_case(s, kernels::GemvKind::kAuto));
  c.push_back(tc_fallback_case({K2::kFp8E8m0, 3, 256, 1280}));
  c.push_back(tc_fallback_case({K2::kFp8F32Scale, 2, 200, 1280, 0, -1, true}));
  // The tensor-map kernel (kTmap), n = 1 under bf16 x: V4.1's full weights (wq_b 32768 x 1280:
  // 256-row tiles, no K split; wo_b 5120 x 8192: 64-row tiles over clusters of 8, 5 tiles per
  // cluster, so the reduction buffers cycle; wo_a grouped 8 x 1024 rows; wq_a / wkv / shared w1
  // / w2 / indexer wq_b: other splits, partial last stages), row tails (200, 6 rows), a slice,
  // ragged K (1056: a box past the last column, TMA zeros), no scales, scale codes above 142,
  // 16-column scale blocks, shallower rings; then its fallbacks.
  for (const Shape& s : std::vector<Shape>{
           {K2::kFp8E8m0, 1, 32768, 1280, 0, -1, true}, {K2::kFp8E8m0, 1, 5120, 8192, 0, -1, true},
           {K2::kFp8E8m0, 1, 8192, 4096, 0, -1, true, 0, 8}, {K2::kFp8E8m0, 1, 1280, 5120, 0, -1, true},
           {K2::kFp8E8m0, 1, 512, 5120, 0, -1, true},    {K2::kFp8E8m0, 1, 2304, 5120, 0, -1, true},
           {K2::kFp8E8m0, 1, 5120, 2304, 0, -1, true},   {K2::kFp8E8m0, 1, 4096, 1280, 0, -1, true},
           {K2::kFp8E8m0, 1, 200, 1280, 0, -1, true},    {K2::kFp8E8m0, 1, 6, 1024, 0, -1, true},
           {K2::kFp8E8m0, 1, 256, 1280, 32, 150, true},  {K2::kFp8E8m0, 1, 64, 1056, 0, -1, true},
           {K2::kFp8E8m0, 1, 200, 2080, 0, -1, true},    {K2::kFp8E8m0, 1, 1024, 1024, 0, -1, true, 0, 8}})
    c.push_back(tmap_oracle_case(s));
  c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 640, 1280, 0, -1, true}, 1));
  c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 96, 2048, 0, -1, true}, 2));
  c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 1024, 2304, 0, -1, true}, 3));
  c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 5120, 8192, 0, -1, true}, 0, 2));
  c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 2304, 5120, 0, -1, true}, 0, 4));
  // The consumer variants (16 warps; the f16 decode; both): the same split and ring, so the shapes
  // that cover each TR, the cluster reduction's cycling buffers, tails, groups and scale paths.
  for (const TmapConsumer cons : {TmapConsumer{16, false}, TmapConsumer{8, true}, TmapConsumer{16, true}}) {
    for (const Shape& s : std::vector<Shape>{
             {K2::kFp8E8m0, 1, 32768, 1280, 0, -1, true},  {K2::kFp8E8m0, 1, 5120, 8192, 0, -1, true},
             {K2::kFp8E8m0, 1, 8192, 4096, 0, -1, true, 0, 8}, {K2::kFp8E8m0, 1, 2304, 5120, 0, -1, true},
             {K2::kFp8E8m0, 1, 200, 2080, 0, -1, true},    {K2::kFp8E8m0, 1, 6, 1024, 0, -1, true},
             {K2::kFp8E8m0, 1, 256, 1280, 32, 150, true},  {K2::kFp8E8m0, 1, 1024, 1024, 0, -1, true, 0, 8}})
      c.push_back(tmap_oracle_case(s, 0, 0, cons));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 640, 1280, 0, -1, true}, 1, 0, cons));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 96, 2048, 0, -1, true}, 2, 0, cons));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 1024, 2304, 0, -1, true}, 3, 0, cons));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 1024, 1280, 0, -1, true}, 0, 0, cons, true));
  }
  // The slim consumer (NOTES 41): the oracle on the full wq_b (10 stages of one tile per CTA) and the
  // small shapes of each path (tails, a slice, groups, no scales, codes above 142, 16-column blocks --
  // the 16-warp f16 consumer's kernel there --, wide x, forced splits: whole-K 64-row tiles over 8192
  // columns, 128-row tiles over clusters of 6 with a ragged last slice, 64-row tiles over 3); bitwise
  // the 16-warp f16 consumer on the full wo_b (3 cluster rounds), the grouped wo_a (x per group), shared
  // w2 / wq_a splits and shared w1 at 3 stages.
  {
    const TmapConsumer slim{16, true, true};
    for (const Shape& s : std::vector<Shape>{
             {K2::kFp8E8m0, 1, 32768, 1280, 0, -1, true}, {K2::kFp8E8m0, 1, 200, 2080, 0, -1, true},
             {K2::kFp8E8m0, 1, 6, 1024, 0, -1, true},     {K2::kFp8E8m0, 1, 256, 1280, 32, 150, true},
             {K2::kFp8E8m0, 1, 1024, 1024, 0, -1, true, 0, 8}})
      c.push_back(tmap_oracle_case(s, 0, 0, slim));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 640, 1280, 0, -1, true}, 1, 0, slim));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 96, 2048, 0, -1, true}, 2, 0, slim));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 1024, 2304, 0, -1, true}, 3, 0, slim));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 1024, 1280, 0, -1, true}, 0, 0, slim, true));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 320, 8192, 0, -1, true}, 0, 0, TmapConsumer{16, true, true, 64, 1}));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 640, 8192, 0, -1, true}, 0, 0, TmapConsumer{16, true, true, 128, 6}));
    c.push_back(tmap_oracle_case({K2::kFp8E8m0, 1, 640, 8192, 0, -1, true}, 0, 0, TmapConsumer{16, true, true, 64, 3}));
    for (const Shape& s : std::vector<Shape>{
             {K2::kFp8E8m0, 1, 5120, 8192, 0, -1, true}, {K2::kFp8E8m0, 1, 8192, 4096, 0, -1, true, 0, 8},
             {K2::kFp8E8m0, 1, 5120, 2304, 0, -1, true}, {K2::kFp8E8m0, 1, 1280, 5120, 0, -1, true}})
      c.push_back(tmap_slim_bitwise_case(s));
    c.push_back(tmap_slim_bitwise_case({K2::kFp8E8m0, 1, 2304, 5120, 0, -1, true}, 3));
  }
  // Its start orders (NOTES 44), bitwise order 0: wq_b (one tile per CTA) and shared w1 (clusters of 3)
  // at each order; then wo_b at whole-K 64-row tiles (order 3), a single tile (order 4), and at order 2
  // wq_b at whole-K 64-row tiles (~4 tiles per CTA: the later tiles' code loads), wo_b on the plan's
  // clusters (3 rounds), the grouped wo_a (x per group), a tail, a single tile, no scales.
  for (const int order : {1, 2, 3, 4}) {
    c.push_back(tmap_order_bitwise_case({K2::kFp8E8m0, 1, 32768, 1280, 0, -1, true}, order));
    c.push_back(tmap_order_bitwise_case({K2::kFp8E8m0, 1, 2304, 5120, 0, -1, true}, order));
  }
  c.push_back(tmap_order_bitwise_case({K2::kFp8E8m0, 1, 5120, 8192, 0, -1, true}, 3, 64, 1));
  c.push_back(tmap_order_bitwise_case({K2::kFp8E8m0, 1, 6, 1024, 0, -1, true}, 4));
  c.push_back(tmap_order_bitwise_case({K2::kFp8E8m0, 1, 32768, 1280, 0, -1, true}, 2, 64, 1));
  c.push_back(tmap_order_bitwise_case({K2::kFp8E8m0, 1, 5120, 8192, 0, -1, true}, 2));
  c.push_back(tmap_order_bitwise_case({K2::kFp8E8m0, 1, 8192, 4096, 0, -1, true, 0, 8}, 2));
  c.push_back(tmap_order_bitwise_case({K2::kFp8E8m0, 1, 200, 2080, 0, -1, true}, 2));
  c.push_back(tmap_order_bitwise_case({K2::kFp8E8m0, 1, 6, 1024, 0, -1, true}, 2));
  c.push_back(tmap_order_bitwise_case({K2::kFp8E8m0, 1, 640, 1280, 0, -1, true}, 2, 0, 0, 1));
  // kAuto's own use of it: wq_b, wo_b, the grouped wo_a, and 9216 x 6144 (whole-K 64-row tiles over
  // two rounds where the plan would take clusters: the Engram wkv's rule).
  for (const bool bitwise : {false, true})
    for (const Shape& s : std::vector<Shape>{{K2::kFp8E8m0, 1, 32768, 1280, 0, -1, true},
                                             {K2::kFp8E8m0, 1, 5120, 8192, 0, -1, true},
                                             {K2::kFp8E8m0, 1, 9216, 6144, 0, -1, true},
                                             {K2::kFp8E8m0, 1, 8192, 4096, 0, -1, true, 0, 8}})
      c.push_back(tmap_auto_case(s, bitwise));
  // The pairs (NOTES 47): V4.1-Flash's wq_a + wkv and shared w1 + w3 under kAuto's pair split (since run
  // pair: shared w1 + w3 at whole-K 64-row tiles, as the forced t64c1 case; then the plan's 64-row tiles
  // over clusters of 8) and forced
  // ones (whole-K 64-row tiles; 64-row tiles over clusters of 4: several tiles per cluster, the
  // reduction buffers cycling across the two weights), 2 / 3 stages; tails with ragged K (200 + 72 rows
  // x 2080), a slice as the second weight, no scales.
  for (const bool bitwise : {true, false}) {
    const Shape wq_a{K2::kFp8E8m0, 1, 1280, 5120, 0, -1, true}, wkv{K2::kFp8E8m0, 1, 512, 5120, 0, -1, true};
    const Shape w1{K2::kFp8E8m0, 1, 2304, 5120, 0, -1, true};
    c.push_back(tmap_pair_case("wq_a_wkv", wq_a, wkv, bitwise));
    c.push_back(tmap_pair_case("shared_w13", w1, w1, bitwise));
    c.push_back(tmap_pair_case("shared_w13", w1, w1, bitwise, 0, 64, 1));
    c.push_back(tmap_pair_case("wq_a_wkv", wq_a, wkv, bitwise, 0, 64, 4));
    c.push_back(tmap_pair_case("shared_w13", w1, w1, bitwise, 2));
    c.push_back(tmap_pair_case("wq_a_wkv", wq_a, wkv, bitwise, 3, 128, 8));
    c.push_back(tmap_pair_case("tails", {K2::kFp8E8m0, 1, 200, 2080, 0, -1, true}, {K2::kFp8E8m0, 1, 72, 2080, 0, -1, true},
                               bitwise));
    c.push_back(tmap_pair_case("slice", {K2::kFp8E8m0, 1, 640, 1280, 0, -1, true},
                               {K2::kFp8E8m0, 1, 256, 1280, 32, 150, true}, bitwise));
    c.push_back(tmap_pair_case("small", {K2::kFp8E8m0, 1, 640, 1280, 0, -1, true}, {K2::kFp8E8m0, 1, 256, 1280, 0, -1, true},
                               bitwise, 0, 0, 0, 1));
  }
  c.push_back(tmap_fallback_case({K2::kFp8E8m0, 1, 1024, 1280}));                 // f32 x
  c.push_back(tmap_fallback_case({K2::kFp8E8m0, 2, 1024, 1280, 0, -1, true}));    // n = 2
  c.push_back(tmap_fallback_case({K2::kFp8F32Scale, 1, 200, 1280, 0, -1, true})); // fp32 scales
  c.push_back(tmap_fallback_case({K2::kFp8E8m0, 1, 256, 1280, 40, 150, true}));   // a slice off 16 rows
  return c;
}

// What the bulk kernel cannot take: kAuto falls back to the former kernel (same bits),
// a forced kBulk fails cleanly; linear_gemv_multi rejects mixed calls.
// kAuto's tensor-map rule: the big FP8 weights at one token under bf16 x only; not the 12 MB
// shared-expert weights, not f32 x, not the batch-invariant chunks (one_kernel).
TEST(LinearGemv, AutoTmapTakesOnlyTheBigWeights) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
  Rng rng(5);
  const Shape big{WKind::kFp8E8m0, 1, 5120, 8192, 0, -1, true}, small{WKind::kFp8E8m0, 1, 2304, 5120, 0, -1, true};
  const auto wb = random_weight(rng, big.kind, big.rows, big.cols, 0.05f);
  const auto ws = random_weight(rng, small.kind, small.rows, small.cols, 0.05f);
  Dev<float> dx(8192), dy(5120);
  kernels::LinearArgs a = args(big, *wb, dx.get(), dy.get());
  EXPECT_TRUE(kernels::gemv_tmap_auto_takes(a));
  a.one_kernel = true;
  EXPECT_FALSE(kernels::gemv_tmap_auto_takes(a));
  a = args(big, *wb, dx.get(), dy.get());
  a.bf16_x = false;
  EXPECT_FALSE(kernels::gemv_tmap_auto_takes(a));
  EXPECT_FALSE(kernels::gemv_tmap_auto_takes(args(small, *ws, dx.get(), dy.get())));
}

// kAuto's pair rule (NOTES 47): two calls of one x at one token under bf16 x, with its mode on; mode 2
// only outside a branch (no bulk cap on this thread); mode 3 (the default) pairs of <= 16 MiB: wq_a +
// wkv, not shared w1 + w3. Not: mode 0, different x, n = 2, f32 x, the batch-invariant chunks,
// different columns, one call.
TEST(LinearGemv, PairRuleTakesOnlyOneTokenPairsOfOneX) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
  Rng rng(11);
  const Shape sa{WKind::kFp8E8m0, 1, 1280, 5120, 0, -1, true}, sb{WKind::kFp8E8m0, 1, 512, 5120, 0, -1, true};
  const Shape sc{WKind::kFp8E8m0, 1, 512, 2048, 0, -1, true};
  const auto wa = random_weight(rng, sa.kind, sa.rows, sa.cols, 0.05f);
  const auto wb = random_weight(rng, sb.kind, sb.rows, sb.cols, 0.05f);
  const auto wc = random_weight(rng, sc.kind, sc.rows, sc.cols, 0.05f);
  Dev<float> dx(2 * 5120), dx2(2 * 5120), dy(2 * 1280), dy2(2 * 512);
  kernels::LinearArgs c[2] = {args(sa, *wa, dx.get(), dy.get()), args(sb, *wb, dx.get(), dy2.get())};
  {
    PairScope on(1, 0, 0, 0);
    EXPECT_TRUE(kernels::gemv_tmap_pair_takes(c, 2));
    EXPECT_FALSE(kernels::gemv_tmap_pair_takes(c, 1));
    kernels::LinearArgs d[2] = {c[0], c[1]};
    d[1].x = dx2.get();
    EXPECT_FALSE(kernels::gemv_tmap_pair_takes(d, 2));
    d[1] = c[1];
    d[0].n = d[1].n = 2;
    EXPECT_FALSE(kernels::gemv_tmap_pair_takes(d, 2));
    d[0] = c[0], d[1] = c[1];
    d[0].bf16_x = d[1].bf16_x = false;
    EXPECT_FALSE(kernels::gemv_tmap_pair_takes(d, 2));
    d[0] = c[0], d[1] = c[1];
    d[0].one_kernel = d[1].one_kernel = true;
    EXPECT_FALSE(kernels::gemv_tmap_pair_takes(d, 2));
    d[0] = c[0];
    d[1] = args(sc, *wc, dx.get(), dy2.get());
    EXPECT_FALSE(kernels::gemv_tmap_pair_takes(d, 2));
  }
  {
    PairScope off(0, 0, 0, 0);
    EXPECT_FALSE(kernels::gemv_tmap_pair_takes(c, 2));
  }
  {
    PairScope outside(2, 0, 0, 0);
    EXPECT_TRUE(kernels::gemv_tmap_pair_takes(c, 2));
    kernels::gemv_set_bulk_blocks_per_sm(1);  // inside a branch
    EXPECT_FALSE(kernels::gemv_tmap_pair_takes(c, 2));
    kernels::gemv_set_bulk_blocks_per_sm(0);
  }
  const Shape s1{WKind::kFp8E8m0, 1, 2304, 5120, 0, -1, true};
  const auto w1 = random_weight(rng, s1.kind, s1.rows, s1.cols, 0.05f);
  const auto w3 = random_weight(rng, s1.kind, s1.rows, s1.cols, 0.05f);
  Dev<float> dy1(2304), dy3(2304);
  const kernels::LinearArgs shared[2] = {args(s1, *w1, dx.get(), dy1.get()), args(s1, *w3, dx.get(), dy3.get())};
  {
    PairScope byte_cap(3, 0, 0, 0);
    EXPECT_TRUE(kernels::gemv_tmap_pair_takes(c, 2));
    EXPECT_FALSE(kernels::gemv_tmap_pair_takes(shared, 2));
    kernels::gemv_set_bulk_blocks_per_sm(1);  // the same inside a branch: a rule of the shape only
    EXPECT_TRUE(kernels::gemv_tmap_pair_takes(c, 2));
    kernels::gemv_set_bulk_blocks_per_sm(0);
  }
  {
    PairScope every(1, 0, 0, 0);
    EXPECT_TRUE(kernels::gemv_tmap_pair_takes(shared, 2));
    int tr = 0, cs = 0;
    kernels::gemv_tmap_pair_plan(shared, &tr, &cs, nullptr, nullptr);
    EXPECT_EQ(tr, 64);  // whole-K 64-row tiles: 72 CTAs in one round
    EXPECT_EQ(cs, 1);
  }
  EXPECT_EQ(kernels::gemv_tmap_pair_mode(), 1);  // the default (DEEPINFER_GEMV_PAIR unset): every pair
}

TEST(LinearGemv, BulkFallbackAndRejects) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
  Rng rng(7);
  // F32 rows of 5120 columns: ks = 8, a tile of 4 rows is 80 KB, over the 64 KB stage
  // (n = 6: kAuto would take the bulk kernel if the tile fitted).
  const Shape big{WKind::kF32, 6, 64, 5120};
  const auto w = random_weight(rng, big.kind, big.rows, big.cols, 0.05f);
  const Dev<float> dx(randn(rng, size_t(big.n * big.cols)));
  const auto former = run_kind(big, kernels::GemvKind::kStream, *w, dx);
  const auto autok = run_kind(big, kernels::GemvKind::kAuto, *w, dx);
  EXPECT_EQ(std::memcmp(former.data(), autok.data(), former.size() * 4), 0);
  {
    Dev<float> dy(size_t(big.n * big.rows));
    GemvScope scope(kernels::GemvKind::kBulk, 0);
    EXPECT_EQ(kernels::linear(args(big, *w, dx.get(), dy.get()), nullptr), cudaErrorInvalidValue);
    cudaGetLastError();
  }
  // Mixed formats / n in one multi launch, too many calls, a non-gemv path.
  const auto w8 = random_weight(rng, WKind::kFp8E8m0, 64, 1024, 0.05f);
  const auto w4 = random_weight(rng, WKind::kFp4E8m0, 64, 1024, 0.05f);
  const Dev<float> dx8(randn(rng, 8 * 1024));
  Dev<float> dy(8 * 64), dy2(8 * 64);
  const Shape s8{WKind::kFp8E8m0, 2, 64, 1024}, s4{WKind::kFp4E8m0, 2, 64, 1024}, s8n3{WKind::kFp8E8m0, 3, 64, 1024};
  std::vector<kernels::LinearArgs> mixed = {args(s8, *w8, dx8.get(), dy.get()), args(s4, *w4, dx8.get(), dy2.get())};
  EXPECT_EQ(kernels::linear_gemv_multi(mixed.data(), 2, nullptr), cudaErrorInvalidValue);
  mixed[1] = args(s8n3, *w8, dx8.get(), dy2.get());
  EXPECT_EQ(kernels::linear_gemv_multi(mixed.data(), 2, nullptr), cudaErrorInvalidValue);
  std::vector<kernels::LinearArgs> five(5, args(s8, *w8, dx8.get(), dy.get()));
  EXPECT_EQ(kernels::linear_gemv_multi(five.data(), 5, nullptr), cudaErrorInvalidValue);
  five[0].path = kernels::LinearPath::kTiled;
  EXPECT_EQ(kernels::linear_gemv_multi(five.data(), 1, nullptr), cudaErrorInvalidValue);
  five[0].path = kernels::LinearPath::kGemv;
  five[0].n = 9;
  EXPECT_EQ(kernels::linear_gemv_multi(five.data(), 1, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Programmatic dependent launch (gemv_set_pdl): chains of rms_norm (which triggers its
// dependents at its start) -> gemv -> gemv on a stream, where each gemv reads what the
// kernel before it writes. With PDL the gemv blocks start early and must still read x
// only after griddepcontrol.wait: the outputs equal the plain launches' bit for bit, for
// the streaming, bulk, persistent and tensor-core kernels, over several rounds with fresh
// inputs (a missing wait would read the previous round's or the zeroed x).
TEST(LinearGemv, PdlChainsMatchPlainLaunches) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
  Rng rng(11);
  Shape s1{WKind::kFp8E8m0, 1, 1024, 5120}, s2{WKind::kFp8E8m0, 1, 5120, 1024};
  const auto w1 = random_weight(rng, s1.kind, s1.rows, s1.cols, 0.05f);
  const auto w2 = random_weight(rng, s2.kind, s2.rows, s2.cols, 0.05f);
  cudaStream_t st;
  ASSERT_EQ(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), cudaSuccess);
  Dev<float> dx(size_t(s1.cols)), xn(size_t(s1.cols)), y1(size_t(s1.rows)), y2(size_t(s2.rows));
  for (const kernels::GemvKind kind : {kernels::GemvKind::kStream, kernels::GemvKind::kBulk,
                                       kernels::GemvKind::kPersist, kernels::GemvKind::kTensor,
                                       kernels::GemvKind::kXs, kernels::GemvKind::kTmap}) {
    // kTensor / kTmap: their kernels take FP8 calls under bf16 x only.
    s1.bf16_x = s2.bf16_x = kind == kernels::GemvKind::kTensor || kind == kernels::GemvKind::kTmap;
    if (kind == kernels::GemvKind::kTmap) {  // the chain must really run the tensor-map kernel
      Dev<float> ya(size_t(s1.rows));
      ASSERT_TRUE(kernels::linear_gemv_tmap_eligible(args(s1, *w1, xn.get(), ya.get())));
      ASSERT_TRUE(kernels::linear_gemv_tmap_eligible(args(s2, *w2, y1.get(), y2.get())));
    }
    for (int round = 0; round < 6; ++round) {
      const auto x = randn(rng, size_t(s1.cols));
      std::vector<float> out[2];
      for (const bool pdl : {false, true}) {
        GemvScope scope(kind, 0);
        kernels::gemv_set_pdl(pdl);
        ASSERT_EQ(cudaMemsetAsync(xn.get(), 0, size_t(s1.cols) * 4, st), cudaSuccess);
        ASSERT_EQ(cudaMemsetAsync(y1.get(), 0, size_t(s1.rows) * 4, st), cudaSuccess);
        ASSERT_EQ(cudaMemcpyAsync(dx.get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice, st), cudaSuccess);
        ASSERT_EQ(kernels::rms_norm({dx.get(), xn.get(), nullptr, 1, s1.cols, 1e-6f}, st), cudaSuccess);
        ASSERT_EQ(kernels::linear(args(s1, *w1, xn.get(), y1.get()), st), cudaSuccess);
        ASSERT_EQ(kernels::linear(args(s2, *w2, y1.get(), y2.get()), st), cudaSuccess);
        ASSERT_EQ(cudaStreamSynchronize(st), cudaSuccess);
        kernels::gemv_set_pdl(false);
        out[pdl] = y2.host();
      }
      ASSERT_EQ(std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4), 0) << "round " << round;
    }
  }
  cudaStreamDestroy(st);
}

}  // namespace deepinfer::testing_cuda

namespace deepinfer::testing_cuda {
namespace {

// gemv_set_tmap_max_ctas (the Engram wkv's capped grid, NOTES 55): whole-K 64-row tiles over fewer
// CTAs (more rounds per CTA) give the same bits as the plan's grid.
TEST(LinearGemv, TmapMaxCtasChangesNoBit) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) GTEST_SKIP() << "no CUDA device";
  Rng rng(5);
  Shape s{WKind::kFp8E8m0, 1, 4096, 2048};
  s.bf16_x = true;
  const auto w = tc_weight(rng, s, 0);
  const Dev<float> dx(randn(rng, size_t(s.cols)));
  const TmapConsumer whole_k{16, true, true, 64, 1, 3};
  const std::vector<float> full = run_tmap(s, *w, dx, 4, whole_k);
  for (const int cap : {1, 5, 33}) {
    kernels::gemv_set_tmap_max_ctas(cap);
    const std::vector<float> capped = run_tmap(s, *w, dx, 4, whole_k);
    kernels::gemv_set_tmap_max_ctas(0);
    ASSERT_EQ(full.size(), capped.size());
    EXPECT_EQ(std::memcmp(full.data(), capped.data(), full.size() * sizeof(float)), 0) << "cap " << cap;
  }
}

}  // namespace
}  // namespace deepinfer::testing_cuda
