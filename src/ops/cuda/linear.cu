// linear on the GPU: the hand-written kernels of kernels/cuda/smxx_linear (weights
// dequantized in the kernel) and, for large batches under Activations::kBF16, a bf16
// GEMM through cuBLASLt on a dequantized copy of the weight.
#include <cublasLt.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "kernels/cuda/smxx_linear.cuh"
#include "kernels/cuda/smxx_linear_fp8.cuh"
#include "ops/cuda/cuda_check.h"
#include "ops/cuda/cuda_ops.h"
#include "ops/cuda/weight_args.h"

// Checks a cublasStatus_t-returning call; failures throw like CUDA_CHECK.
#define CUBLAS_CHECK(expr)                                                                              \
  do {                                                                                                  \
    const cublasStatus_t cublas_check_st_ = (expr);                                                     \
    if (cublas_check_st_ != CUBLAS_STATUS_SUCCESS)                                                      \
      ::deepinfer::ops::cuda::cuda_fail(__FILE__, __LINE__,                                             \
                                        std::string(#expr) + " failed: " + cublasLtGetStatusName(cublas_check_st_)); \
  } while (0)

namespace deepinfer::ops::cuda {

constexpr int64_t kInvariantChunk = 8;  // the gemv kernel's largest token count

namespace {

constexpr size_t kAlign = 256;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

// Weights the GEMM path takes: those whose bf16 image is exact (BF16 as stored; e4m3 /
// e2m1 with no or power-of-two scales, dequantized into the workspace).
bool gemm_format(const kernels::WeightArgs& w) {
  if (w.format == kernels::WFormat::kBF16) return w.scale_format == kernels::SFormat::kNone;
  return (w.format == kernels::WFormat::kE4M3 || w.format == kernels::WFormat::kE2M1) &&
         w.scale_format != kernels::SFormat::kF32;
}

int pointer_alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  int a = 16;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// linear_gemm_stats(): GEMM calls, declines for want of an algorithm, and of the calls on
// FP8 / FP4 weights those that dequantized per call and those that read a bf16 copy.
std::atomic<int64_t> g_gemm_calls{0}, g_gemm_no_algo{0}, g_gemm_dequant{0}, g_gemm_copy{0};

// One cuBLASLt handle per device, created on first use and kept for the process (a
// handle destroyed at exit can outlive the driver's teardown).
cublasLtHandle_t lt_handle(int device) {
  static std::mutex mu;
  static std::map<int, cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles.find(device);
  if (it != handles.end()) return it->second;
  cublasLtHandle_t h = nullptr;
  CUBLAS_CHECK(cublasLtCreate(&h));
  handles[device] = h;
  return h;
}

// A GEMM shape's descriptors and the algorithm the heuristic picked for it, cached:
// the same shape runs the same algorithm on every call (deterministic results, and no
// heuristic query in a hot or captured path after the first call).
struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;  // false: no algorithm for this shape (the caller falls back)
};
// (device, rows, tokens, cols, A / B / D alignment, workspace bytes)
using GemmKey = std::tuple<int, int64_t, int64_t, int64_t, int, int, int, size_t>;

const GemmPlan& gemm_plan(const GemmKey& key) {
  static std::mutex mu;
  static std::map<GemmKey, GemmPlan> plans;  // never freed: bounded by the shapes a process runs
  std::lock_guard<std::mutex> lock(mu);
  auto it = plans.find(key);
  if (it != plans.end()) return it->second;
  const auto [device, m, n, k, align_a, align_b, align_d, lt_bytes] = key;
  GemmPlan p;
  // Row-major y [n, m] = x [n, k] . W [m, k]^T is, column-major, y^T [m, n] = W^T' . x^T:
  // A = W stored k x m (ld k) transposed, B = x stored k x n (ld k), D = y^T m x n (ld m).
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_16BF, uint64_t(k), uint64_t(m), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_16BF, uint64_t(k), uint64_t(n), k));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, uint64_t(m), uint64_t(n), m));
  cublasLtMatmulPreference_t pref = nullptr;
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  const uint64_t ws = lt_bytes;
  // Split-K only with a separate reduction step (fixed order); no in-place reduction
  // through the output buffer.
  const uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_NONE | CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE |
                           CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  const uint32_t aa = uint32_t(align_a), ab = uint32_t(align_b), ad = uint32_t(align_d);
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
                                                    sizeof(schemes)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &aa, sizeof(aa)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &ab, sizeof(ab)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &ad, sizeof(ad)));
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &ad, sizeof(ad)));
  cublasLtMatmulHeuristicResult_t res{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt_handle(device), p.op, p.a, p.b, p.c, p.c, pref, 1, &res, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  if (st == CUBLAS_STATUS_SUCCESS && found > 0 && res.state == CUBLAS_STATUS_SUCCESS) {
    p.algo = res.algo;
    p.ok = true;
  } else if (st != CUBLAS_STATUS_NOT_SUPPORTED && st != CUBLAS_STATUS_SUCCESS) {
    CUBLAS_CHECK(st);
  }
  return plans.emplace(key, p).first->second;
}

