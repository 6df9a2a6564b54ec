// libFuzzer target for the OpenAI API layer: any request body (and, for the model
// route, any path) handed to the Router, with the scripted FakeEngine behind it the
// way the server tests run it. The first byte picks the endpoint and whether the
// request carries the API key; the rest is the body.
//
// What must hold for every input: the exchange ends (no hang), with a status below
// 500 (a 5xx means an internal error escaped: the client's input should have been
// refused with a 4xx), an error body that is OpenAI-shaped JSON, and no
// "malformed request:" answer, which is the router's catch-all for a JSON access that
// field validation should have checked first. A sanitizer report or any other
// escape is a bug too.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>

#include <nlohmann/json.hpp>

#include "../server/fake_engine.h"
#include "server/router.h"

namespace {

using deepinfer::server::HttpRequest;
using deepinfer::server::HttpResponse;

// Records one exchange; the mutex plays the connection's strand (the router and the
// backend's callbacks only touch the channel through post() or from inside handle()).
class Channel : public deepinfer::server::ResponseChannel {
 public:
  void post(std::function<void()> fn) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    fn();
    cv_.notify_all();
  }
  void respond(HttpResponse r) override {
    status = r.status;
    body = std::move(r.body);
    done = true;
    cv_.notify_all();
  }
  void begin_stream(int s, const std::string&) override {
    status = s;
    streamed = true;
  }
  void write(std::string bytes) override {
    if (!streamed) fail("write() before begin_stream()");
    body += bytes;
  }
  void end_stream() override {
    done = true;
    cv_.notify_all();
  }
  void on_close(std::function<void()>) override {}
  bool closed() const override { return false; }

  bool wait_done(std::chrono::milliseconds timeout) {
    std::unique_lock<std::recursive_mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return done; });
  }
  std::recursive_mutex& mu() { return mu_; }

  [[noreturn]] static void fail(const std::string& why) {
    std::fprintf(stderr, "server_fuzz: %s\n", why.c_str());
    __builtin_trap();
  }

  int status = 0;
  std::string body;
  bool streamed = false, done = false;

 private:
  std::recursive_mutex mu_;
  std::condition_variable_any cv_;
};

struct Server {
  Server() : router(options()) {
    backend = std::make_unique<deepinfer::testing::FakeBackend>(std::make_unique<deepinfer::testing::FakeEngine>(2048));
    router.set_backend(backend.get());
  }
  static deepinfer::server::RouterOptions options() {
    deepinfer::server::RouterOptions o;
    o.api_key = "fuzz-key";
    return o;
  }
  deepinfer::server::Router router;
  std::unique_ptr<deepinfer::testing::FakeBackend> backend;
};

void check_error_body(int status, const std::string& body) {
  const auto j = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("error") || !j["error"].is_object())
    Channel::fail("status " + std::to_string(status) + " without an OpenAI error body: " + body.substr(0, 300));
  const auto& e = j["error"];
  if (!e.contains("message") || !e["message"].is_string() || !e.contains("type") || !e["type"].is_string())
    Channel::fail("error body without message/type: " + body.substr(0, 300));
  if (e["message"].get<std::string>().rfind("malformed request:", 0) == 0)
    Channel::fail("a JSON access escaped field validation: " + body.substr(0, 300));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Server* server = new Server();  // one server for the run, as in production
  if (size < 1) return 0;
  const uint8_t selector = data[0];
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);

  HttpRequest req;
  req.method = "POST";
  switch (selector % 5) {
    case 0: req.target = "/v1/completions"; break;
    case 1: req.target = "/v1/chat/completions"; break;
    case 2: req.target = "/tokenize"; break;
    case 3: req.target = "/detokenize"; break;
    default:
      req.method = "GET";
      req.target = "/v1/models/" + rest;
      break;
  }
  if (req.method == "POST") {
    req.body = rest;
    req.headers.emplace_back("content-type", "application/json");
  }
  if ((selector & 0x80) == 0) req.headers.emplace_back("authorization", "Bearer fuzz-key");

  auto ch = std::make_shared<Channel>();
  {
    std::lock_guard<std::recursive_mutex> lock(ch->mu());
    server->router.handle(req, ch);
  }
  // The fake engine generates at most 2048 tokens, instantly; 20 s is a hang.
  if (!ch->wait_done(std::chrono::seconds(20))) Channel::fail("the exchange did not end: " + req.target);
  std::lock_guard<std::recursive_mutex> lock(ch->mu());
  // SERVER_FUZZ_VERBOSE=1: each exchange's status and body start, to see which seeds
  // reach which answers when running the binary on files.
  static const bool verbose = std::getenv("SERVER_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "%s %d %s\n", req.target.c_str(), ch->status, ch->body.substr(0, 160).c_str());
  if (ch->status < 200 || ch->status >= 500)
    Channel::fail("status " + std::to_string(ch->status) + ": " + ch->body.substr(0, 300));
  if (ch->status >= 400 && !ch->streamed) check_error_body(ch->status, ch->body);
  if ((selector & 0x80) != 0 && ch->status != 401) Channel::fail("a request without the API key was served");
  return 0;
}
