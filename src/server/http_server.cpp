#include "server/http_server.h"

#include <deque>
#include <optional>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "common/check.h"
#include "server/api_error.h"
#include "server/router.h"

namespace deepinfer::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

std::string to_lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// What sessions share with the server. Owned jointly: sessions queued in a
// stopped io_context are destroyed with it, after the HttpServer.
struct Shared {
  Shared(Router& router, HttpLimits limits) : router(router), limits(limits) {}
  Router& router;
  const HttpLimits limits;
  std::atomic<int64_t> connections{0};
};

class Session : public ResponseChannel, public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, std::shared_ptr<Shared> shared)
      : stream_(std::move(socket)),
        idle_timer_(stream_.get_executor()),
        shared_(std::move(shared)),
        router_(shared_->router),
        limits_(shared_->limits) {}
  ~Session() override { shared_->connections--; }

  void start(bool reject) {
    // Stream events are small writes; Nagle's algorithm would hold each for an ACK.
    beast::error_code ignored;
    stream_.socket().set_option(tcp::no_delay(true), ignored);
    net::dispatch(stream_.get_executor(), [self = shared_from_this(), reject] {
      if (reject) self->fail_and_close(503, "Too many open connections; retry later.");
      else self->read_header();
    });
  }

  // ResponseChannel ----------------------------------------------------------

  void post(std::function<void()> fn) override {
    net::post(stream_.get_executor(), [self = shared_from_this(), fn = std::move(fn)] { fn(); });
  }

  void respond(HttpResponse r) override {
    if (!exchange_open_ || closed_ || head_sent_) return;
    std::string out = status_line(r.status);
    out += "Content-Type: " + r.content_type + "\r\nContent-Length: " + std::to_string(r.body.size()) + "\r\n";
    for (const auto& [name, value] : r.headers) out += name + ": " + value + "\r\n";
    out += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    out += r.body;
    head_sent_ = true;
    queue(std::move(out));
    end_exchange();
  }

  void begin_stream(int status, const std::string& content_type) override {
    if (!exchange_open_ || closed_ || head_sent_) return;
    // HTTP/1.0 has no chunked encoding: the stream ends when the connection closes.
    chunked_ = version_ >= 11;
    if (!chunked_) keep_alive_ = false;
    std::string out = status_line(status);
    out += "Content-Type: " + content_type + "\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n";
    if (chunked_) out += "Transfer-Encoding: chunked\r\n";
    out += keep_alive_ ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    head_sent_ = true;
    queue(std::move(out));
  }

  void write(std::string bytes) override {
    if (!exchange_open_ || closed_ || !head_sent_ || bytes.empty()) return;
    if (chunked_) {
      char size[20];
      std::snprintf(size, sizeof(size), "%zx\r\n", bytes.size());
      bytes.insert(0, size);
      bytes += "\r\n";
    }
    queue(std::move(bytes));
  }

  void end_stream() override {
    if (!exchange_open_ || closed_ || !head_sent_) return;
    if (chunked_) queue("0\r\n\r\n");
    end_exchange();
  }

  void on_close(std::function<void()> fn) override { close_handler_ = std::move(fn); }
  bool closed() const override { return closed_; }

 private:
  std::string status_line(int status) const {
    return std::string(version_ >= 11 ? "HTTP/1.1 " : "HTTP/1.0 ") + std::to_string(status) + " " +
           status_reason(status) + "\r\n";
  }

  // Reading a request -------------------------------------------------------

  void read_header() {
    response_done_ = false;
    parser_.emplace();
    parser_->header_limit(uint32_t(limits_.max_header_bytes));
    parser_->body_limit(limits_.max_body_bytes);
    // The first byte may take the keep-alive time; the rest must follow promptly.
    stream_.expires_after(buffer_.size() ? limits_.request_timeout : limits_.idle_timeout);
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    auto& msg = parser_->get();
    version_ = msg.version();
    if (auto length = parser_->content_length(); length && *length > limits_.max_body_bytes)
      return fail_and_close(413, str_cat("Request body of ", *length, " bytes is over the limit of ",
                                         limits_.max_body_bytes, " bytes."));
    if (auto enc = msg.find(http::field::content_encoding);
        enc != msg.end() && !beast::iequals(enc->value(), "identity"))
      return fail_and_close(415, "Content-Encoding is not supported; send the body uncompressed.");
    if (beast::iequals(msg[http::field::expect], "100-continue")) queue("HTTP/1.1 100 Continue\r\n\r\n");
    stream_.expires_after(limits_.request_timeout);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    auto msg = parser_->release();
    HttpRequest req;
    req.method = std::string(msg.method_string());
    req.target = std::string(msg.target());
    for (const auto& field : msg) req.headers.emplace_back(to_lower(std::string(field.name_string())), field.value());
    req.body = std::move(msg.body());
    keep_alive_ = msg.keep_alive() && !router_.draining();
    exchange_open_ = true;
    head_sent_ = false;
    stream_.expires_never();
    router_.handle(std::move(req), shared_from_this());
    if (exchange_open_ && !closed_) watch();
  }

  void on_read_error(beast::error_code ec) {
    if (ec == http::error::body_limit) return fail_and_close(413, "Request body is over the size limit.");
    if (ec == http::error::header_limit) return fail_and_close(431, "Request headers are too large.");
    // The peer closed, timed out or reset: nothing to answer.
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::connection_reset || ec == net::error::operation_aborted || ec == http::error::partial_message)
      return close();
    fail_and_close(400, str_cat("Malformed HTTP request: ", ec.message(), "."));
  }

  // Answers outside the router (the request could not be read) and hangs up.
  void fail_and_close(int status, const std::string& message) {
    keep_alive_ = false;
    exchange_open_ = true;
    head_sent_ = false;
    if (version_ < 10) version_ = 11;
    HttpResponse r = error_response(ApiError(status, message));
    router_.metrics().count_response("", status);
    respond(std::move(r));
  }

  // Noticing a disconnect while the answer is pending -----------------------

  void watch() {
    // Bytes already buffered are a pipelined request: the client is there, and a
    // read now could wait forever for data that has already arrived.
    if (watching_ || closed_ || buffer_.size() > 0) return;
    watching_ = true;
    stream_.expires_never();
    stream_.async_read_some(buffer_.prepare(4096), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->on_watch(ec, n);
    });
  }

  void on_watch(beast::error_code ec, size_t n) {
    watching_ = false;
    idle_timer_.cancel();
    buffer_.commit(n);
    if (ec) return peer_gone();
    if (exchange_open_) return watch();
    if (response_done_ && !writing_) next_exchange();
  }

  // Writing -------------------------------------------------------------------

  void queue(std::string bytes) {
    if (closed_) return;
    out_.push_back(std::move(bytes));
    if (!writing_) write_next();
  }

  void write_next() {
    current_.clear();
    while (!out_.empty()) {  // coalesce small SSE events into one write
      current_ += out_.front();
      out_.pop_front();
    }
    writing_ = true;
    stream_.expires_after(limits_.write_timeout);
    net::async_write(stream_, net::buffer(current_),
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    if (ec) return peer_gone();
    if (!out_.empty()) return write_next();
    if (response_done_) after_response();
  }

  void end_exchange() {
    exchange_open_ = false;
    response_done_ = true;
    close_handler_ = nullptr;
    if (!writing_) after_response();  // else on_write comes here
  }

  // The response is fully written.
  void after_response() {
    if (!watching_) return next_exchange();
    // The disconnect watch still pending doubles as the wait for the next request
    // (on_watch continues); bound that wait.
    beast::error_code ignored;
    if (!keep_alive_) stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    idle_timer_.expires_after(keep_alive_ ? limits_.idle_timeout : std::chrono::milliseconds(2000));
    idle_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && self->watching_ && self->response_done_) self->close();
    });
  }

  void next_exchange() {
    if (closed_) return;
    if (!keep_alive_ || router_.draining()) return linger();
    read_header();
  }

  // Half-closes and drains what the client still sends (say, the rest of a body
  // refused with 413) before closing: closing with unread data would reset the
  // connection and the client could lose the response.
  void linger() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    lingered_ = 0;
    stream_.expires_after(std::chrono::seconds(2));
    drain();
  }

  void drain() {
    stream_.async_read_some(net::buffer(scratch_), [self = shared_from_this()](beast::error_code ec, size_t n) {
      self->lingered_ += n;
      if (ec || self->lingered_ > (size_t(16) << 20)) return self->close();
      self->drain();
    });
  }

  void peer_gone() {
    const bool pending = exchange_open_;
    close();
    if (pending && close_handler_) {
      auto fn = std::move(close_handler_);
      close_handler_ = nullptr;
      fn();
    }
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    out_.clear();
    idle_timer_.cancel();
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

  beast::tcp_stream stream_;
  net::steady_timer idle_timer_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::shared_ptr<Shared> shared_;
  Router& router_;
  const HttpLimits& limits_;

  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool exchange_open_ = false;  // a request is being answered
  bool head_sent_ = false;
  bool chunked_ = false;
  bool closed_ = false;
  bool watching_ = false;
  bool writing_ = false;
  bool response_done_ = false;  // answered; the next request is read once writes drain
  size_t lingered_ = 0;
  char scratch_[4096];
  std::deque<std::string> out_;
  std::string current_;  // the bytes of the write in flight
  std::function<void()> close_handler_;
};

}  // namespace