// The cuBLASLt path; false when it cannot take the call (workspace too small for one
// token, no algorithm for the shape): the caller runs the hand-written kernels.
// fp8_x (Activations::kFP8): x enters as its per-32 e4m3 quantization, code * scale in
// bf16 (exact), instead of x rounded to bf16; the weight side is the same bf16 (exact
// dequantized codes, or the persistent copy), so the GEMM forms the FP8 GEMM's exact
// products and adds them in fp32, in its own order.
bool linear_gemm(const LinearParams& p, const kernels::WeightArgs& w, int64_t rows, const LinearWorkspace& ws,
                 cudaStream_t stream, bool fp8_x = false) {
  if (!gemm_format(w) || ws.data == nullptr || reinterpret_cast<uintptr_t>(ws.data) % kAlign != 0) return false;
  const int64_t k = w.cols;
  const bool quant = w.format != kernels::WFormat::kBF16;
  const size_t lt_bytes = kLinearGemmLtBytes;
  // The workspace keeps the dequant room even when a persistent copy (p.w.bf16) makes it
  // unused: the same token pieces and the same x address as the per-call path, so the
  // same cached algorithms run and the copy changes no bit of the result.
  const size_t w_bytes = quant ? align_up(size_t(rows) * size_t(k) * 2) : 0;
  if (ws.bytes < lt_bytes + w_bytes) return false;
  const int64_t cap = int64_t((ws.bytes - lt_bytes - w_bytes) / (size_t(k) * 2));  // tokens per piece
  if (cap < 1) return false;
  uint8_t* base = static_cast<uint8_t*>(ws.data);
  void* lt_ws = base;
  auto* wb = reinterpret_cast<uint16_t*>(base + lt_bytes);
  auto* xb = reinterpret_cast<uint16_t*>(base + lt_bytes + w_bytes);
  // The copy's rows row0.. start 2 * row0 * k bytes in; a start less aligned than the
  // workspace's (16 bytes, cuBLASLt's largest alignment class) would key another
  // algorithm, so such a slice dequantizes per call as before.
  const uint16_t* copy = quant && p.w.bf16 != nullptr ? p.w.bf16 + p.row0 * k : nullptr;
  if (copy != nullptr && pointer_alignment(copy) < pointer_alignment(wb)) copy = nullptr;
  const bool dequant = quant && copy == nullptr;
  const void* a_ptr = !quant   ? static_cast<const void*>(w.data + p.row0 * k * 2)
                      : dequant ? static_cast<const void*>(wb)
                                : static_cast<const void*>(copy);
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  // Plan every piece first: a shape without an algorithm falls back before anything runs.
  const int64_t piece = std::min(p.n, cap);
  std::vector<const GemmPlan*> plans;
  for (int64_t t0 = 0; t0 < p.n; t0 += piece) {
    const int64_t nt = std::min(piece, p.n - t0);
    const GemmKey key{device, rows, nt, k, pointer_alignment(a_ptr), pointer_alignment(xb),
                      pointer_alignment(p.y + t0 * rows), lt_bytes};
    const GemmPlan& plan = gemm_plan(key);
    if (!plan.ok) {
      ++g_gemm_no_algo;
      return false;
    }
    plans.push_back(&plan);
  }
  ++g_gemm_calls;
  if (quant) ++(dequant ? g_gemm_dequant : g_gemm_copy);  // BF16 weights are read in place: neither
  if (dequant) CUDA_CHECK(kernels::dequant_weight_bf16(w, p.row0, rows, wb, stream));
  const float one = 1.0f, zero = 0.0f;
  const cublasLtHandle_t h = lt_handle(device);
  for (size_t i = 0; i < plans.size(); ++i) {
    const int64_t t0 = int64_t(i) * piece, nt = std::min(piece, p.n - t0);
    if (fp8_x)
      CUDA_CHECK(kernels::quant_act_fp8_bf16(p.x + t0 * k, nt, k, xb, stream));
    else
      CUDA_CHECK(kernels::round_rows_bf16(p.x + t0 * k, xb, nt * k, stream));
    float* y = p.y + t0 * rows;
    const GemmPlan& g = *plans[i];
    CUBLAS_CHECK(cublasLtMatmul(h, g.op, &one, a_ptr, g.a, xb, g.b, &zero, y, g.c, y, g.c, &g.algo, lt_ws, lt_bytes,
                                stream));
  }
  return true;
}

