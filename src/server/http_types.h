// The seam between the transport (http_server.cpp, Boost.Beast) and the API logic
// (router, jobs). Nothing here knows about sockets, so the whole OpenAI layer is
// unit-tested with a recording channel instead of a network.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace deepinfer::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path with query, as sent
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;

  // The first header with this lower-case name, or "" when absent.
  const std::string& header(const std::string& name) const;
  // The target without its query string.
  std::string path() const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers (Retry-After, Allow, ...)
  std::string body;
};

// One request/response exchange on a connection.
//
// Threading: the transport calls Router::handle on the channel's executor (a strand
// per connection). respond / begin_stream / write / end_stream / on_close must be
// called on that executor: from inside handle or from a function given to post().
// post() itself is thread-safe; the engine's callback thread uses it. Once the peer
// has gone (closed() is true) the send calls do nothing.
class ResponseChannel {
 public:
  virtual ~ResponseChannel() = default;
  virtual void post(std::function<void()> fn) = 0;
  // A complete response; ends the exchange.
  virtual void respond(HttpResponse response) = 0;
  // Starts a streamed response (chunked transfer encoding); then write() any number
  // of times and end_stream() exactly once.
  virtual void begin_stream(int status, const std::string& content_type) = 0;
  virtual void write(std::string bytes) = 0;
  virtual void end_stream() = 0;
  // fn runs on the executor if the peer disconnects before the exchange ends (also
  // when a write fails or times out). Set at most once per exchange.
  virtual void on_close(std::function<void()> fn) = 0;
  virtual bool closed() const = 0;
};

}  // namespace deepinfer::server