struct HttpServer::Impl : std::enable_shared_from_this<HttpServer::Impl> {
  Impl(net::io_context& io, Router& router, HttpLimits limits)
      : io(io),
        shared(std::make_shared<Shared>(router, limits)),
        acceptor(net::make_strand(io)),
        backoff(acceptor.get_executor()) {}

  void accept() {
    acceptor.async_accept(net::make_strand(io), [self = shared_from_this()](beast::error_code ec, tcp::socket s) {
      if (ec == net::error::operation_aborted || !self->acceptor.is_open()) return;
      if (ec) return self->retry_later();  // out of descriptors and the like: back off
      const bool reject = ++self->shared->connections > self->shared->limits.max_connections;
      std::make_shared<Session>(std::move(s), self->shared)->start(reject);
      self->accept();
    });
  }

  void retry_later() {
    backoff.expires_after(std::chrono::milliseconds(50));
    backoff.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec && self->acceptor.is_open()) self->accept();
    });
  }

  net::io_context& io;
  std::shared_ptr<Shared> shared;
  tcp::acceptor acceptor;
  net::steady_timer backoff;
};

HttpServer::HttpServer(net::io_context& io, Router& router, HttpLimits limits)
    : impl_(std::make_shared<Impl>(io, router, limits)) {}

HttpServer::~HttpServer() = default;

void HttpServer::listen(const std::string& host, uint16_t port) {
  beast::error_code ec;
  auto address = net::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
  DI_CHECK_INPUT(!ec, "--host '", host, "' is not an IP address");
  tcp::endpoint endpoint(address, port);
  auto& a = impl_->acceptor;
  a.open(endpoint.protocol(), ec);
  if (!ec) a.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) a.bind(endpoint, ec);
  if (!ec) a.listen(net::socket_base::max_listen_connections, ec);
  DI_CHECK_INPUT(!ec, "cannot listen on ", host, ":", port, ": ", ec.message());
  impl_->accept();
}

uint16_t HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::stop_accepting() {
  net::post(impl_->acceptor.get_executor(), [impl = impl_] {
    beast::error_code ignored;
    impl->acceptor.close(ignored);
  });
}

int64_t HttpServer::open_connections() const { return impl_->shared->connections.load(); }

}  // namespace deepinfer::server