kernels::LinearPath kernel_path(LinearKernel k) {
  switch (k) {
    case LinearKernel::kGemv: return kernels::LinearPath::kGemv;
    case LinearKernel::kMma: return kernels::LinearPath::kMma;
    case LinearKernel::kTiled: return kernels::LinearPath::kTiled;
    default: return kernels::LinearPath::kAuto;
  }
}

// Scratch for one call: ws when it holds `bytes`, else the stream-ordered allocator
// (freed on the same stream after the call's kernels).
struct Scratch {
  uint8_t* p = nullptr;
  bool owned = false;
  cudaStream_t stream = nullptr;
  Scratch(const LinearWorkspace& ws, size_t bytes, cudaStream_t s) : stream(s) {
    if (ws.data != nullptr && ws.bytes >= bytes && reinterpret_cast<uintptr_t>(ws.data) % kAlign == 0) {
      p = static_cast<uint8_t*>(ws.data);
    } else {
      void* q = nullptr;
      CUDA_CHECK(cudaMallocAsync(&q, bytes, s));
      p = static_cast<uint8_t*>(q);
      owned = true;
    }
  }
  ~Scratch() {
    if (owned) cudaFreeAsync(p, stream);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
};

// The n from which kAuto takes the cuBLASLt path for this call: the workspace's own
// threshold (tests) or the weight's (linear_gemm_min_n).
int64_t gemm_min_n(const LinearParams& p, const LinearWorkspace& ws, int64_t rows) {
  return ws.min_n > 0 ? ws.min_n : linear_gemm_min_n(p.w, rows);
}

// Whether kAuto takes fp8 mode's FP8 x FP8 gemv for a call (kernels::linear_fp8_gemv, NOTES 31):
// from kernels::linear_fp8_gemv_min_n() to 8 tokens, below the size where linear_fp8 tries
// cuBLASLt first. linear_fp8 and linear_multi's shared launch both ask this, so the fused
// launch never runs a kernel that the calls alone would not.
bool fp8_gemv_auto(const LinearParams& p, const LinearWorkspace& ws, int64_t rows) {
  return p.n >= kernels::linear_fp8_gemv_min_n() && p.n <= kInvariantChunk &&
         !(ws.data != nullptr && p.n >= gemm_min_n(p, ws, rows));
}

// Activations::kFP8 (cuda_ops.h): quantize x on the device, then (kAuto, from the bf16
// mode's GEMM threshold, with a cuBLASLt workspace) a bf16 cuBLASLt GEMM on the exact
// dequantized codes; else the FP8 tensor-core GEMM or an fp32 kernel on the dequantized
// codes. cuBLASLt first because it is exact in its products and fp32 in its sums, where the
// wgmma FP8 kernels (deleted in session 8) were not (below), and faster than our FP8 GEMM at every Flash shape with
// the bf16 copies (bench/results/2026-11-30-h200-flash-layers.md, runs 17 and 21: the
// per-32-K promotion that V4.1's 32 x 32 ue8m0 blocks need costs the FP8 kernel as much
// issue as its MMAs, and cuBLASLt 13 has no 32-block FP8 mode on Hopper, run 20).
void linear_fp8(const LinearParams& p, LinearMode mode, cudaStream_t stream, const LinearWorkspace& ws,
                LinearKernel kernel, int64_t rows) {
  CUDA_OP_CHECK(fp8_activation_weight(p.w),
                "linear: Activations::kFP8 needs an e4m3 weight with no or ue8m0 scales in blocks of 32k columns");
  // (linear() has checked that a forced kernel comes with LinearMode::kAuto.)
  const bool forced_gemm = kernel == LinearKernel::kFp8Mma;
  if (p.n == 0 || rows == 0) return;
  const kernels::WeightArgs wa = to_weight_args(p.w);
  if (kernel == LinearKernel::kGemm) {
    CUDA_OP_CHECK(linear_gemm(p, wa, rows, ws, stream, true),
                  "linear: the cuBLASLt path cannot take this call (weight format, workspace or shape)");
    return;
  }
  // cuBLASLt from the bf16 threshold whenever a workspace is given, for accuracy first:
  // the wgmma FP8 kernels (deleted in session 8) added each block's 32 products on the tensor core with a truncated
  // alignment (op cases: worst error 2e-5..1e-4 of S, against 1.5e-7 for mma.sync and
  // cuBLASLt's fp32), and on the trained model that moved fp8 mode's logits as far from the
  // CPU as fp8 mode is from bf16 (2.55 vs 2.39; cuBLASLt 0.31; run 21). Speed agrees with
  // the weight's bf16 copy (run 17: 1.9-4.5x the FP8 kernel at 256 tokens, 2.2-2.5x at
  // 8192); dequantizing per call costs ~0.08 ms per call on wq_b / wo_b (0.12 vs 0.078 ms at
  // 256 tokens, 1.17 vs 2.54 ms at 8192).
  const int64_t min_n = gemm_min_n(p, ws, rows);
  if (mode == LinearMode::kAuto && kernel == LinearKernel::kAuto && p.n >= min_n &&
      linear_gemm(p, wa, rows, ws, stream, true))
    return;
  // Decode sizes (n <= 8): the FP8 x FP8 gemv, one launch that quantizes x in the kernel
  // (kernels::linear_fp8_gemv, NOTES 31) instead of quant_act_fp8 + the fp32 gemv on the
  // dequantized values. kAuto from kernels::linear_fp8_gemv_min_n() tokens (4; DEEPINFER_FP8_GEMV
  // =1: from 1, =0: never); kFp8Gemv forces it.
  if (kernel == LinearKernel::kFp8Gemv ||
      (mode == LinearMode::kAuto && kernel == LinearKernel::kAuto && fp8_gemv_auto(p, ws, rows))) {
    const kernels::Fp8GemvCall c{p.x, p.y, wa, p.row0, rows};
    if (kernels::linear_fp8_gemv_eligible(c, p.n)) {
      CUDA_CHECK(kernels::linear_fp8_gemv(&c, 1, p.n, stream));
      return;
    }
    CUDA_OP_CHECK(kernel != LinearKernel::kFp8Gemv,
                  "linear: the FP8 gemv cannot take this call (n > 8, K % 32, alignment or scale blocks)");
  }
  const int64_t k = p.w.cols, nb = (k + 31) / 32;
  bool gemm = mode == LinearMode::kAuto && (forced_gemm || (kernel == LinearKernel::kAuto && p.n >= linear_fp8_min_n()));
  if (gemm) {
    // The mma.sync FP8 GEMM, kAuto's and kFp8Mma's: exact products, fp32 sums (the wgmma
    // FP8 kernels, less accurate, were deleted in session 8; NOTES 24).
    const size_t codes_bytes = align_up(size_t(p.n * k));
    Scratch sc(ws, codes_bytes + size_t(p.n * nb) * 4, stream);
    kernels::Fp8GemmArgs g;
    g.x_codes = sc.p;
    g.x_scales = reinterpret_cast<const float*>(sc.p + codes_bytes);
    g.n = p.n;
    g.w = wa;
    g.row0 = p.row0;
    g.num_rows = rows;
    g.y = p.y;
    if (kernels::linear_fp8_gemm_eligible(g)) {
      CUDA_CHECK(kernels::quant_act_fp8(p.x, p.n, k, sc.p, reinterpret_cast<float*>(sc.p + codes_bytes), nullptr,
                                        stream));
      CUDA_CHECK(kernels::linear_fp8_gemm(g, stream));
      return;
    }
    CUDA_OP_CHECK(!forced_gemm, "linear: the FP8 GEMM cannot take this call (K % 32, scale blocks, slice start)");
  }
  Scratch sc(ws, size_t(p.n * k) * 4, stream);
  float* deq = reinterpret_cast<float*>(sc.p);
  CUDA_CHECK(kernels::quant_act_fp8(p.x, p.n, k, nullptr, nullptr, deq, stream));
  LinearParams q = p;
  q.x = deq;
  q.act = Activations::kF32;  // the values are exact; the fp32 kernels add them up
  linear(q, mode, stream, LinearWorkspace{}, kernel);
}

// The kernel arguments of a call (rows: its row slice's length): x, y, n, weight, slice and
// the bf16 rounding of x; the path is the caller's.
kernels::LinearArgs linear_args(const LinearParams& p, int64_t rows) {
  kernels::LinearArgs a;
  a.x = p.x;
  a.y = p.y;
  a.n = p.n;
  a.w = to_weight_args(p.w);
  a.row0 = p.row0;
  a.num_rows = rows;
  a.bf16_x = p.act == Activations::kBF16;
  return a;
}

// The rows a call covers: num_rows, or the weight's rows from row0 on (num_rows < 0).
int64_t slice_rows(const LinearParams& p) { return p.num_rows < 0 ? p.w.rows - p.row0 : p.num_rows; }

}  // namespace

