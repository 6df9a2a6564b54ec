#include "server/router.h"

#include <new>

#include "common/check.h"
#include "server/chat_job.h"
#include "server/chat_request.h"
#include "server/completion_job.h"
#include "server/json_fields.h"
#include "server/openai_format.h"

namespace deepinfer::server {

namespace {

// Forwards to the transport's channel and counts each response by path and status.
class CountingChannel : public ResponseChannel {
 public:
  CountingChannel(std::shared_ptr<ResponseChannel> inner, Metrics& metrics, std::string path)
      : inner_(std::move(inner)), metrics_(metrics), path_(std::move(path)) {}
  void post(std::function<void()> fn) override { inner_->post(std::move(fn)); }
  void respond(HttpResponse response) override {
    metrics_.count_response(path_, response.status);
    inner_->respond(std::move(response));
  }
  void begin_stream(int status, const std::string& content_type) override {
    metrics_.count_response(path_, status);
    inner_->begin_stream(status, content_type);
  }
  void write(std::string bytes) override { inner_->write(std::move(bytes)); }
  void end_stream() override { inner_->end_stream(); }
  void on_close(std::function<void()> fn) override { inner_->on_close(std::move(fn)); }
  bool closed() const override { return inner_->closed(); }

 private:
  std::shared_ptr<ResponseChannel> inner_;
  Metrics& metrics_;
  std::string path_;
};

HttpResponse json_response(const Json& body) { return HttpResponse{200, "application/json", {}, dump_json(body)}; }

// Compares without an early exit so that response time does not reveal a key prefix.
bool same_secret(const std::string& a, const std::string& b) {
  unsigned diff = a.size() != b.size();
  for (size_t i = 0; i < a.size(); ++i) diff |= unsigned(a[i]) ^ unsigned(i < b.size() ? b[i] : 0);
  return diff == 0;
}

}  // namespace

HttpResponse error_response(const ApiError& e) {
  HttpResponse r{e.status(), "application/json", {}, error_body(e)};
  if (e.status() == 429 || e.status() == 503) r.headers.emplace_back("Retry-After", "1");
  if (e.status() == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

Router::Router(RouterOptions options)
    : options_(std::move(options)), tracker_(options_.max_sequences), created_(unix_time_s()) {}

void Router::set_backend(GenerationBackend* backend) {
  DI_CHECK(backend && !backend_.load());
  const Engine& e = backend->engine();
  model_.name = options_.served_model_name.empty() ? e.model_name() : options_.served_model_name;
  model_.vocab_size = e.vocab_size();
  model_.max_model_len = e.max_model_len();
  backend_.store(backend);
}

GenerationBackend& Router::ready_backend() const {
  GenerationBackend* b = backend_.load();
  if (!b) throw ApiError(503, "The model is still loading; retry shortly.", "", "model_loading");
  return *b;
}

bool Router::authorized(const HttpRequest& request) const {
  if (options_.api_key.empty()) return true;
  const std::string& auth = request.header("authorization");
  const std::string kBearer = "Bearer ";
  if (auth.size() <= kBearer.size() || auth.compare(0, kBearer.size(), kBearer) != 0) return false;
  return same_secret(auth.substr(kBearer.size()), options_.api_key);
}

void Router::handle(HttpRequest request, std::shared_ptr<ResponseChannel> channel) {
  auto counted = std::make_shared<CountingChannel>(std::move(channel), metrics_, request.path());
  try {
    dispatch(request, counted);
  } catch (const ApiError& e) {
    counted->respond(error_response(e));
  } catch (const InputError& e) {
    counted->respond(error_response(bad_request(e.what())));
  } catch (const nlohmann::json::exception& e) {
    // Validation should have caught it; still the client's input, not a server fault.
    counted->respond(error_response(bad_request(str_cat("malformed request: ", e.what()))));
  } catch (const std::bad_alloc&) {
    counted->respond(error_response(ApiError(500, "out of memory while handling the request")));
  } catch (const std::exception& e) {
    counted->respond(error_response(ApiError(500, str_cat("internal error: ", e.what()))));
  }
}

void Router::dispatch(const HttpRequest& req, const std::shared_ptr<ResponseChannel>& ch) {
  const std::string path = req.path();
  const bool known = path == "/health" || path == "/metrics" || path == "/v1/models" ||
                     path.rfind("/v1/models/", 0) == 0 || path == "/v1/completions" || path == "/v1/chat/completions" ||
                     path == "/tokenize" || path == "/detokenize";
  if (!known) throw ApiError(404, str_cat("Unknown endpoint ", req.method, " ", path.substr(0, 200)), "", "unknown_url");
  const bool is_get = path == "/health" || path == "/metrics" || path.rfind("/v1/models", 0) == 0;
  const char* method = is_get ? "GET" : "POST";
  if (req.method != method) {
    HttpResponse r = error_response(
        ApiError(405, str_cat("Method ", req.method.substr(0, 20), " is not allowed on ", path, "; use ", method, ".")));
    r.headers.emplace_back("Allow", method);
    return ch->respond(std::move(r));
  }

  if (path == "/health") {
    if (!backend_.load()) throw ApiError(503, "The model is still loading.", "", "model_loading");
    if (draining_) throw ApiError(503, "The server is shutting down.", "", "shutting_down");
    ch->respond(HttpResponse{200, "application/json", {}, "{\"status\":\"ok\"}"});
    return;
  }
  if (path == "/metrics") {
    GenerationBackend* b = backend_.load();
    EngineStats stats;
    if (b) stats = b->stats();
    ch->respond(HttpResponse{200, "text/plain; version=0.0.4; charset=utf-8", {}, metrics_.render(b ? &stats : nullptr)});
    return;
  }
  if (!authorized(req))
    throw ApiError(401, "Incorrect or missing API key; send 'Authorization: Bearer <key>'.", "", "invalid_api_key");
  GenerationBackend& backend = ready_backend();

  if (path.rfind("/v1/models", 0) == 0) return ch->respond(models(path));
  if (path == "/tokenize") return ch->respond(tokenize(req));
  if (path == "/detokenize") return ch->respond(detokenize(req));

  if (draining_) throw ApiError(503, "The server is shutting down.", "", "shutting_down");
  const Json body = parse_json_object(req.body);
  JobContext ctx{&backend, &metrics_, &tracker_, model_};
  std::shared_ptr<GenerationJob> job;
  if (path == "/v1/completions") {
    job = make_completion_job(ctx, ch, parse_completion_request(body, backend.engine(), model_));
  } else {
    job = make_chat_job(ctx, ch, body);
  }
  job->start();
}

HttpResponse Router::models(const std::string& path) const {
  Json card = {{"id", model_.name},        {"object", "model"},      {"created", created_},
               {"owned_by", "deepinfer"},  {"root", model_.name},    {"parent", nullptr},
               {"max_model_len", model_.max_model_len}, {"permission", Json::array()}};
  if (path == "/v1/models") return json_response(Json{{"object", "list"}, {"data", Json::array({card})}});
  const std::string id = path.substr(std::string("/v1/models/").size());
  if (id != model_.name)
    throw ApiError(404, str_cat("The model '", id.substr(0, 200), "' does not exist."), "model", "model_not_found");
  return json_response(card);
}

HttpResponse Router::tokenize(const HttpRequest& req) const {
  const Json body = parse_json_object(req.body);
  JsonFields f(body);
  check_model(f, model_);
  (void)f.boolean("add_special_tokens");  // the engine's tokenize() never adds any
  const bool want_strs = f.boolean("return_token_strs").value_or(false);
  const Engine& engine = ready_backend().engine();
  std::vector<int64_t> ids;
  if (f.has("prompt") == f.has("messages")) throw bad_request("give exactly one of 'prompt' and 'messages'");
  if (auto prompt = f.string("prompt")) ids = engine.tokenize(*prompt);
  else ids = engine.tokenize(render_chat_prompt(body, model_).text);
  Json out = {{"count", ids.size()}, {"max_model_len", model_.max_model_len}, {"tokens", ids}, {"token_strs", nullptr}};
  if (want_strs) {
    out["token_strs"] = Json::array();
    for (int64_t id : ids) out["token_strs"].push_back(token_text(engine, id));
  }
  return json_response(out);
}

HttpResponse Router::detokenize(const HttpRequest& req) const {
  const Json body = parse_json_object(req.body);
  JsonFields f(body);
  check_model(f, model_);
  const Json* tokens = f.get("tokens");
  if (!tokens) throw ApiError(400, "'tokens' is required", "tokens", "missing_required_parameter");
  std::vector<int64_t> ids = parse_token_ids(*tokens, model_, "tokens");
  return json_response(Json{{"prompt", ready_backend().engine().detokenize(ids)}});
}

}  // namespace deepinfer::server
