// The HTTP/1.1 transport: Boost.Beast on a small pool of io threads. Each
// connection is a Session on its own strand; a request is handed to the Router,
// whose answer may come later (generation) from the engine's callback thread via
// post(). Thousands of idle or streaming connections cost memory, not threads.
//
// Robustness: bodies over max_body_bytes get 413 (before reading them when the
// length is declared), oversized headers 431, malformed HTTP 400; a connection
// that stalls while sending a request, idles too long, or stops reading a
// response is closed. While a response is pending the session keeps a read
// posted, so a client that disconnects is noticed at once and its request aborted.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;
}

namespace deepinfer::server {

class Router;

struct HttpLimits {
  size_t max_body_bytes = size_t(8) << 20;
  size_t max_header_bytes = size_t(64) << 10;
  std::chrono::milliseconds request_timeout{30'000};  // to receive a request once it has started
  std::chrono::milliseconds idle_timeout{75'000};     // keep-alive wait for the next request
  std::chrono::milliseconds write_timeout{60'000};    // for the client to take each write
  int64_t max_connections = 8192;                     // beyond: 503 and close
};

class HttpServer {
 public:
  HttpServer(boost::asio::io_context& io, Router& router, HttpLimits limits);
  ~HttpServer();

  // Binds and listens (port 0: any free port). InputError when that fails.
  void listen(const std::string& host, uint16_t port);
  uint16_t port() const;
  // Closes the listening socket; open connections carry on. Thread-safe.
  void stop_accepting();
  int64_t open_connections() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace deepinfer::server