int64_t linear_fp8_min_n() { return 64; }

size_t linear_fp8_workspace_bytes(int64_t n, int64_t cols) {
  const size_t gemm = align_up(size_t(n * cols)) + size_t(n * ((cols + 31) / 32)) * 4;
  return std::max(gemm, size_t(n * cols) * 4);
}

size_t linear_gemm_workspace_bytes(int64_t max_weight_elems, int64_t max_x_elems) {
  return kLinearGemmLtBytes + align_up(size_t(std::max<int64_t>(max_weight_elems, 0)) * 2) +
         align_up(size_t(std::max<int64_t>(max_x_elems, 0)) * 2);
}

int64_t linear_gemm_min_n(const WeightRef& w, int64_t rows) {
  const bool quant = (w.dtype == DType::F8_E4M3 || w.dtype == DType::I8) &&
                     (w.scale == nullptr || w.scale_dtype == DType::F8_E8M0);
  if (w.dtype == DType::BF16 && w.scale == nullptr) return 8;
  if (quant) return rows >= 16384 ? 128 : 64;
  return INT64_MAX;
}

LinearGemmStats linear_gemm_stats() {
  return {g_gemm_calls.load(), g_gemm_no_algo.load(), g_gemm_dequant.load(), g_gemm_copy.load()};
}

