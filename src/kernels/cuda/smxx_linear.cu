#include <atomic>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels/cuda/smxx_common.cuh"
#include "kernels/cuda/smxx_device.h"
#include "kernels/cuda/smxx_linear.cuh"
#include "kernels/cuda/smxx_linear_tmap.h"

namespace deepinfer::kernels {
namespace gemv {
// Defined in smxx_linear_gemv.cuh, instantiated in smxx_linear_gemv_<format>.cu.
template <WFormat F>
cudaError_t launch(const LinearArgs* calls, int count, cudaStream_t stream);

// The bulk kernel's launch size: resident blocks per SM of a kernel at a dynamic shared-memory
// size (cached: one occupancy query per kernel, device and size).
int bulk_blocks_per_sm(const void* kernel, int dyn_smem_bytes) {  // blocks of 256 threads (kGemvWarps)
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, int>, int> cache;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  const auto key = std::make_tuple(kernel, device, dyn_smem_bytes);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int v = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&v, kernel, /*threads=*/256, size_t(dyn_smem_bytes)) !=
      cudaSuccess)
    v = 0;
  cache[key] = v;
  return v;
}
}  // namespace gemv

namespace {
std::atomic<int> g_gemv_kind{int(GemvKind::kAuto)};
}  // namespace
void gemv_set_kind(GemvKind k) { g_gemv_kind = int(k); }
GemvKind gemv_kind() { return GemvKind(g_gemv_kind.load()); }
namespace {
constexpr int kPersistDefaultDepth = 4;
std::atomic<int> g_gemv_persist_depth{kPersistDefaultDepth}, g_gemv_persist_blocks{0};
}  // namespace
void gemv_set_persist(int depth, int blocks_per_sm) {
  g_gemv_persist_depth = depth <= 0 ? kPersistDefaultDepth : depth >= 6 ? 6 : depth >= 4 ? 4 : 2;
  g_gemv_persist_blocks = blocks_per_sm > 0 ? blocks_per_sm : 0;
}
int gemv_persist_depth() { return g_gemv_persist_depth.load(); }
int gemv_persist_blocks() { return g_gemv_persist_blocks.load(); }
namespace {
std::atomic<bool> g_gemv_pdl{false};
}  // namespace
void gemv_set_pdl(bool on) { g_gemv_pdl = on; }
bool gemv_pdl() { return g_gemv_pdl.load(); }
namespace {
std::atomic<int> g_gemv_bulk_grid_cap{0};
}  // namespace
void gemv_set_bulk_grid_cap(int blocks) { g_gemv_bulk_grid_cap = blocks > 0 ? blocks : 0; }
int gemv_bulk_grid_cap() { return g_gemv_bulk_grid_cap.load(); }
namespace {
// Per host thread: the model's branch scope sets it on the thread that launches (captures).
thread_local int t_gemv_bulk_per_sm = 0;
}  // namespace
void gemv_set_bulk_blocks_per_sm(int blocks_per_sm) { t_gemv_bulk_per_sm = blocks_per_sm > 0 ? blocks_per_sm : 0; }
int gemv_bulk_blocks_per_sm() { return t_gemv_bulk_per_sm; }
namespace mma {
// Defined in smxx_linear_mma.cuh, instantiated in smxx_linear_mma_<format>.cu.
template <WFormat F>
cudaError_t launch(const LinearArgs& a, cudaStream_t stream);
}  // namespace mma
namespace tiled {
cudaError_t launch(const LinearArgs& a, cudaStream_t stream);  // smxx_linear_tiled.cu
}  // namespace tiled

namespace {
bool pow2(int64_t v) { return v > 0 && (v & (v - 1)) == 0; }
bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
}  // namespace

