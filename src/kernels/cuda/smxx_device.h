// Host-side facts about the current device that the launchers size their grids from.
#pragma once

#include <cuda_runtime.h>

namespace deepinfer::kernels {

// cudaDeviceGetAttribute of the current device, cached per (device, attribute): launchers ask on
// every call, and one query costs more than a small kernel's launch. `fallback` when the query
// fails or reads <= 0 (defined in smxx_linear.cu).
int cached_device_attribute(cudaDeviceAttr attr, int fallback);
inline int device_sm_count() { return cached_device_attribute(cudaDevAttrMultiProcessorCount, 1); }
// Whether the current device runs the binary's sm_90a code (wgmma): compute capability 9.0 exactly
// (sm_90a code runs on no other). The kernels that have it fall back or fail cleanly elsewhere.
inline bool device_runs_sm90a() {
  return cached_device_attribute(cudaDevAttrComputeCapabilityMajor, 0) == 9 &&
         cached_device_attribute(cudaDevAttrComputeCapabilityMinor, 0) == 0;  // minor 0 reads as the fallback 0
}

}  // namespace deepinfer::kernels