size_t linear_bf16_copy_bytes(const WeightRef& w) {
  if (w.empty() || (w.dtype != DType::F8_E4M3 && w.dtype != DType::I8)) return 0;
  if (!gemm_format(to_weight_args(w))) return 0;
  return size_t(w.rows) * size_t(w.cols) * 2;
}

void linear_make_bf16_copy(const WeightRef& w, uint16_t* out, cudaStream_t stream) {
  CUDA_OP_CHECK(linear_bf16_copy_bytes(w) > 0, "linear_make_bf16_copy: the GEMM path reads this weight as it is");
  CUDA_OP_CHECK(reinterpret_cast<uintptr_t>(out) % 16 == 0, "linear_make_bf16_copy: output not 16-byte aligned");
  // The kernel the per-call path runs (linear_gemm), over all rows at once: its output
  // for rows row0.. does not depend on where the slice starts (one element per thread,
  // exact products), which the ops test checks against per-call slices.
  CUDA_CHECK(kernels::dequant_weight_bf16(to_weight_args(w), 0, w.rows, out, stream));
}

void linear_gemm_init() {
  int device = 0;
  CUDA_CHECK(cudaGetDevice(&device));
  lt_handle(device);
}

void linear(const LinearParams& p, cudaStream_t stream) { linear(p, LinearMode::kAuto, stream); }

