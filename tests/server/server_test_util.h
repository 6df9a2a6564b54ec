// Test harness for the API layer without sockets: a ResponseChannel that records
// what the router and jobs send, and a Router wired to a FakeBackend.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fake_engine.h"
#include "server/router.h"

namespace deepinfer::testing {

using nlohmann::json;

// The channel's recursive mutex plays the connection's strand: handle() and every
// posted function run while holding it.
class RecordingChannel : public server::ResponseChannel {
 public:
  void post(std::function<void()> fn) override;
  void respond(server::HttpResponse response) override;
  void begin_stream(int status, const std::string& content_type) override;
  void write(std::string bytes) override;
  void end_stream() override;
  void on_close(std::function<void()> fn) override { close_fn_ = std::move(fn); }
  bool closed() const override { return closed_; }

  // The client goes away: runs the close handler as the transport would.
  void disconnect();
  // Waits for the exchange to end; false on timeout.
  bool wait_done(std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));
  // Waits until the body holds at least n bytes (a stream has started producing).
  bool wait_body(size_t n, std::chrono::milliseconds timeout = std::chrono::milliseconds(5000));

  std::recursive_mutex mu;
  int status = 0;
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool streamed = false, done = false;

 private:
  std::condition_variable_any cv_;
  std::function<void()> close_fn_;
  bool closed_ = false;
};

struct Reply {
  int status = 0;
  std::string content_type, body;
  std::vector<std::pair<std::string, std::string>> headers;
  bool streamed = false;
  json json_body() const { return json::parse(body); }
  // The JSON payloads of a stream's "data:" events; the last is "[DONE]" as a string.
  std::vector<json> events() const;
  std::string header(const std::string& name) const;
};

class ServerFixture {
 public:
  explicit ServerFixture(server::RouterOptions options = {}, int64_t max_model_len = 256,
                         std::chrono::milliseconds step_delay = {});
  ~ServerFixture();

  Reply call(const std::string& method, const std::string& path, const std::string& body = "",
             std::vector<std::pair<std::string, std::string>> headers = {});
  Reply post(const std::string& path, const json& body) { return call("POST", path, body.dump()); }
  // Starts a request and returns its channel without waiting.
  std::shared_ptr<RecordingChannel> start(const std::string& method, const std::string& path, const std::string& body);

  server::Router router;
  FakeBackend* backend = nullptr;  // owned below

 private:
  std::unique_ptr<FakeBackend> owned_;
};

}  // namespace deepinfer::testing