bool linear_gemv_eligible(const LinearArgs& a) {
  const WeightArgs& w = a.w;
  const int per_vec = w.format == WFormat::kF32 ? 4 : (w.format == WFormat::kBF16 || w.format == WFormat::kF16) ? 8
                      : w.format == WFormat::kE4M3 ? 16 : 32;
  const int64_t row_bytes = w.format == WFormat::kE2M1 ? w.cols / 2 : w.cols * (per_vec == 4 ? 4 : per_vec == 8 ? 2 : 1);
  const bool strided_ok = a.x_stride == 0 || (a.x_stride >= w.cols && a.x_stride % 4 == 0);
  const bool groups_ok = a.x_group_rows == 0 || (a.x_group_rows > 0 && a.x_group_rows % 4 == 0 &&
                                                 a.x_group_step >= 0 && a.x_group_step % 4 == 0);
  return a.n <= 8 && w.cols % per_vec == 0 && row_bytes % 16 == 0 && w.cols % 4 == 0 && aligned16(w.data) &&
         aligned16(a.x) && strided_ok && groups_ok &&
         (w.scale_format == SFormat::kNone || (pow2(w.block_cols) && w.block_cols >= per_vec));
}

bool linear_mma_eligible(const LinearArgs& a) {
  const WeightArgs& w = a.w;
  const bool quant = w.format == WFormat::kE4M3 || w.format == WFormat::kE2M1;
  // Power-of-two scales keep the bf16 weights exact; 16 staged elements share one.
  const bool scale_ok = quant ? (w.scale_format == SFormat::kNone ||
                                 (w.scale_format == SFormat::kE8M0 && pow2(w.block_cols) && w.block_cols >= 16))
                              : (w.format == WFormat::kBF16 && w.scale_format == SFormat::kNone);
  return scale_ok && w.cols % 32 == 0 && aligned16(w.data) && aligned16(a.x);
}

namespace gemv_tc {
// smxx_linear_gemv_tc.cu: the tensor-core gemv kernel (GemvKind::kTensor).
cudaError_t launch(const LinearArgs& a, cudaStream_t stream);
}  // namespace gemv_tc
namespace gemv_tmap {
// smxx_linear_gemv_tmap.cu: the tensor-map TMA kernel (GemvKind::kTmap: the process-wide A/B
// settings; launch_auto: kAuto's fixed configuration, where gemv_tmap_auto_takes).
cudaError_t launch(const LinearArgs& a, cudaStream_t stream);
cudaError_t launch_auto(const LinearArgs& a, cudaStream_t stream);
cudaError_t launch_pair_auto(const LinearArgs* calls, cudaStream_t stream);  // where gemv_tmap_pair_takes
}  // namespace gemv_tmap

namespace {
// The kernels that take a call list all or none (a multi launch keeps one kind of arithmetic) and
// launch once per call: whether `takes` holds for every call; if so the launches' first error.
template <class Takes, class Launch>
bool each_if_all(const LinearArgs* calls, int count, Takes takes, Launch launch, cudaError_t* err) {
  for (int k = 0; k < count; ++k)
    if (!takes(calls[k])) return false;
  *err = cudaSuccess;
  for (int k = 0; k < count && *err == cudaSuccess; ++k) *err = launch(calls[k]);
  return true;
}

cudaError_t gemv_dispatch(const LinearArgs* calls, int count, cudaStream_t stream) {
  GemvKind kind = gemv_kind();
  cudaError_t e = cudaSuccess;
  const auto tmap = [&](const LinearArgs& c) { return gemv_tmap::launch(c, stream); };
  const auto tmap_auto = [&](const LinearArgs& c) { return gemv_tmap::launch_auto(c, stream); };
  const auto tc = [&](const LinearArgs& c) { return gemv_tc::launch(c, stream); };
  if (kind == GemvKind::kTmap) {
    // Every call it takes, or what kAuto runs (launch_n reads kTmap as kAuto).
    if (each_if_all(calls, count, gemv_tmap_wants, tmap, &e)) return e;
    kind = GemvKind::kAuto;
  }
  // One token: two weights of one x in one launch of the tensor-map kernel (NOTES 47, where its mode
  // is on), the big FP8 weights on it alone.
  if (kind == GemvKind::kAuto && calls[0].n == 1 && count == 2 && gemv_tmap_pair_takes(calls, count))
    return gemv_tmap::launch_pair_auto(calls, stream);
  if (kind == GemvKind::kAuto && calls[0].n == 1 && each_if_all(calls, count, gemv_tmap_auto_takes, tmap_auto, &e))
    return e;
  if (kind == GemvKind::kTensor || (kind == GemvKind::kAuto && calls[0].n >= 2 && !calls[0].one_kernel)) {
    if (each_if_all(calls, count, linear_gemv_tc_eligible, tc, &e)) return e;
  }
  switch (calls[0].w.format) {
    case WFormat::kF32: return gemv::launch<WFormat::kF32>(calls, count, stream);
    case WFormat::kBF16: return gemv::launch<WFormat::kBF16>(calls, count, stream);
    case WFormat::kF16: return gemv::launch<WFormat::kF16>(calls, count, stream);
    case WFormat::kE4M3: return gemv::launch<WFormat::kE4M3>(calls, count, stream);
    case WFormat::kE2M1: return gemv::launch<WFormat::kE2M1>(calls, count, stream);
  }
  return cudaErrorInvalidValue;
}
}  // namespace

