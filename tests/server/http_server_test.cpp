// The Beast transport over real loopback sockets: keep-alive, chunked SSE,
// pipelining, limits (413, 431, 400, timeouts, connection cap) and
// disconnect-abort.
#include <gtest/gtest.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>

#include "http_client.h"
#include "server/http_server.h"
#include "server_test_util.h"

namespace deepinfer::testing {
namespace {

namespace net = boost::asio;

class HttpFixture {
 public:
  explicit HttpFixture(server::HttpLimits limits = small_limits(), std::chrono::milliseconds step_delay = {})
      : router({}),
        work(net::make_work_guard(io)),
        http(io, router, limits),
        backend(std::make_unique<FakeEngine>(256), step_delay) {
    router.set_backend(&backend);
    http.listen("127.0.0.1", 0);
    port = http.port();
    for (int i = 0; i < 2; ++i) threads.emplace_back([this] { io.run(); });
  }
  ~HttpFixture() {
    work.reset();
    io.stop();
    for (auto& t : threads) t.join();
  }

  static server::HttpLimits small_limits() {
    server::HttpLimits l;
    l.max_body_bytes = 64 << 10;
    l.max_header_bytes = 8 << 10;
    l.request_timeout = std::chrono::milliseconds(300);
    l.idle_timeout = std::chrono::milliseconds(2000);
    l.write_timeout = std::chrono::milliseconds(2000);
    l.max_connections = 16;
    return l;
  }

