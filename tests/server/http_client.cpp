#include "http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>

namespace deepinfer::testing {

RawClient::RawClient(int port, int timeout_ms) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(uint16_t(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) close();
}

RawClient::~RawClient() { close(); }

void RawClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool RawClient::send(const std::string& bytes) {
  size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size()) {
    ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += size_t(n);
  }
  return fd_ >= 0;
}

bool RawClient::fill() {
  if (fd_ < 0) return false;
  char tmp[16384];
  ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
  if (n <= 0) return false;
  buf_.append(tmp, size_t(n));
  return true;
}

bool RawClient::read_line(std::string& line) {
  size_t pos;
  while ((pos = buf_.find("\r\n")) == std::string::npos)
    if (!fill()) return false;
  line = buf_.substr(0, pos);
  buf_.erase(0, pos + 2);
  return true;
}

RawResponse RawClient::read_response(bool skip_continue) {
  RawResponse r;
  std::string line;
  for (;;) {
    if (!read_line(line) || line.size() < 12) return r;
    r.status = std::atoi(line.c_str() + 9);
    r.headers.clear();
    while (read_line(line) && !line.empty()) {
      auto colon = line.find(':');
      std::string name = line.substr(0, colon);
      for (char& c : name) c = char(std::tolower(static_cast<unsigned char>(c)));
      std::string value = colon == std::string::npos ? "" : line.substr(colon + 1);
      while (!value.empty() && value[0] == ' ') value.erase(0, 1);
      r.headers[name] = value;
    }
    if (!(skip_continue && r.status == 100)) break;
  }
  if (r.headers.count("content-length")) {
    size_t len = std::strtoull(r.headers["content-length"].c_str(), nullptr, 10);
    while (buf_.size() < len)
      if (!fill()) break;
    r.body = buf_.substr(0, len);
    buf_.erase(0, std::min(len, buf_.size()));
  } else if (r.headers["transfer-encoding"] == "chunked") {
    r.chunked = true;
    for (;;) {
      if (!read_line(line)) break;
      size_t len = std::strtoull(line.c_str(), nullptr, 16);
      while (buf_.size() < len + 2)
        if (!fill()) return r;
      r.body += buf_.substr(0, len);
      buf_.erase(0, len + 2);
      if (len == 0) break;
    }
  } else if (r.status != 100) {
    while (fill()) {
    }
    r.body = buf_;
    buf_.clear();
  }
  return r;
}

bool RawClient::closed_by_peer() {
  if (fd_ < 0) return true;
  char c;
  ssize_t n = ::recv(fd_, &c, 1, 0);
  if (n > 0) buf_.push_back(c);
  return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK);
}

std::string http_post(const std::string& path, const std::string& body, const std::string& extra_headers) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}

}  // namespace deepinfer::testing
