// /v1/completions against the scripted engine: bodies, streams, n, logprobs,
// echo, stops, seeds, usage, and the request lifecycle (429, disconnect, abort).
#include <gtest/gtest.h>

#include <thread>

#include "server_test_util.h"

namespace deepinfer::testing {
namespace {

TEST(Completions, GreedyBody) {
  ServerFixture fx;
  Reply r = fx.post("/v1/completions", {{"prompt", "a"}, {"max_tokens", 5}, {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json b = r.json_body();
  EXPECT_EQ(b["object"], "text_completion");
  EXPECT_EQ(b["model"], "fake-model");
  EXPECT_EQ(b["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(b["choices"].size(), 1u);
  // 'a' is token 101: the cycle starts at (101 % 26) = 23 -> "xyzab".
  EXPECT_EQ(b["choices"][0]["text"], "xyzab");
  EXPECT_EQ(b["choices"][0]["finish_reason"], "length");
  EXPECT_TRUE(b["choices"][0]["logprobs"].is_null());
  EXPECT_EQ(b["usage"]["prompt_tokens"], 1);
  EXPECT_EQ(b["usage"]["completion_tokens"], 5);
  EXPECT_EQ(b["usage"]["total_tokens"], 6);
  EXPECT_EQ(b["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
}

TEST(Completions, ScriptedStopAndStopStrings) {
  ServerFixture fx;
  Reply r = fx.post("/v1/completions", {{"prompt", "[[say:hello world]]"}, {"max_tokens", 50}});
  EXPECT_EQ(r.json_body()["choices"][0]["text"], "hello world");
  EXPECT_EQ(r.json_body()["choices"][0]["finish_reason"], "stop");
  r = fx.post("/v1/completions", {{"prompt", "[[say:hello world]]"}, {"max_tokens", 50}, {"stop", {"o w", "zz"}}});
  EXPECT_EQ(r.json_body()["choices"][0]["text"], "hell");
  EXPECT_EQ(r.json_body()["choices"][0]["finish_reason"], "stop");
  r = fx.post("/v1/completions", {{"prompt", "[[say:hello world]]"}, {"stop", "l"}});
  EXPECT_EQ(r.json_body()["choices"][0]["text"], "he");
}

TEST(Completions, TokenPromptsBatchAndN) {
  ServerFixture fx;
  const int64_t submitted = fx.backend->num_submitted();
  Reply r = fx.post("/v1/completions", {{"prompt", {{101, 102}, {103}}}, {"n", 2}, {"max_tokens", 3}, {"seed", 7}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(fx.backend->num_submitted(), submitted + 2);  // one engine request (n = 2) per prompt
  json b = r.json_body();
  ASSERT_EQ(b["choices"].size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(b["choices"][i]["index"], i);
  // Choice i of a prompt samples with derive_seed(seed, i) (choice 0 with the seed
  // itself), so choices differ and the same seed repeats.
  EXPECT_NE(b["choices"][0]["text"], b["choices"][1]["text"]);
  EXPECT_EQ(b["usage"]["prompt_tokens"], 3);  // each prompt billed once
  EXPECT_EQ(b["usage"]["completion_tokens"], 12);
  Reply again = fx.post("/v1/completions", {{"prompt", {101, 102}}, {"max_tokens", 3}, {"seed", 7}});
  EXPECT_EQ(again.json_body()["choices"][0]["text"], b["choices"][0]["text"]);
  Reply other = fx.post("/v1/completions", {{"prompt", {101, 102}}, {"max_tokens", 3}, {"seed", 8}});
  EXPECT_NE(other.json_body()["choices"][0]["text"], b["choices"][0]["text"]);
  // The repeated prompt hit the (fake) prefix cache.
  EXPECT_EQ(again.json_body()["usage"]["prompt_tokens_details"]["cached_tokens"], 1);
}

TEST(Completions, EchoLogprobsAndTokenIds) {
  ServerFixture fx;
  Reply r = fx.post("/v1/completions", {{"prompt", "[[say:ab]]"}, {"echo", true}, {"return_token_ids", true}});
  json c = r.json_body()["choices"][0];
  EXPECT_EQ(c["text"], "[[say:ab]]ab");
  EXPECT_EQ(c["token_ids"], json({101, 102, 1}));
  EXPECT_EQ(c["prompt_token_ids"].size(), 10u);

  r = fx.post("/v1/completions", {{"prompt", "[[say:ab]]"}, {"logprobs", 2}});
  json lp = r.json_body()["choices"][0]["logprobs"];
  EXPECT_EQ(lp["tokens"], json({"a", "b", ""}));
  EXPECT_EQ(lp["token_logprobs"][0], -0.25);
  EXPECT_EQ(lp["text_offset"], json({0, 1, 2}));
  ASSERT_EQ(lp["top_logprobs"].size(), 3u);
  EXPECT_EQ(lp["top_logprobs"][0].size(), 2u);
  EXPECT_EQ(lp["top_logprobs"][0]["a"], -0.25);
}

TEST(Completions, StreamFormat) {
  ServerFixture fx;
  Reply r = fx.post("/v1/completions", {{"prompt", "[[say:hey]]"}, {"stream", true}});
  ASSERT_EQ(r.status, 200);
  EXPECT_TRUE(r.streamed);
  EXPECT_EQ(r.content_type, "text/event-stream");
  std::vector<json> ev = r.events();
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    EXPECT_EQ(ev[i]["object"], "text_completion");
    EXPECT_EQ(ev[i]["id"], ev[0]["id"]);
    EXPECT_FALSE(ev[i].contains("usage"));
    text += ev[i]["choices"][0]["text"].get<std::string>();
    const bool last = i + 2 == ev.size();
    EXPECT_EQ(ev[i]["choices"][0]["finish_reason"], last ? json("stop") : json(nullptr));
  }
  EXPECT_EQ(text, "hey");
}

TEST(Completions, StreamIncludeUsageEchoLogprobs) {
  ServerFixture fx;
  Reply r = fx.post("/v1/completions", {{"prompt", "[[say:hi]]"},
                                        {"stream", true},
                                        {"n", 2},
                                        {"logprobs", 1},
                                        {"stream_options", {{"include_usage", true}}}});
  std::vector<json> ev = r.events();
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev.back(), "[DONE]");
  json usage_chunk = ev[ev.size() - 2];
  EXPECT_EQ(usage_chunk["choices"], json::array());
  EXPECT_EQ(usage_chunk["usage"]["completion_tokens"], 6);
  EXPECT_EQ(usage_chunk["usage"]["prompt_tokens"], 10);
  std::string text[2];
  for (size_t i = 0; i + 2 < ev.size(); ++i) {
    EXPECT_TRUE(ev[i]["usage"].is_null());
    const json& c = ev[i]["choices"][0];
    text[c["index"].get<int>()] += c["text"].get<std::string>();
    if (!c["text"].get<std::string>().empty()) {
      EXPECT_EQ(c["logprobs"]["tokens"][0], c["text"]);
    }
  }
  EXPECT_EQ(text[0], "hi");
  EXPECT_EQ(text[1], "hi");

  r = fx.post("/v1/completions", {{"prompt", "[[say:x]]"}, {"stream", true}, {"echo", true}});
  ev = r.events();
  EXPECT_EQ(ev[0]["choices"][0]["text"], "[[say:x]]");
}

TEST(Completions, QueueFullAnswers429WithRetryAfter) {
  server::RouterOptions opts;
  opts.max_sequences = 2;
  ServerFixture fx(opts, 256, std::chrono::milliseconds(20));
  auto slow = fx.start("POST", "/v1/completions", json{{"prompt", "a"}, {"max_tokens", 50}, {"n", 2}}.dump());
  Reply r = fx.post("/v1/completions", {{"prompt", "b"}});
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.header("Retry-After"), "1");
  EXPECT_EQ(r.json_body()["error"]["type"], "rate_limit_error");
  fx.backend->set_step_delay(std::chrono::milliseconds(0));
  ASSERT_TRUE(slow->wait_done());
  // Room again once the first request finished.
  EXPECT_EQ(fx.post("/v1/completions", {{"prompt", "b"}}).status, 200);
  EXPECT_EQ(fx.router.tracker().in_flight(), 0);
}

TEST(Completions, DisconnectAbortsEverySequence) {
  ServerFixture fx({}, 256, std::chrono::milliseconds(10));
  for (bool stream : {false, true}) {
    // Two prompts x 3 choices: two engine requests of 3 samples each.
    auto ch = fx.start("POST", "/v1/completions",
                       json{{"prompt", {"a", "b"}}, {"max_tokens", 200}, {"n", 3}, {"stream", stream}}.dump());
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int64_t aborts = fx.backend->num_aborts();
    ch->disconnect();
    EXPECT_EQ(fx.backend->num_aborts(), aborts + 2);  // an abort ends every sample of a request
    for (int i = 0; i < 200 && fx.router.tracker().in_flight() > 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EXPECT_EQ(fx.router.tracker().in_flight(), 0);
  }
}

TEST(Completions, EngineRefusalUndoesTheWholeRequest) {
  ServerFixture fx({}, 256, std::chrono::milliseconds(5));
  // Two prompts, so two engine requests; the engine refuses the second.
  Reply r = fx.post("/v1/completions",
                    {{"prompt", {"[[reject-second]]", "[[reject-second]]"}}, {"n", 3}, {"max_tokens", 100}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.json_body()["error"]["message"].get<std::string>().find("refuses"), std::string::npos);
  EXPECT_EQ(fx.backend->num_aborts(), 1);  // the first request (3 samples), already submitted
  for (int i = 0; i < 300 && fx.router.tracker().in_flight() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(fx.router.tracker().in_flight(), 0);
  EXPECT_EQ(fx.post("/v1/completions", {{"prompt", "a"}}).status, 200);
}

TEST(Completions, ModelsHealthMetricsTokenize) {
  ServerFixture fx;
  json models = fx.call("GET", "/v1/models").json_body();
  EXPECT_EQ(models["data"][0]["id"], "fake-model");
  EXPECT_EQ(models["data"][0]["max_model_len"], 256);
  EXPECT_EQ(fx.call("GET", "/v1/models/fake-model").json_body()["id"], "fake-model");
  EXPECT_EQ(fx.call("GET", "/health").status, 200);
  json tok = fx.post("/tokenize", {{"prompt", "ab"}, {"return_token_strs", true}}).json_body();
  EXPECT_EQ(tok["tokens"], json({101, 102}));
  EXPECT_EQ(tok["count"], 2);
  EXPECT_EQ(tok["max_model_len"], 256);
  EXPECT_EQ(tok["token_strs"], json({"a", "b"}));
  EXPECT_EQ(fx.post("/detokenize", {{"tokens", {101, 102}}}).json_body()["prompt"], "ab");

  fx.post("/v1/completions", {{"prompt", "[[say:abc]]"}, {"stream", true}});
  fx.post("/v1/completions", {{"prompt", 5}});
  Reply m = fx.call("GET", "/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type.rfind("text/plain", 0), 0u);
  for (const char* want : {"deepinfer_http_requests_total{path=\"/v1/completions\",status=\"200\"} 1",
                           "deepinfer_http_requests_total{path=\"/v1/completions\",status=\"400\"} 1",
                           "deepinfer_prompt_tokens_total 11", "deepinfer_generation_tokens_total 4",
                           "deepinfer_time_to_first_token_seconds_count 1",
                           "deepinfer_inter_token_latency_seconds_count 3",
                           "deepinfer_request_success_total{finished_reason=\"stop\"} 1",
                           "deepinfer_num_requests_running 0", "deepinfer_cache_usage_ratio 0",
                           "deepinfer_prefix_cache_hit_rate 0"})
    EXPECT_NE(m.body.find(want), std::string::npos) << want << "\n" << m.body;
}

TEST(Completions, LoadingAndDrainingAnswer503) {
  server::Router router({});
  auto ch = std::make_shared<RecordingChannel>();
  {
    std::lock_guard<std::recursive_mutex> lock(ch->mu);
    router.handle(server::HttpRequest{"GET", "/health", {}, ""}, ch);
  }
  EXPECT_EQ(ch->status, 503);
  ServerFixture fx;
  fx.router.set_draining();
  EXPECT_EQ(fx.call("GET", "/health").status, 503);
  Reply r = fx.post("/v1/completions", {{"prompt", "a"}});
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.header("Retry-After"), "1");
}

TEST(Completions, ApiKey) {
  server::RouterOptions opts;
  opts.api_key = "sk-test";
  ServerFixture fx(opts);
  Reply r = fx.post("/v1/completions", {{"prompt", "a"}});
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(r.json_body()["error"]["code"], "invalid_api_key");
  EXPECT_EQ(fx.call("POST", "/v1/completions", R"({"prompt": "a"})", {{"authorization", "Bearer sk-wrong"}}).status, 401);
  EXPECT_EQ(fx.call("POST", "/v1/completions", R"({"prompt": "a"})", {{"authorization", "Bearer sk-test"}}).status, 200);
  EXPECT_EQ(fx.call("GET", "/v1/models").status, 401);
  EXPECT_EQ(fx.call("GET", "/health").status, 200);
  EXPECT_EQ(fx.call("GET", "/metrics").status, 200);
}

}  // namespace
}  // namespace deepinfer::testing
