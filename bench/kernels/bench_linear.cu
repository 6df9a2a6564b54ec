// Kernel benchmark of linear (kernels/cuda/smxx_linear) at DeepSeek-V4.1-Flash
// shapes: FP8 block-scaled attention projections and FP4 expert matrices, decode
// batch 1..8 (gemv path), 16..256 (mma path) and 64 on the SIMT tiled fallback. Reports time per call, achieved
// bandwidth over the bytes a call must move (weights + scales + x + y, each once),
// and that as a share of 4.27 TB/s and of a device-to-device copy measured here.
//
// Timing: each case rotates over enough weight copies to total >= 1 GiB (so L2,
// 60 MB, holds none of them), captures 20 calls in a CUDA graph, replays it 15
// times and takes the median. Weights are random codes (never zeros).
//   bench_linear [--quick]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/cuda/smxx_linear.cuh"

using namespace deepinfer::kernels;

#define CHECK(x)                                                                              \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

namespace {

constexpr double kPeakGBs = 4270.0;  // H200 copy bandwidth seen on these machines (KINDS.md)

__device__ uint32_t mix32(uint64_t i, uint32_t seed) {
  uint64_t z = i * 0x9e3779b97f4a7c15ull + seed;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return uint32_t(z ^ (z >> 31));
}

// mode 0: random bytes & mask; 1: e8m0 scales in [120, 127]; 2: fp32 N-ish(0, 1)
__global__ void fill(uint8_t* p, size_t n, int mode, uint8_t mask, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    const uint32_t r = mix32(i, seed);
    if (mode == 0) p[i] = uint8_t(r) & mask;
    else if (mode == 1) p[i] = uint8_t(120 + (r & 7));
    else reinterpret_cast<float*>(p)[i] = (float(r & 0xffff) / 32768.0f - 1.0f);
  }
}

void fill_bytes(void* p, size_t n, int mode, uint8_t mask, uint32_t seed) {
  fill<<<1024, 256>>>(static_cast<uint8_t*>(p), n, mode, mask, seed);
  CHECK(cudaGetLastError());
}

double copy_bandwidth() {
  const size_t bytes = size_t(2) << 30;
  void *a, *b;
  CHECK(cudaMalloc(&a, bytes));
  CHECK(cudaMalloc(&b, bytes));
  fill_bytes(a, bytes, 0, 0xff, 7);
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int i = 0; i < 6; ++i) {
    CHECK(cudaEventRecord(e0));
    CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice));
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float t;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (i > 0) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  CHECK(cudaFree(a));
  CHECK(cudaFree(b));
  return 2.0 * double(bytes) / (ms[ms.size() / 2] * 1e-3) / 1e9;
}

struct Case {
  const char* name;
  WFormat fmt;
  int64_t rows, cols, n;
  LinearPath path;
};

struct Result {
  double us, gbs, tflops;
};

