// How much host memory the process may still take: what sizes the CPU runner's history
// pool when no block count is given, as free device memory sizes the GPU's.
#pragma once

#include <cstdint>

namespace deepinfer {

// MemAvailable from /proc/meminfo (free memory plus what the kernel can reclaim, the
// figure `free` reports as available); where that cannot be read, the free physical
// pages. Bytes; 0 when neither is known.
int64_t host_memory_available();

}  // namespace deepinfer