  // Polls cond for up to 3 s.
  template <class F>
  static bool eventually(F cond) {
    for (int i = 0; i < 300; ++i) {
      if (cond()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return cond();
  }

  // Destruction order matters: the backend's last callbacks post into the io
  // context, which must still exist; the router outlives the sessions.
  server::Router router;
  net::io_context io;
  net::executor_work_guard<net::io_context::executor_type> work;
  server::HttpServer http;
  FakeBackend backend;
  std::vector<std::thread> threads;
  int port = 0;
};

const std::string kSay = R"({"prompt": "[[say:hello]]", "max_tokens": 20})";
const std::string kSayStream = R"({"prompt": "[[say:hello]]", "max_tokens": 20, "stream": true})";

TEST(HttpServer, KeepAliveAndPipelining) {
  HttpFixture fx;
  RawClient c(fx.port);
  ASSERT_TRUE(c.send(http_post("/v1/completions", kSay)));
  RawResponse r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["connection"], "keep-alive");
  EXPECT_EQ(json::parse(r.body)["choices"][0]["text"], "hello");
  // Two requests in one write: answered in order on the same connection.
  ASSERT_TRUE(c.send(http_post("/v1/completions", kSay) + "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(json::parse(c.read_response().body)["choices"][0]["text"], "hello");
  EXPECT_EQ(c.read_response().status, 200);
  ASSERT_TRUE(c.send("GET /v1/models HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_TRUE(c.closed_by_peer());
}

TEST(HttpServer, ChunkedEventStream) {
  HttpFixture fx;
  RawClient c(fx.port);
  ASSERT_TRUE(c.send(http_post("/v1/completions", kSayStream)));
  RawResponse r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_TRUE(r.chunked);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream");
  EXPECT_EQ(r.headers["cache-control"], "no-cache");
  EXPECT_EQ(r.body.rfind("data: {", 0), 0u);
  EXPECT_EQ(r.body.substr(r.body.size() - 14), "data: [DONE]\n\n");
  // The connection stays usable after a stream.
  ASSERT_TRUE(c.send(http_post("/v1/completions", kSay)));
  EXPECT_EQ(c.read_response().status, 200);
}

TEST(HttpServer, Http10StreamEndsWithClose) {
  HttpFixture fx;
  RawClient c(fx.port);
  ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.0\r\nContent-Length: " + std::to_string(kSayStream.size()) +
                     "\r\n\r\n" + kSayStream));
  RawResponse r = c.read_response();
  EXPECT_EQ(r.status, 200);
  EXPECT_FALSE(r.chunked);
  EXPECT_NE(r.body.find("data: [DONE]\n\n"), std::string::npos);
}

TEST(HttpServer, BodyLimits) {
  HttpFixture fx;
  {  // declared too large: refused from the headers alone
    RawClient c(fx.port);
    ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 9000000\r\n\r\n"));
    RawResponse r = c.read_response();
    EXPECT_EQ(r.status, 413);
    EXPECT_EQ(json::parse(r.body)["error"]["type"], "invalid_request_error");
    EXPECT_TRUE(c.closed_by_peer());
  }
  {  // chunked, growing past the limit
    RawClient c(fx.port);
    std::string chunk(32 << 10, 'x');
    std::string req = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 3; ++i) req += "8000\r\n" + chunk + "\r\n";
    c.send(req);
    EXPECT_EQ(c.read_response().status, 413);
  }
  {  // a body just under the limit is parsed (and rejected as JSON, not as size)
    RawClient c(fx.port);
    ASSERT_TRUE(c.send(http_post("/v1/completions", std::string(60 << 10, ' '))));
    EXPECT_EQ(c.read_response().status, 400);
  }
}

TEST(HttpServer, MalformedHttp) {
  HttpFixture fx;
  {
    RawClient c(fx.port);
    ASSERT_TRUE(c.send("GARBAGE\r\n\r\n"));
    RawResponse r = c.read_response();
    EXPECT_EQ(r.status, 400);
    EXPECT_TRUE(json::parse(r.body).contains("error"));
  }
  {
    RawClient c(fx.port);
    ASSERT_TRUE(c.send("GET /health HTTP/1.1\r\nX-Big: " + std::string(10 << 10, 'a') + "\r\n\r\n"));
    EXPECT_EQ(c.read_response().status, 431);
  }
  {
    RawClient c(fx.port);
    ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nContent-Length: 2\r\nContent-Encoding: gzip\r\n\r\n{}"));
    EXPECT_EQ(c.read_response().status, 415);
  }
  {  // a request that stalls half-way is dropped after request_timeout
    RawClient c(fx.port);
    ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro"));
    EXPECT_TRUE(c.closed_by_peer());
  }
}

TEST(HttpServer, ExpectContinue) {
  HttpFixture fx;
  RawClient c(fx.port);
  ASSERT_TRUE(c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: " +
                     std::to_string(kSay.size()) + "\r\n\r\n"));
  RawResponse r = c.read_response(/*skip_continue=*/false);
  EXPECT_EQ(r.status, 100);
  ASSERT_TRUE(c.send(kSay));
  EXPECT_EQ(c.read_response().status, 200);
}

TEST(HttpServer, DisconnectAbortsRequest) {
  HttpFixture fx(HttpFixture::small_limits(), std::chrono::milliseconds(10));
  for (const char* body : {R"({"prompt": "a", "max_tokens": 200, "stream": true})",
                           R"({"prompt": "a", "max_tokens": 200})"}) {
    const int64_t aborts = fx.backend.num_aborts();
    {
      RawClient c(fx.port);
      ASSERT_TRUE(c.send(http_post("/v1/completions", body)));
      ASSERT_TRUE(HttpFixture::eventually([&] { return fx.router.tracker().in_flight() == 1; }));
    }  // closes the socket mid-generation
    EXPECT_TRUE(HttpFixture::eventually([&] { return fx.backend.num_aborts() == aborts + 1; })) << body;
    EXPECT_TRUE(HttpFixture::eventually([&] { return fx.router.tracker().in_flight() == 0; }));
  }
  EXPECT_TRUE(HttpFixture::eventually([&] { return fx.http.open_connections() == 0; }));
}

TEST(HttpServer, ConnectionCap) {
  server::HttpLimits limits = HttpFixture::small_limits();
  limits.max_connections = 2;
  HttpFixture fx(limits);
  RawClient a(fx.port), b(fx.port);
  ASSERT_TRUE(HttpFixture::eventually([&] { return fx.http.open_connections() == 2; }));
  RawClient c(fx.port);
  RawResponse r = c.read_response();
  EXPECT_EQ(r.status, 503);
  ASSERT_TRUE(a.send("GET /health HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(a.read_response().status, 200);
}

TEST(HttpServer, ManyConcurrentStreamsFewThreads) {
  HttpFixture fx(HttpFixture::small_limits(), std::chrono::milliseconds(1));
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < 12; ++i) {
    clients.push_back(std::make_unique<RawClient>(fx.port));
    ASSERT_TRUE(clients.back()->send(http_post("/v1/completions", R"({"prompt": "a", "max_tokens": 30, "stream": true})")));
  }
  for (auto& c : clients) {
    RawResponse r = c->read_response();
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.body.find("data: [DONE]"), std::string::npos);
  }
}

}  // namespace
}  // namespace deepinfer::testing
