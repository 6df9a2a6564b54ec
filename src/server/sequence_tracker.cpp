#include "server/sequence_tracker.h"

#include "common/check.h"

namespace deepinfer::server {

bool SequenceTracker::try_reserve(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reserved_ + n > capacity_) return false;
  reserved_ += n;
  return true;
}

void SequenceTracker::release(int64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  reserved_ -= n;
  DI_CHECK(reserved_ >= 0);
}

void SequenceTracker::attach(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  ids_.insert(id);
}

void SequenceTracker::finish(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ids_.erase(id)) --reserved_;
  DI_CHECK(reserved_ >= 0);
}

int64_t SequenceTracker::in_flight() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reserved_;
}

std::vector<std::string> SequenceTracker::running_ids() const {
  std::lock_guard<std::mutex> lock(mu_);
  return {ids_.begin(), ids_.end()};
}

}  // namespace deepinfer::server
