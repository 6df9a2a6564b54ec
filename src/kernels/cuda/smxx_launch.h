// A kernel launch's extended attributes (cudaLaunchKernelEx, cudaOccupancyMaxActiveClusters) filled
// in one place: a thread-block cluster and programmatic dependent launch (PDL, smxx_common.cuh's
// pdl_wait / pdl_trigger). The config points into the object, which must outlive the call.
#pragma once

#include <cuda_runtime.h>

namespace deepinfer::kernels {

struct LaunchAttrs {
  cudaLaunchAttribute at[2];
  unsigned n = 0;
  // A cluster of x * y CTAs (added as asked, a cluster of one included).
  LaunchAttrs& cluster(unsigned x, unsigned y = 1) {
    at[n].id = cudaLaunchAttributeClusterDimension;
    at[n].val.clusterDim.x = x;
    at[n].val.clusterDim.y = y;
    at[n].val.clusterDim.z = 1;
    ++n;
    return *this;
  }
  // The launch may begin while the kernel before it in the stream drains (where on).
  LaunchAttrs& pdl(bool on) {
    if (on) {
      at[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      at[n].val.programmaticStreamSerializationAllowed = 1;
      ++n;
    }
    return *this;
  }
  void apply(cudaLaunchConfig_t& cfg) {
    cfg.attrs = n > 0 ? at : nullptr;
    cfg.numAttrs = n;
  }
};

}  // namespace deepinfer::kernels
