// AsyncEngine: the step loop on its own thread. Two locks, always taken in this
// order: engine_mu serialises every call into the (single-threaded) Engine and is
// held by the loop thread only; mu guards the callback table and the submit/abort
// queues. Callers never wait for a running step: submit validates the request with
// Engine::validate_request (thread-safe) and queues it, and the loop adds queued
// requests before its next step. An HTTP thread that blocked on a step would stall
// every other connection it serves. Callbacks run on the loop thread with no lock held.
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/check.h"
#include "deepinfer/engine.h"

namespace deepinfer {

struct AsyncEngine::Impl {
  struct Entry {
    Callback callback;
    std::vector<bool> done;  // per sample
    int64_t unfinished = 0;
  };
  std::mutex engine_mu, mu;
  std::condition_variable cv;
  std::map<std::string, Entry> callbacks;  // one per unfinished request
  std::deque<std::string> aborts;
  std::deque<GenerateRequest> pending;  // submitted, not yet given to the engine
  int64_t next_id = 0;
  EngineStats stats;
  bool stop = false;
  std::thread loop;
};

AsyncEngine::AsyncEngine(std::unique_ptr<Engine> engine) : engine_(std::move(engine)), impl_(new Impl) {
  impl_->loop = std::thread([this] {
    Impl& im = *impl_;
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(im.mu);
        im.cv.wait(lk, [&] { return im.stop || !im.aborts.empty() || !im.pending.empty() || !im.callbacks.empty(); });
        if (im.stop) return;
      }
      std::vector<RequestOutput> outs;
      {
        std::lock_guard<std::mutex> eg(im.engine_mu);
        std::deque<std::string> aborts;
        std::deque<GenerateRequest> pending;
        {
          std::lock_guard<std::mutex> lk(im.mu);
          aborts.swap(im.aborts);
          pending.swap(im.pending);
        }
        for (const GenerateRequest& r : pending) {
          try {
            engine_->add_request(r);
          } catch (const std::exception&) {
            // validate_request passed, so only what it cannot see (an id the engine
            // already knows) lands here: the request ends as aborted.
            for (int64_t i = 0; i < r.params.n; ++i) {
              RequestOutput o;
              o.request_id = r.request_id;
              o.index = i;
              o.finished = true;
              o.finish_reason = "abort";
              outs.push_back(std::move(o));
            }
          }
        }
        for (const auto& id : aborts) engine_->abort_request(id);
        for (auto& o : engine_->step()) outs.push_back(std::move(o));
        std::lock_guard<std::mutex> lk(im.mu);
        im.stats = engine_->stats();
      }
      std::vector<std::pair<Callback, RequestOutput>> calls;
      {
        std::lock_guard<std::mutex> lk(im.mu);
        for (auto& o : outs) {
          auto it = im.callbacks.find(o.request_id);
          if (it == im.callbacks.end()) continue;
          Impl::Entry& e = it->second;
          const bool last_sample = o.finished && size_t(o.index) < e.done.size() && !e.done[o.index] &&
                                   e.unfinished == 1;
          if (o.finished && size_t(o.index) < e.done.size() && !e.done[o.index]) {
            e.done[o.index] = true;
            --e.unfinished;
          }
          calls.emplace_back(e.callback, std::move(o));
          if (last_sample) im.callbacks.erase(it);
        }
      }
      for (auto& [cb, o] : calls) cb(o);
    }
  });
}

AsyncEngine::~AsyncEngine() {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->stop = true;
  }
  impl_->cv.notify_all();
  impl_->loop.join();
  for (auto& [id, e] : impl_->callbacks) {
    for (size_t i = 0; i < e.done.size(); ++i) {
      if (e.done[i]) continue;
      RequestOutput o;
      o.request_id = id;
      o.index = int64_t(i);
      o.finished = true;
      o.finish_reason = "abort";
      e.callback(o);
    }
  }
}

std::string AsyncEngine::submit(const GenerateRequest& request, Callback callback) {
  engine_->validate_request(request);  // throws InputError before anything is registered
  GenerateRequest r = request;
  std::string id;
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    if (r.request_id.empty()) r.request_id = "async-" + std::to_string(impl_->next_id++);
    id = r.request_id;
    DI_CHECK_INPUT(!impl_->callbacks.count(id), "request id '", id, "' is already in use");
    Impl::Entry& e = impl_->callbacks[id];
    e.callback = std::move(callback);
    e.done.assign(size_t(r.params.n), false);
    e.unfinished = r.params.n;
    impl_->pending.push_back(std::move(r));
  }
  impl_->cv.notify_all();
  return id;
}

void AsyncEngine::abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lk(impl_->mu);
    impl_->aborts.push_back(request_id);
  }
  impl_->cv.notify_all();
}

EngineStats AsyncEngine::stats() const {
  std::lock_guard<std::mutex> lk(impl_->mu);
  return impl_->stats;
}

}  // namespace deepinfer
