// Host-side facts about the current device that the launchers size their grids from.
#pragma once

#include <cuda_runtime.h>

namespace deepinfer::kernels {

// cudaDeviceGetAttribute of the current device, cached per (device, attribute): launchers ask on
// every call, and one query costs more than a small kernel's launch. `fallback` when the query
// fails or reads <= 0 (defined in smxx_linear.cu).
int cached_device_attribute(cudaDeviceAttr attr, int fallback);
inline int device_sm_count() { return cached_device_attribute(cudaDevAttrMultiProcessorCount, 1); }

}  // namespace deepinfer::kernels
