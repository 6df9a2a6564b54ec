#include "common/parallel.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace deepinfer {
namespace {

class Pool {
 public:
  explicit Pool(int n) {
    for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { loop(i); });
    size_ = n;
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : workers_) t.join();
  }
  int size() const { return size_; }

  void run(int parts, const std::function<void(int)>& job) {
    std::unique_lock<std::mutex> run_lock(run_mu_);  // one parallel region at a time
    {
      std::lock_guard<std::mutex> lk(mu_);
      job_ = &job;
      parts_ = parts;
      next_ = 1;  // part 0 runs on the caller
      pending_ = parts - 1;
      ++generation_;
    }
    cv_.notify_all();
    job(0);
    work_until_empty();
    std::unique_lock<std::mutex> lk(mu_);
    done_cv_.wait(lk, [&] { return pending_ == 0; });
    job_ = nullptr;
  }

 private:
  void work_until_empty() {
    for (;;) {
      int part;
      const std::function<void(int)>* job;
      {
        std::lock_guard<std::mutex> lk(mu_);
        if (job_ == nullptr || next_ >= parts_) return;
        part = next_++;
        job = job_;
      }
      (*job)(part);
      std::lock_guard<std::mutex> lk(mu_);
      if (--pending_ == 0) done_cv_.notify_all();
    }
  }
  void loop(int) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || (generation_ != seen && job_ != nullptr && next_ < parts_); });
        if (stop_) return;
        seen = generation_;
      }
      work_until_empty();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mu_, run_mu_;
  std::condition_variable cv_, done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  int parts_ = 0, next_ = 0, pending_ = 0, size_ = 1;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

int configured_threads() {
  if (const char* env = std::getenv("DEEPINFER_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return std::min(n, 256);
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Pool& pool() {
  static Pool p(configured_threads());
  return p;
}

}  // namespace

int num_threads() { return pool().size(); }

thread_local bool t_in_parallel = false;

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn, int64_t min_grain) {
  if (n <= 0) return;
  // A nested region runs serially on the calling thread (the pool runs one region at a time).
  if (t_in_parallel) {
    fn(0, n);
    return;
  }
  int64_t grain = std::max<int64_t>(1, min_grain);
  int parts = int(std::min<int64_t>(pool().size() * 4, (n + grain - 1) / grain));
  if (parts <= 1) {
    fn(0, n);
    return;
  }
  pool().run(parts, [&](int p) {
    bool was = t_in_parallel;
    t_in_parallel = true;
    int64_t b = n * p / parts, e = n * (p + 1) / parts;
    if (b < e) fn(b, e);
    t_in_parallel = was;
  });
}

}  // namespace deepinfer
