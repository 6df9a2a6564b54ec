// Device memory of the CUDA runner (DESIGN 2.8): one-shot buffers for what lives as
// long as the engine (weights, state slots, the paged history pool), a bump arena for
// one step's activations, and a pinned staging area for host-to-device uploads.
//
// All work runs on one stream, so memory handed out by the arena may be reused by the
// next allocation after a rewind without waiting: every later kernel is ordered after
// every earlier one. The staging area is different (the host writes it): it is
// recycled only after the stream has drained.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace deepinfer::runtime::cuda {

// cudaMalloc'ed bytes, freed on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_), bytes_(o.bytes_) { o.p_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  uint8_t* data() const { return p_; }
  size_t size() const { return bytes_; }

 private:
  uint8_t* p_ = nullptr;
  size_t bytes_ = 0;
};

// Mapped pinned host memory (cudaHostAlloc, mapped + portable), freed on destruction:
// weights that do not fit on the device (the Engram tables). Kernels read it over the
// bus through device_data(), the same address under UVA; nothing is copied. alloc()
// returns the CUDA error instead of throwing, so the caller can word the failure.
class MappedHostBuffer {
 public:
  MappedHostBuffer() = default;
  ~MappedHostBuffer();
  MappedHostBuffer(MappedHostBuffer&& o) noexcept : h_(o.h_), d_(o.d_), bytes_(o.bytes_) {
    o.h_ = o.d_ = nullptr, o.bytes_ = 0;
  }
  MappedHostBuffer& operator=(MappedHostBuffer&& o) noexcept;
  MappedHostBuffer(const MappedHostBuffer&) = delete;
  MappedHostBuffer& operator=(const MappedHostBuffer&) = delete;
  cudaError_t alloc(size_t bytes);  // replaces what was held; on failure holds nothing
  uint8_t* host_data() const { return h_; }
  uint8_t* device_data() const { return d_; }
  size_t size() const { return bytes_; }

 private:
  void release();
  uint8_t* h_ = nullptr;
  uint8_t* d_ = nullptr;
  size_t bytes_ = 0;
};

// Bump allocator over device chunks. The first chunk is planned up front; when a
// step needs more, another chunk is added (and kept), so a larger step than planned
// still runs and `growths()` tells the plan was short.
class DeviceArena {
 public:
  explicit DeviceArena(size_t initial_bytes);
  struct Mark {
    size_t chunk = 0, offset = 0;
  };
  void* alloc_bytes(size_t bytes);
  template <class T>
  T* alloc(int64_t count) {
    return static_cast<T*>(alloc_bytes(sizeof(T) * size_t(count > 0 ? count : 1)));
  }
  Mark mark() const { return {cur_, off_}; }
  void rewind(Mark m) { cur_ = m.chunk, off_ = m.offset; }
  void reset() { rewind({}); }
  size_t capacity() const;
  size_t high_water() const { return high_; }
  int64_t growths() const { return growths_; }

 private:
  std::vector<DeviceBuffer> chunks_;
  size_t cur_ = 0, off_ = 0, high_ = 0, used_before_ = 0;
  int64_t growths_ = 0;
};

// Pinned host memory for uploads, bump-allocated; when full it waits for the stream
// (so every earlier upload has been read) and starts over, growing if one request
// is larger than the whole area.
class HostStage {
 public:
  HostStage(size_t bytes, cudaStream_t stream);
  ~HostStage();
  HostStage(const HostStage&) = delete;
  HostStage& operator=(const HostStage&) = delete;
  void* alloc_bytes(size_t bytes);
  void reset() { off_ = 0; }  // only when the stream has drained

 private:
  uint8_t* p_ = nullptr;
  size_t bytes_ = 0, off_ = 0;
  cudaStream_t stream_;
};

}  // namespace deepinfer::runtime::cuda
