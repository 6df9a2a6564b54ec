// Harness of the CUDA-vs-CPU op tests: device buffers, random inputs, and the case
// type that every op contributes. A case builds fresh random inputs from the rng it
// is given, runs the CPU oracle on host copies and the CUDA op on device copies,
// and returns both outputs; the one test body (ops_cuda_test.cpp) compares them
// with the tolerance its family has in the one table there.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/numeric.h"
#include "io/safetensors.h"
#include "ops/linear.h"

namespace deepinfer::testing_cuda {

inline void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// A device copy of a host vector. Outputs start poisoned (all bytes 0xff: NaN for
// floats, -1 for integers) so an element the kernel never wrote cannot pass.
template <class T>
class Dev {
 public:
  explicit Dev(const std::vector<T>& h) : n_(h.size()) {
    alloc();
    if (n_) check_cuda(cudaMemcpy(p_, h.data(), bytes(), cudaMemcpyHostToDevice), "upload");
  }
  explicit Dev(size_t n) : n_(n) {
    alloc();
    if (n_) check_cuda(cudaMemset(p_, 0xff, bytes()), "poison");
  }
  ~Dev() { cudaFree(p_); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  T* get() const { return p_; }
  std::vector<T> host() const {
    check_cuda(cudaDeviceSynchronize(), "kernel");
    std::vector<T> h(n_);
    if (n_) check_cuda(cudaMemcpy(h.data(), p_, bytes(), cudaMemcpyDeviceToHost), "download");
    return h;
  }

 private:
  void alloc() { check_cuda(cudaMalloc(reinterpret_cast<void**>(&p_), bytes() ? bytes() : 1), "cudaMalloc"); }
  size_t bytes() const { return n_ * sizeof(T); }
  T* p_ = nullptr;
  size_t n_ = 0;
};

using Rng = std::mt19937_64;

inline std::vector<float> randn(Rng& rng, size_t n, float sd = 1.0f) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
inline std::vector<float> uniform(Rng& rng, size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}
inline int64_t randint(Rng& rng, int64_t lo, int64_t hi) {  // [lo, hi]
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// A weight in host memory plus its device twin; ref() views either copy.
struct TestWeight {
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  std::vector<uint8_t> data, scale;
  DType scale_dtype = DType::F8_E8M0;
  int64_t scale_cols = 0, block_rows = 1, block_cols = 1;
  std::unique_ptr<Dev<uint8_t>> d_data, d_scale;

  ops::WeightRef ref(bool device) const {
    ops::WeightRef w;
    w.dtype = dtype;
    w.data = device ? d_data->get() : data.data();
    w.rows = rows;
    w.cols = cols;
    if (!scale.empty()) {
      w.scale = device ? d_scale->get() : scale.data();
      w.scale_dtype = scale_dtype;
      w.scale_cols = scale_cols;
      w.block_rows = block_rows;
      w.block_cols = block_cols;
    }
    return w;
  }
};

// Weight kinds the tests draw: the formats of the V4.1 checkpoint and a few others.
enum class WKind { kF32, kBF16, kF16, kFp8E8m0, kFp8F32Scale, kFp4E8m0 };
const char* wkind_name(WKind k);
// Random weight [rows, cols] whose dequantized values have roughly the given
// standard deviation. FP8 has 32x32 e8m0 blocks (128x128 fp32 blocks for
// kFp8F32Scale), FP4 1x32 e8m0 blocks, as in the released checkpoint.
std::unique_ptr<TestWeight> random_weight(Rng& rng, WKind kind, int64_t rows, int64_t cols, float sd);

// Outputs of one run of a case: CPU and CUDA results side by side.
struct FloatOut {
  std::string label;
  std::vector<float> cpu, gpu;
};
struct IntOut {
  std::string label;
  std::vector<int64_t> cpu, gpu;
};
struct Outputs {
  std::vector<FloatOut> floats;
  std::vector<IntOut> ints;
};

struct OpCase {
  std::string name;    // unique, gtest-safe
  std::string family;  // key into the tolerance table
  std::function<Outputs(Rng&)> run;
};

// Contributed by the cases_*.cpp files.
std::vector<OpCase> elementwise_cases();
std::vector<OpCase> hyper_connection_cases();
std::vector<OpCase> attention_cases();
std::vector<OpCase> linear_cases();
std::vector<OpCase> linear_path_cases();
std::vector<OpCase> linear_gemv_cases();
std::vector<OpCase> linear_bf16_cases();
std::vector<OpCase> linear_fp8_cases();
std::vector<OpCase> moe_cases();
std::vector<OpCase> indexer_cases();
std::vector<OpCase> fused_cases();
std::vector<OpCase> former_cases();
std::vector<OpCase> selection_cases();

}  // namespace deepinfer::testing_cuda