void linear(const LinearParams& p, LinearMode mode, cudaStream_t stream) {
  linear(p, mode, stream, LinearWorkspace{}, LinearKernel::kAuto);
}

void linear(const LinearParams& p, LinearMode mode, cudaStream_t stream, const LinearWorkspace& ws,
            LinearKernel kernel) {
  const int64_t rows = slice_rows(p);
  CUDA_OP_CHECK(p.row0 >= 0 && rows >= 0 && p.row0 + rows <= p.w.rows, "linear: row slice out of range");
  CUDA_OP_CHECK(p.n >= 0, "linear: negative batch");
  CUDA_OP_CHECK(mode == LinearMode::kAuto || kernel == LinearKernel::kAuto,
                "linear: a forced kernel needs LinearMode::kAuto");
  if (p.act == Activations::kFP8) {
    linear_fp8(p, mode, stream, ws, kernel, rows);
    return;
  }
  CUDA_OP_CHECK(kernel != LinearKernel::kFp8Mma && kernel != LinearKernel::kFp8Gemv,
                "linear: the FP8 GEMM / gemv is for Activations::kFP8");
  kernels::LinearArgs a = linear_args(p, rows);
  if (mode == LinearMode::kInvariant) {
    // The gemv kernel's per-row arithmetic does not depend on n (its K split comes from
    // the weight's width; each token's sums run in the same order for any token count),
    // so running it on chunks of at most 8 tokens gives every row the same bits in any
    // batch. Weights it cannot take go through the tiled kernel for every n.
    kernels::LinearArgs probe = a;
    probe.n = 1;
    if (kernels::linear_gemv_eligible(probe)) {
      for (int64_t t0 = 0; t0 < p.n; t0 += kInvariantChunk) {
        kernels::LinearArgs c = a;
        c.x = p.x + t0 * p.w.cols;
        c.y = p.y + t0 * rows;
        c.n = std::min<int64_t>(kInvariantChunk, p.n - t0);
        c.path = kernels::LinearPath::kGemv;
        c.one_kernel = true;  // the same gemv kernel for chunks of 1 .. 8 tokens
        CUDA_CHECK(kernels::linear(c, stream));
      }
      return;
    }
    a.path = kernels::LinearPath::kTiled;
    CUDA_CHECK(kernels::linear(a, stream));
    return;
  }
  if (p.n == 0 || rows == 0) return;
  if (kernel == LinearKernel::kGemm) {
    CUDA_OP_CHECK(p.act == Activations::kBF16, "linear: the cuBLASLt path is for Activations::kBF16");
    CUDA_OP_CHECK(linear_gemm(p, a.w, rows, ws, stream),
                  "linear: the cuBLASLt path cannot take this call (weight format, workspace or shape)");
    return;
  }
  const int64_t min_n = gemm_min_n(p, ws, rows);
  if (kernel == LinearKernel::kAuto && a.bf16_x && p.n >= min_n && linear_gemm(p, a.w, rows, ws, stream)) return;
  a.path = kernel_path(kernel);
  CUDA_CHECK(kernels::linear(a, stream));
}