Result run_case(const Case& c) {
  const bool fp4 = c.fmt == WFormat::kE2M1;
  const int64_t wbytes = fp4 ? c.rows * c.cols / 2 : c.rows * c.cols * (c.fmt == WFormat::kE4M3 ? 1 : 2);
  const int64_t brow = fp4 ? 1 : 32, bcol = 32;
  const int64_t scols = (c.cols + bcol - 1) / bcol, srows = (c.rows + brow - 1) / brow;
  const int64_t sbytes = c.fmt == WFormat::kBF16 ? 0 : srows * scols;
  const int copies = int(std::max<int64_t>(2, (int64_t(1) << 30) / (wbytes + sbytes)));
  std::vector<uint8_t*> w(copies), s(copies);
  for (int i = 0; i < copies; ++i) {
    CHECK(cudaMalloc(&w[i], wbytes));
    // e4m3: mask 0xf7 never forms the NaN codes 0x7f / 0xff; bf16: keep exponents sane.
    fill_bytes(w[i], wbytes, 0, c.fmt == WFormat::kE4M3 ? 0xf7 : c.fmt == WFormat::kBF16 ? 0xbf : 0xff, 11 + i);
    s[i] = nullptr;
    if (sbytes) {
      CHECK(cudaMalloc(&s[i], sbytes));
      fill_bytes(s[i], sbytes, 1, 0, 101 + i);
    }
  }
  float *x, *y;
  CHECK(cudaMalloc(&x, c.n * c.cols * 4));
  CHECK(cudaMalloc(&y, c.n * c.rows * 4));
  fill_bytes(x, c.n * c.cols, 2, 0, 5);

  auto args = [&](int i) {
    LinearArgs a;
    a.x = x;
    a.y = y;
    a.n = c.n;
    a.w.format = c.fmt;
    a.w.data = w[i];
    a.w.rows = c.rows;
    a.w.cols = c.cols;
    if (sbytes) {
      a.w.scale_format = SFormat::kE8M0;
      a.w.scale = s[i];
      a.w.scale_cols = scols;
      a.w.block_rows = brow;
      a.w.block_cols = bcol;
    }
    a.row0 = 0;
    a.num_rows = c.rows;
    a.path = c.path;
    return a;
  };
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  for (int i = 0; i < copies; ++i) CHECK(linear(args(i), st));  // warm-up, and checks the arguments
  CHECK(cudaStreamSynchronize(st));

  constexpr int kCalls = 20;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < kCalls; ++k) CHECK(linear(args(k % copies), st));
  CHECK(cudaStreamEndCapture(st, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  std::vector<float> ms;
  for (int r = 0; r < 16; ++r) {
    CHECK(cudaEventRecord(e0, st));
    CHECK(cudaGraphLaunch(exec, st));
    CHECK(cudaEventRecord(e1, st));
    CHECK(cudaEventSynchronize(e1));
    float t;
    CHECK(cudaEventElapsedTime(&t, e0, e1));
    if (r > 0) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double us = ms[ms.size() / 2] * 1e3 / kCalls;
  const double bytes = double(wbytes + sbytes) + 4.0 * double(c.n) * double(c.cols + c.rows);
  Result res{us, bytes / (us * 1e-6) / 1e9, 2.0 * c.n * c.rows * c.cols / (us * 1e-6) / 1e12};

  CHECK(cudaGraphExecDestroy(exec));
  CHECK(cudaGraphDestroy(graph));
  CHECK(cudaEventDestroy(e0));
  CHECK(cudaEventDestroy(e1));
  CHECK(cudaStreamDestroy(st));
  for (int i = 0; i < copies; ++i) {
    CHECK(cudaFree(w[i]));
    if (s[i]) CHECK(cudaFree(s[i]));
  }
  CHECK(cudaFree(x));
  CHECK(cudaFree(y));
  return res;
}

const char* path_name(LinearPath p) {
  return p == LinearPath::kGemv ? "gemv" : p == LinearPath::kMma ? "mma" : p == LinearPath::kTiled ? "tiled" : "auto";
}
const char* fmt_name(WFormat f) {
  return f == WFormat::kE4M3 ? "fp8" : f == WFormat::kE2M1 ? "fp4" : f == WFormat::kBF16 ? "bf16" : "other";
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const double copy = copy_bandwidth();
  std::printf("device: %s, %d SMs, L2 %d MB; d2d copy %.0f GB/s (read + write)\n", prop.name,
              prop.multiProcessorCount, prop.l2CacheSize >> 20, copy);
  const LinearPath G = LinearPath::kGemv, M = LinearPath::kMma, T = LinearPath::kTiled;
  std::vector<Case> cases = {
      {"wq_a", WFormat::kE4M3, 1280, 5120, 1, G},       {"wq_a", WFormat::kE4M3, 1280, 5120, 8, G},
      {"wq_a", WFormat::kE4M3, 1280, 5120, 16, M},      {"wq_a", WFormat::kE4M3, 1280, 5120, 64, M},
      {"wq_a", WFormat::kE4M3, 1280, 5120, 64, T},      {"wq_b", WFormat::kE4M3, 32768, 1280, 1, G},
      {"wq_b", WFormat::kE4M3, 32768, 1280, 4, G},      {"wq_b", WFormat::kE4M3, 32768, 1280, 8, G},
      {"wq_b", WFormat::kE4M3, 32768, 1280, 16, M},     {"wq_b", WFormat::kE4M3, 32768, 1280, 64, M},
      {"wq_b", WFormat::kE4M3, 32768, 1280, 64, T},     {"wq_b", WFormat::kE4M3, 32768, 1280, 256, M},
      {"wo_b", WFormat::kE4M3, 5120, 8192, 1, G},       {"wo_b", WFormat::kE4M3, 5120, 8192, 64, M},
      {"expert_w1", WFormat::kE2M1, 2304, 5120, 1, G},  {"expert_w1", WFormat::kE2M1, 2304, 5120, 8, G},
      {"expert_w1", WFormat::kE2M1, 2304, 5120, 64, M}, {"expert_w2", WFormat::kE2M1, 5120, 2304, 1, G},
      {"expert_w2", WFormat::kE2M1, 5120, 2304, 8, G},  {"gate", WFormat::kBF16, 384, 5120, 1, G},
  };
  if (quick) cases.resize(2);
  std::printf("%-10s %-4s %8s %6s %5s %10s %9s %8s %8s %8s\n", "matrix", "fmt", "rows", "cols", "n", "path", "us",
              "GB/s", "%4.27TB", "TFLOP/s");
  for (const Case& c : cases) {
    const Result r = run_case(c);
    std::printf("%-10s %-4s %8lld %6lld %5lld %10s %9.2f %8.0f %7.1f%% %8.2f\n", c.name, fmt_name(c.fmt),
                (long long)c.rows, (long long)c.cols, (long long)c.n, path_name(c.path), r.us, r.gbs,
                100.0 * r.gbs / kPeakGBs, r.tflops);
  }
  std::printf("copy ceiling measured: %.0f GB/s (%.1f%% of 4.27 TB/s)\n", copy, 100.0 * copy / kPeakGBs);
  return 0;
}
