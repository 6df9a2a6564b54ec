// Error checks of the CUDA backend's host wrappers. A failure throws
// std::runtime_error "file:line: what" so that a test reports it and moves on;
// the wrappers stay free of engine symbols (deepinfer_cuda is linked into the core
// library, not the other way round).
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace deepinfer::ops::cuda {

[[noreturn]] inline void cuda_fail(const char* file, int line, const std::string& what) {
  throw std::runtime_error(std::string(file) + ":" + std::to_string(line) + ": " + what);
}

}  // namespace deepinfer::ops::cuda

// Checks a cudaError_t-returning call (runtime API or a kernel launcher).
#define CUDA_CHECK(expr)                                                                               \
  do {                                                                                                 \
    const cudaError_t cuda_check_err_ = (expr);                                                        \
    if (cuda_check_err_ != cudaSuccess)                                                                \
      ::deepinfer::ops::cuda::cuda_fail(__FILE__, __LINE__, std::string(#expr) + " failed: " +         \
                                                                cudaGetErrorName(cuda_check_err_) + " (" + \
                                                                cudaGetErrorString(cuda_check_err_) + ")"); \
  } while (0)

// Validates an op's arguments before anything is enqueued.
#define CUDA_OP_CHECK(cond, msg)                                                                  \
  do {                                                                                            \
    if (!(cond)) ::deepinfer::ops::cuda::cuda_fail(__FILE__, __LINE__, std::string(msg) + " (" #cond ")"); \
  } while (0)
