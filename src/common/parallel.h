// A small persistent thread pool with one primitive, parallel_for, used by the CPU
// backend. Work is split into contiguous ranges so results never depend on the
// number of threads (each output element is computed by exactly one thread with
// the same sequential arithmetic), which keeps the CPU oracle deterministic.
#pragma once

#include <cstdint>
#include <functional>

namespace deepinfer {

// Calls fn(begin, end) on disjoint ranges covering [0, n). Blocks until done.
// min_grain: smallest range worth a thread.
void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_grain = 1);

// Number of worker threads (DEEPINFER_THREADS or the hardware concurrency).
int num_threads();

}  // namespace deepinfer
