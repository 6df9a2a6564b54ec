#include "runtime/cuda/device_memory.h"

#include <algorithm>

#include "ops/cuda/cuda_check.h"

namespace deepinfer::runtime::cuda {

namespace {
constexpr size_t kAlign = 256;
size_t align_up(size_t v) { return (v + kAlign - 1) / kAlign * kAlign; }
}  // namespace

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes > 0) CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), bytes));
}

DeviceBuffer::~DeviceBuffer() {
  if (p_) cudaFree(p_);  // no throw from a destructor
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (p_) cudaFree(p_);
    p_ = o.p_, bytes_ = o.bytes_;
    o.p_ = nullptr, o.bytes_ = 0;
  }
  return *this;
}

MappedHostBuffer::~MappedHostBuffer() { release(); }

MappedHostBuffer& MappedHostBuffer::operator=(MappedHostBuffer&& o) noexcept {
  if (this != &o) {
    release();
    h_ = o.h_, d_ = o.d_, bytes_ = o.bytes_;
    o.h_ = o.d_ = nullptr, o.bytes_ = 0;
  }
  return *this;
}

void MappedHostBuffer::release() {
  if (h_) cudaFreeHost(h_);  // no throw from a destructor
  h_ = d_ = nullptr;
  bytes_ = 0;
}

cudaError_t MappedHostBuffer::alloc(size_t bytes) {
  release();
  if (bytes == 0) return cudaSuccess;
  void* h = nullptr;
  cudaError_t e = cudaHostAlloc(&h, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  if (e != cudaSuccess) {
    cudaGetLastError();  // an allocation failure is not sticky; leave no error behind
    return e;
  }
  void* d = nullptr;
  e = cudaHostGetDevicePointer(&d, h, 0);
  if (e != cudaSuccess) {
    cudaFreeHost(h);
    cudaGetLastError();
    return e;
  }
  h_ = static_cast<uint8_t*>(h), d_ = static_cast<uint8_t*>(d), bytes_ = bytes;
  return cudaSuccess;
}

DeviceArena::DeviceArena(size_t initial_bytes) { chunks_.emplace_back(align_up(std::max<size_t>(initial_bytes, kAlign))); }

void* DeviceArena::alloc_bytes(size_t bytes) {
  bytes = align_up(std::max<size_t>(bytes, 1));
  while (off_ + bytes > chunks_[cur_].size()) {
    if (cur_ + 1 == chunks_.size()) {
      // Grow by at least the current capacity so repeated shortfalls stay few.
      chunks_.emplace_back(std::max(bytes, capacity()));
      ++growths_;
    }
    ++cur_;
    off_ = 0;
  }
  void* p = chunks_[cur_].data() + off_;
  off_ += bytes;
  size_t used = off_;
  for (size_t i = 0; i < cur_; ++i) used += chunks_[i].size();
  high_ = std::max(high_, used);
  return p;
}

size_t DeviceArena::capacity() const {
  size_t s = 0;
  for (const auto& c : chunks_) s += c.size();
  return s;
}

HostStage::HostStage(size_t bytes, cudaStream_t stream) : bytes_(bytes), stream_(stream) {
  CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), bytes_));
}

HostStage::~HostStage() {
  if (p_) cudaFreeHost(p_);
}

void* HostStage::alloc_bytes(size_t bytes) {
  bytes = (std::max<size_t>(bytes, 1) + 15) / 16 * 16;
  if (off_ + bytes > bytes_) {
    CUDA_CHECK(cudaStreamSynchronize(stream_));  // every upload from this area has been read
    off_ = 0;
    if (bytes > bytes_) {
      CUDA_CHECK(cudaFreeHost(p_));
      p_ = nullptr;
      bytes_ = std::max(bytes, 2 * bytes_);
      CUDA_CHECK(cudaMallocHost(reinterpret_cast<void**>(&p_), bytes_));
    }
  }
  void* p = p_ + off_;
  off_ += bytes;
  return p;
}

}  // namespace deepinfer::runtime::cuda