void linear_multi(const LinearParams* ps, int count, LinearMode mode, cudaStream_t stream, const LinearWorkspace& ws) {
  CUDA_OP_CHECK(count >= 0 && (count == 0 || ps != nullptr), "linear_multi: bad call list");
  if (count >= 2 && count <= kernels::kGemvMaxMulti && mode == LinearMode::kAuto && ps[0].act == Activations::kFP8) {
    // Activations::kFP8 at decode sizes: what linear() would run alone is the FP8 gemv;
    // calls with the same K and split share one launch (each output its own call's bits).
    kernels::Fp8GemvCall c8[kernels::kGemvMaxMulti];
    bool ok = true;
    for (int k = 0; ok && k < count; ++k) {
      const LinearParams& p = ps[k];
      const int64_t rows = slice_rows(p);
      ok = p.act == Activations::kFP8 && p.n == ps[0].n && !p.w.empty() && fp8_activation_weight(p.w) &&
           p.row0 >= 0 && rows >= 1 && p.row0 + rows <= p.w.rows && fp8_gemv_auto(p, ws, rows);
      if (!ok) break;
      c8[k] = kernels::Fp8GemvCall{p.x, p.y, to_weight_args(p.w), p.row0, rows};
      ok = kernels::linear_fp8_gemv_eligible(c8[k], p.n);
    }
    if (ok && kernels::linear_fp8_gemv_same_split(c8, count)) {
      CUDA_CHECK(kernels::linear_fp8_gemv(c8, count, ps[0].n, stream));
      return;
    }
  }
  std::vector<kernels::LinearArgs> calls;
  bool fused = count >= 2 && count <= kernels::kGemvMaxMulti;
  for (int k = 0; fused && k < count; ++k) {
    const LinearParams& p = ps[k];
    const int64_t rows = slice_rows(p);
    // What linear() would do with this call alone: the gemv path in one launch.
    if (p.act == Activations::kFP8 || p.n < 1 || p.n > kInvariantChunk || rows < 1 || p.row0 < 0 ||
        p.row0 + rows > p.w.rows || p.w.empty()) {
      fused = false;
      break;
    }
    kernels::LinearArgs a = linear_args(p, rows);
    a.path = kernels::LinearPath::kGemv;
    a.one_kernel = mode == LinearMode::kInvariant;  // as linear()'s invariant chunks
    const int64_t min_n = gemm_min_n(p, ws, rows);
    const bool gemm = mode == LinearMode::kAuto && a.bf16_x && p.n >= min_n && gemm_format(a.w) &&
                      ws.data != nullptr;  // linear() would try cuBLASLt first
    if (gemm || !kernels::linear_gemv_eligible(a) ||
        (k > 0 && (a.w.format != calls[0].w.format || a.n != calls[0].n || a.bf16_x != calls[0].bf16_x))) {
      fused = false;
      break;
    }
    calls.push_back(a);
  }
  if (fused) {
    CUDA_CHECK(kernels::linear_gemv_multi(calls.data(), count, stream));
    return;
  }
  for (int k = 0; k < count; ++k) linear(ps[k], mode, stream, ws);
}

bool linear_may_use_workspace(const LinearParams& p, LinearMode mode, const LinearWorkspace& ws) {
  if (ws.data == nullptr || ws.bytes == 0) return false;  // nothing to share
  // linear_fp8 takes its codes from ws whenever ws is large enough, at any n.
  if (p.act == Activations::kFP8) return true;
  // linear(): kInvariant never reaches the GEMM; kAuto tries it on bf16 x from gemm_min_n.
  return mode == LinearMode::kAuto && p.act == Activations::kBF16 && p.n >= gemm_min_n(p, ws, slice_rows(p));
}

}  // namespace deepinfer::ops::cuda
