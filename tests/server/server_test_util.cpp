#include "server_test_util.h"

#include <gtest/gtest.h>

namespace deepinfer::testing {

void RecordingChannel::post(std::function<void()> fn) {
  std::lock_guard<std::recursive_mutex> lock(mu);
  fn();
  cv_.notify_all();
}

void RecordingChannel::respond(server::HttpResponse r) {
  if (closed_ || done) return;
  status = r.status;
  content_type = r.content_type;
  headers = r.headers;
  body = r.body;
  done = true;
  cv_.notify_all();
}

void RecordingChannel::begin_stream(int s, const std::string& type) {
  if (closed_) return;
  status = s;
  content_type = type;
  streamed = true;
}

void RecordingChannel::write(std::string bytes) {
  if (closed_) return;
  EXPECT_TRUE(streamed) << "write() before begin_stream()";
  body += bytes;
  cv_.notify_all();
}

void RecordingChannel::end_stream() {
  if (closed_) return;
  done = true;
  cv_.notify_all();
}

void RecordingChannel::disconnect() {
  std::lock_guard<std::recursive_mutex> lock(mu);
  closed_ = true;
  if (!done && close_fn_) {
    auto fn = std::move(close_fn_);
    fn();
  }
}

bool RecordingChannel::wait_done(std::chrono::milliseconds timeout) {
  std::unique_lock<std::recursive_mutex> lock(mu);
  return cv_.wait_for(lock, timeout, [&] { return done; });
}

bool RecordingChannel::wait_body(size_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::recursive_mutex> lock(mu);
  return cv_.wait_for(lock, timeout, [&] { return body.size() >= n; });
}

std::vector<json> Reply::events() const {
  std::vector<json> out;
  size_t pos = 0;
  while (pos < body.size()) {
    size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated SSE event";
    if (end == std::string::npos) break;
    std::string event = body.substr(pos, end - pos);
    EXPECT_EQ(event.rfind("data: ", 0), 0u) << event;
    std::string data = event.substr(6);
    out.push_back(data == "[DONE]" ? json("[DONE]") : json::parse(data));
    pos = end + 2;
  }
  return out;
}

std::string Reply::header(const std::string& name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return "";
}

ServerFixture::ServerFixture(server::RouterOptions options, int64_t max_model_len, std::chrono::milliseconds step_delay)
    : router(std::move(options)),
      owned_(std::make_unique<FakeBackend>(std::make_unique<FakeEngine>(max_model_len), step_delay)) {
  backend = owned_.get();
  router.set_backend(backend);
}

// The backend goes first: its callbacks may still post into channels that tests hold.
ServerFixture::~ServerFixture() { owned_.reset(); }

std::shared_ptr<RecordingChannel> ServerFixture::start(const std::string& method, const std::string& path,
                                                       const std::string& body) {
  auto ch = std::make_shared<RecordingChannel>();
  server::HttpRequest req{method, path, {}, body};
  std::lock_guard<std::recursive_mutex> lock(ch->mu);
  router.handle(std::move(req), ch);
  return ch;
}

Reply ServerFixture::call(const std::string& method, const std::string& path, const std::string& body,
                          std::vector<std::pair<std::string, std::string>> headers) {
  auto ch = std::make_shared<RecordingChannel>();
  {
    server::HttpRequest req{method, path, std::move(headers), body};
    std::lock_guard<std::recursive_mutex> lock(ch->mu);
    router.handle(std::move(req), ch);
  }
  EXPECT_TRUE(ch->wait_done()) << method << " " << path << " did not finish";
  std::lock_guard<std::recursive_mutex> lock(ch->mu);
  return Reply{ch->status, ch->content_type, ch->body, ch->headers, ch->streamed};
}

}  // namespace deepinfer::testing