cudaError_t linear_gemv_multi(const LinearArgs* calls, int count, cudaStream_t stream) {
  if (calls == nullptr || count < 1 || count > kGemvMaxMulti) return cudaErrorInvalidValue;
  for (int k = 0; k < count; ++k) {
    const LinearArgs& a = calls[k];
    if (!weight_args_valid(a.w) || a.n < 1 || a.row0 < 0 || a.num_rows < 1 || a.row0 + a.num_rows > a.w.rows ||
        a.x == nullptr || a.y == nullptr || !linear_gemv_eligible(a))
      return cudaErrorInvalidValue;
    if (a.path != LinearPath::kAuto && a.path != LinearPath::kGemv) return cudaErrorInvalidValue;
    if (a.w.format != calls[0].w.format || a.n != calls[0].n || a.bf16_x != calls[0].bf16_x)
      return cudaErrorInvalidValue;
  }
  return gemv_dispatch(calls, count, stream);
}

cudaError_t linear(const LinearArgs& a, cudaStream_t stream) {
  if (!weight_args_valid(a.w) || a.n < 0 || a.row0 < 0 || a.num_rows < 0 || a.row0 + a.num_rows > a.w.rows)
    return cudaErrorInvalidValue;
  if (a.n == 0 || a.num_rows == 0) return cudaSuccess;
  if (a.x == nullptr || a.y == nullptr) return cudaErrorInvalidValue;
  LinearPath path = a.path;
  if (a.x_stride != 0 || a.x_group_rows != 0) {  // strided / grouped x: the gemv path only
    if (path != LinearPath::kAuto && path != LinearPath::kGemv) return cudaErrorInvalidValue;
    path = LinearPath::kGemv;
  }
  if (path == LinearPath::kAuto)
    path = linear_gemv_eligible(a) ? LinearPath::kGemv : linear_mma_eligible(a) ? LinearPath::kMma : LinearPath::kTiled;
  switch (path) {
    case LinearPath::kGemv:
      if (!linear_gemv_eligible(a)) return cudaErrorInvalidValue;
      return gemv_dispatch(&a, 1, stream);
    case LinearPath::kMma:
      if (!linear_mma_eligible(a)) return cudaErrorInvalidValue;
      if (a.w.format == WFormat::kE4M3) return mma::launch<WFormat::kE4M3>(a, stream);
      if (a.w.format == WFormat::kE2M1) return mma::launch<WFormat::kE2M1>(a, stream);
      return mma::launch<WFormat::kBF16>(a, stream);
    default:
      return tiled::launch(a, stream);
  }
}

int cached_device_attribute(cudaDeviceAttr attr, int fallback) {
  static std::mutex mu;
  static std::map<std::pair<int, int>, int> cache;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return fallback;
  const auto key = std::make_pair(device, int(attr));
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int v = 0;
  if (cudaDeviceGetAttribute(&v, attr, device) != cudaSuccess || v <= 0) v = fallback;
  return cache[key] = v;
}

}  // namespace deepinfer::kernels
