// A minimal blocking HTTP/1.1 client over a loopback socket, for transport tests
// that need byte-level control (pipelining, partial requests, abrupt closes).
// Every read has a timeout, so a server bug fails the test instead of hanging it.
#pragma once

#include <map>
#include <string>

namespace deepinfer::testing {

struct RawResponse {
  int status = 0;  // 0: no response (connection closed or timed out)
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;  // de-chunked
  bool chunked = false;
};

class RawClient {
 public:
  explicit RawClient(int port, int timeout_ms = 5000);
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool send(const std::string& bytes);  // false when the peer is gone
  // Reads one response (after any 100 Continue when skip_continue).
  RawResponse read_response(bool skip_continue = true);
  // True when the server has closed the connection (EOF within the timeout).
  bool closed_by_peer();
  void close();

 private:
  bool fill();  // reads more into buf_; false on EOF, error or timeout
  bool read_line(std::string& line);

  int fd_ = -1;
  std::string buf_;
};

// "POST path" with a JSON body, as one request's bytes.
std::string http_post(const std::string& path, const std::string& body, const std::string& extra_headers = "");

}  // namespace deepinfer::testing
