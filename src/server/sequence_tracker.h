// Admission control and bookkeeping for engine sequences (one per prompt x choice).
// The waiting queue is bounded by refusing new work (429) once the sequences in
// flight reach the capacity, rather than by letting the engine's queue grow; the
// tracked ids let shutdown abort whatever is still running after the grace period.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace deepinfer::server {

class SequenceTracker {
 public:
  explicit SequenceTracker(int64_t capacity) : capacity_(capacity) {}

  // Reserves room for n sequences; false (and nothing reserved) when they do not fit.
  bool try_reserve(int64_t n);
  // Releases n reservations that never became sequences.
  void release(int64_t n);
  // A reserved sequence was submitted under this id / has finished (frees its slot).
  void attach(const std::string& id);
  void finish(const std::string& id);

  int64_t in_flight() const;  // reserved, submitted or not
  int64_t capacity() const { return capacity_; }
  std::vector<std::string> running_ids() const;

 private:
  const int64_t capacity_;
  mutable std::mutex mu_;
  int64_t reserved_ = 0;
  std::set<std::string> ids_;
};

}  // namespace deepinfer::server
