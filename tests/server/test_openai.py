"""End-to-end tests of the OpenAI-compatible server with the official `openai` client.

Each test runs against the fake-engine server and the real `deepinfer serve` on
the tiny fixture model (see conftest.py). Tests marked fake_only rely on the
scripted engine ("[[say:TEXT]]" prompts generate TEXT).
"""
import asyncio
import json
import os
import signal
import socket
import time

import openai
import pytest

from conftest import API_KEY, http, start_server

AUTH = {"Authorization": "Bearer " + API_KEY}
# A V4.1 tool call as the model writes it (DSML, MODEL_V41.md section 10).
DSML_CALL = ('\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name="get_weather">\n'
             '<｜DSML｜ parameter name="city" string="true">Paris</｜DSML｜ parameter>\n'
             '</｜DSML｜ invoke>\n</｜DSML｜ calls>')


def fake_only(server):
    if server.kind != "fake":
        pytest.skip("needs the scripted engine")


def metric(server, name):
    status, _, body = http("GET", server.url("/metrics"))
    assert status == 200
    for line in body.decode().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[-1])
    return 0.0


# --- basics -------------------------------------------------------------------------


def test_models_health_tokenize(server, client):
    models = client.models.list()
    assert [m.id for m in models.data] == ["test-model"]
    assert http("GET", server.url("/health"))[0] == 200
    status, _, body = http("POST", server.url("/tokenize"), {"prompt": "Hello world"}, AUTH)
    assert status == 200
    tokens = json.loads(body)["tokens"]
    assert json.loads(body)["count"] == len(tokens) > 0
    status, _, body = http("POST", server.url("/detokenize"), {"tokens": tokens}, AUTH)
    assert status == 200 and "Hello world" in json.loads(body)["prompt"]


def test_completion_stream_matches_non_stream(server, client):
    full = client.completions.create(model="test-model", prompt="Hello", max_tokens=12, temperature=0)
    choice = full.choices[0]
    assert choice.finish_reason in ("length", "stop")
    assert full.usage.completion_tokens <= 12
    assert full.usage.total_tokens == full.usage.prompt_tokens + full.usage.completion_tokens
    assert full.usage.prompt_tokens_details.cached_tokens >= 0
    chunks = list(client.completions.create(model="test-model", prompt="Hello", max_tokens=12, temperature=0,
                                            stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert chunks[-1].choices == []
    assert "".join(c.choices[0].text for c in chunks if c.choices) == choice.text
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == \
        [choice.finish_reason]


def test_n_and_seeds(server, client):
    def run(seed):
        r = client.completions.create(model="test-model", prompt="Once upon", max_tokens=10, temperature=1.0,
                                      n=3, seed=seed)
        assert sorted(c.index for c in r.choices) == [0, 1, 2]
        return [c.text for c in sorted(r.choices, key=lambda c: c.index)]

    first = run(42)
    assert run(42) == first
    assert run(43) != first
    assert len(set(first)) > 1  # choices of one request differ


def test_logprobs(server, client):
    r = client.completions.create(model="test-model", prompt="Hello", max_tokens=6, temperature=0, logprobs=3)
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == r.usage.completion_tokens
    assert all(v <= 0 for v in lp.token_logprobs)
    assert all(1 <= len(top) <= 3 for top in lp.top_logprobs)
    c = client.chat.completions.create(model="test-model", messages=[{"role": "user", "content": "Hi"}],
                                       max_tokens=5, temperature=0, logprobs=True, top_logprobs=2)
    content = c.choices[0].logprobs.content
    assert len(content) == c.usage.completion_tokens
    assert all(len(t.top_logprobs) == 2 and t.logprob <= 0 for t in content)


def test_stop_strings(server, client):
    base = client.completions.create(model="test-model", prompt="The", max_tokens=24, temperature=0,
                                     extra_body={"ignore_eos": True}).choices[0].text
    if len(base) < 8:
        pytest.skip("greedy output too short to pick a stop string from")
    stop = base[4:6]
    r = client.completions.create(model="test-model", prompt="The", max_tokens=24, temperature=0, stop=[stop],
                                  extra_body={"ignore_eos": True})
    assert r.choices[0].text == base[:base.index(stop)]
    assert r.choices[0].finish_reason == "stop"


def test_return_token_ids(server, client):
    r = client.completions.create(model="test-model", prompt="Hello", max_tokens=4, temperature=0,
                                  extra_body={"return_token_ids": True})
    extra = r.choices[0].model_extra
    assert len(extra["token_ids"]) == r.usage.completion_tokens
    assert len(extra["prompt_token_ids"]) == r.usage.prompt_tokens


def test_greedy_matches_reference_continuation(server, client):
    # The transformers reference's greedy continuation of the fixture (greedy.json, made by
    # tools/make_greedy_reference.py), through the whole server: token ids in, token ids out.
    if server.kind != "real":
        pytest.skip("needs the real engine on the fixture model")
    fixture = os.path.join(os.path.dirname(__file__), "..", "fixtures", "v41_tiny_f32", "greedy.json")
    with open(fixture) as f:
        g = json.load(f)
    r = client.completions.create(model="test-model", prompt=g["prompt"], max_tokens=len(g["greedy"]),
                                  temperature=0, extra_body={"return_token_ids": True})
    assert r.choices[0].model_extra["token_ids"] == g["greedy"]


# --- chat ---------------------------------------------------------------------------


def test_chat(server, client):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    r = client.chat.completions.create(model="test-model", messages=msgs, max_completion_tokens=8, temperature=0)
    assert r.object == "chat.completion"
    assert r.choices[0].message.role == "assistant"
    assert isinstance(r.choices[0].message.content, str)
    chunks = list(client.chat.completions.create(model="test-model", messages=msgs, max_tokens=8, temperature=0,
                                                 stream=True))
    assert chunks[0].choices[0].delta.role == "assistant"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == r.choices[0].message.content
    assert chunks[-1].choices[0].finish_reason == r.choices[0].finish_reason
    # Thinking on: the response carries reasoning_content (possibly all of the text).
    t = client.chat.completions.create(model="test-model", messages=msgs, max_tokens=8, temperature=0,
                                       extra_body={"thinking": True, "reasoning_effort": "low"})
    assert "reasoning_content" in t.choices[0].message.model_extra


def test_chat_reasoning_and_tool_calls(server, client):
    fake_only(server)
    say = "[[say:let me think</think>It is sunny.]]"
    r = client.chat.completions.create(model="test-model", messages=[{"role": "user", "content": say}],
                                       extra_body={"chat_template_kwargs": {"thinking": True}})
    msg = r.choices[0].message
    assert msg.model_extra["reasoning_content"] == "let me think"
    assert msg.content == "It is sunny."
    chunks = list(client.chat.completions.create(model="test-model", stream=True,
                                                 messages=[{"role": "user", "content": say}],
                                                 extra_body={"thinking": True}))
    reasoning = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks)
    assert reasoning == "let me think"
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    say = "[[say:Checking." + DSML_CALL + "]]"
    r = client.chat.completions.create(model="test-model", tools=tools,
                                       messages=[{"role": "user", "content": say}])
    choice = r.choices[0]
    assert choice.message.content == "Checking."
    assert choice.finish_reason == "tool_calls"
    assert choice.message.tool_calls[0].function.name == "get_weather"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"city": "Paris"}
    chunks = list(client.chat.completions.create(model="test-model", tools=tools, stream=True,
                                                 messages=[{"role": "user", "content": say}]))
    calls = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert calls[0].index == 0 and calls[0].function.name == "get_weather"
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


# --- errors -------------------------------------------------------------------------


# --- structured outputs ---------------------------------------------------------------

PERSON_SCHEMA = {
    "type": "object",
    "properties": {"name": {"enum": ["ada", "alan", "grace"]}, "age": {"type": "integer", "minimum": 0,
                   "maximum": 120}, "admin": {"type": "boolean"}},
    "required": ["name", "age", "admin"],
    "additionalProperties": False,
}


def real_only(server):
    if server.kind != "real":
        pytest.skip("the scripted engine does not apply constraints")


def check_person(text):
    value = json.loads(text)
    assert set(value) == {"name", "age", "admin"}, text
    assert value["name"] in ("ada", "alan", "grace") and isinstance(value["admin"], bool), text
    # 42.0 is an integer for JSON Schema, and the grammar allows it.
    age = value["age"]
    assert isinstance(age, (int, float)) and float(age).is_integer() and 0 <= age <= 120, text


def test_response_format_json_schema(server, client):
    real_only(server)
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON_SCHEMA, "strict": True}}
    for seed in range(3):
        chat = client.chat.completions.create(model="test-model", messages=[{"role": "user", "content": "who?"}],
                                              response_format=fmt, temperature=1.0, seed=seed, max_tokens=100)
        assert chat.choices[0].finish_reason == "stop"  # the grammar completed
        check_person(chat.choices[0].message.content)
    # Streaming under a constraint: the deltas concatenate to a valid document.
    stream = client.chat.completions.create(model="test-model", messages=[{"role": "user", "content": "who?"}],
                                            response_format=fmt, temperature=1.0, seed=7, max_tokens=100,
                                            stream=True)
    text, reasons = "", []
    for chunk in stream:
        for c in chunk.choices:
            text += c.delta.content or ""
            if c.finish_reason:
                reasons.append(c.finish_reason)
    assert reasons == ["stop"]
    check_person(text)
    obj = client.completions.create(model="test-model", prompt="x = ", max_tokens=200, temperature=0.5, seed=1,
                                    extra_body={"response_format": {"type": "json_object"}})
    if obj.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(obj.choices[0].text), dict)
    else:  # a random model may write a long object, but never an invalid prefix
        assert obj.choices[0].text.startswith("{")


def test_regex_and_choice(server, client):
    real_only(server)
    pattern = r"[a-z]{3,8}@example\.(com|org)"
    import re
    for seed in range(3):
        out = client.completions.create(model="test-model", prompt="mail: ", max_tokens=40, temperature=1.0,
                                        seed=seed, extra_body={"structured_outputs": {"regex": pattern}})
        assert out.choices[0].finish_reason == "stop"
        assert re.fullmatch(pattern, out.choices[0].text), out.choices[0].text
    stream = client.completions.create(model="test-model", prompt="mail: ", max_tokens=40, stream=True,
                                       extra_body={"guided_regex": pattern})
    text = "".join(c.choices[0].text for c in stream if c.choices)
    assert re.fullmatch(pattern, text), text
    chat = client.chat.completions.create(model="test-model", messages=[{"role": "user", "content": "ok?"}],
                                          extra_body={"guided_choice": ["yes", "no", "maybe"]}, temperature=0)
    assert chat.choices[0].message.content in ("yes", "no", "maybe")


def test_complete_within_max_tokens(server, client):
    """The DeepInfer extension: with it, a constrained output always completes within
    max_tokens (finish_reason "stop"), even when max_tokens is the shortest output's
    length in bytes; max_tokens below that is a 400."""
    real_only(server)
    pattern = r"[a-z]{3,}@[a-z]+\.(com|org)"  # shortest: 9 bytes
    import re
    for seed in range(4):
        for max_tokens in (9, 12):
            out = client.completions.create(
                model="test-model", prompt="mail: ", max_tokens=max_tokens, temperature=1.0, seed=seed,
                extra_body={"structured_outputs": {"regex": pattern, "complete_within_max_tokens": True}})
            assert out.choices[0].finish_reason == "stop", out.choices[0].text
            assert re.fullmatch(pattern, out.choices[0].text), out.choices[0].text
            assert out.usage.completion_tokens <= max_tokens
    fmt = {"type": "json_schema", "json_schema": {"name": "person", "schema": PERSON_SCHEMA},
           "complete_within_max_tokens": True}
    chat = client.chat.completions.create(model="test-model", messages=[{"role": "user", "content": "who?"}],
                                          response_format=fmt, temperature=1.0, seed=3, max_tokens=40)
    assert chat.choices[0].finish_reason == "stop"
    check_person(chat.choices[0].message.content)
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="test-model", prompt="mail: ", max_tokens=8,
                                  extra_body={"structured_outputs": {"regex": pattern,
                                                                     "complete_within_max_tokens": True}})
    assert "complete_within_max_tokens" in e.value.body["message"], e.value.body
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="test-model", prompt="mail: ", max_tokens=8,
                                  extra_body={"structured_outputs": {"regex": pattern,
                                                                     "complete_within_max_tokens": "on"}})
    assert e.value.body["param"] == "structured_outputs.complete_within_max_tokens", e.value.body


def test_bad_constraints_are_400(server, client):
    for kwargs, param in [
            ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "wat"}}}},
             "response_format.json_schema.schema"),
            ({"extra_body": {"guided_regex": "(unclosed"}}, "guided_regex"),
            ({"extra_body": {"guided_json": {"if": {"required": ["a"]}, "then": {"required": ["b"]}}}}, "guided_json"),
            ({"response_format": {"type": "json_object"}, "extra_body": {"guided_regex": "a"}}, "guided_regex")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.chat.completions.create(model="test-model", messages=[{"role": "user", "content": "x"}], **kwargs)
        assert e.value.body["param"] == param, e.value.body
    assert http("GET", server.url("/health"))[0] == 200


def test_auth(server):
    bad = openai.OpenAI(base_url=server.url("/v1"), api_key="wrong", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.models.list()
    status, _, body = http("POST", server.url("/v1/completions"), {"prompt": "a"})
    assert status == 401 and json.loads(body)["error"]["code"] == "invalid_api_key"
    assert http("GET", server.url("/health"))[0] == 200


def test_malformed_requests(server, client):
    url = server.url("/v1/completions")
    for body, status in [(b'{"prompt": ', 400), (b"[]", 400), ({"prompt": "a", "max_tokens": -1}, 400),
                         ({"prompt": "a", "temperature": 9}, 400), ({"prompt": [10 ** 9]}, 400),
                         ({"prompt": "a", "model": "nope"}, 404), ({"prompt": "a", "n": 0}, 400),
                         ({"prompt": "a", "response_format": {"type": "json_schema"}}, 400),
                         ({"prompt": "a", "guided_json": {"type": "object", "if": {}, "then": {}}}, 400)]:
        got, _, resp = http("POST", url, body, AUTH)
        assert got == status, (body, resp)
        err = json.loads(resp)["error"]
        assert err["message"] and err["type"] and "param" in err and "code" in err
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model="test-model", prompt="x" * 5000, max_tokens=10)
    assert e.value.code == "context_length_exceeded"
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="other", messages=[{"role": "user", "content": "x"}])
    status, _, resp = http("POST", url, b"{" + b" " * (9 << 20) + b"}", AUTH)
    assert status == 413 and "error" in json.loads(resp)
    assert http("GET", server.url("/health"))[0] == 200


# --- lifecycle ----------------------------------------------------------------------


def open_stream(server, max_tokens):
    """A raw streaming request; returns the socket once the first event arrived."""
    body = json.dumps({"prompt": "Hello", "max_tokens": max_tokens, "stream": True, "ignore_eos": True})
    s = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    s.sendall((f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {API_KEY}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}").encode())
    got = b""
    while b"data: " not in got:
        chunk = s.recv(4096)
        assert chunk, got
        got += chunk
    return s, got


def wait_for(cond, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def slow_args(kind):
    return ["--fake-step-ms", "5"] if kind == "fake" else []


def test_disconnect_aborts(server):
    if server.kind == "fake":
        pytest.skip("covered by the slowed-down fake in test_queue_limit_and_disconnect")
    before = metric(server, 'deepinfer_request_success_total{finished_reason="abort"}')
    s, _ = open_stream(server, 900)
    s.close()
    assert wait_for(lambda: metric(server, 'deepinfer_request_success_total{finished_reason="abort"}') > before)
    assert wait_for(lambda: metric(server, "deepinfer_num_requests_running") == 0)


@pytest.mark.parametrize("kind", ["fake", "real"])
def test_queue_limit_and_disconnect(kind):
    server = start_server(kind, "--max-num-seqs", "1", "--max-waiting-seqs", "0", *slow_args(kind))
    try:
        s, _ = open_stream(server, 900)
        status, headers, body = http("POST", server.url("/v1/completions"), {"prompt": "a", "max_tokens": 2})
        assert status == 429, body
        assert headers.get("Retry-After") == "1"
        assert json.loads(body)["error"]["type"] == "rate_limit_error"
        s.close()  # the client goes away: its request is aborted and frees the slot
        assert wait_for(lambda: http("POST", server.url("/v1/completions"),
                                     {"prompt": "a", "max_tokens": 2})[0] == 200)
        assert metric(server, 'deepinfer_request_success_total{finished_reason="abort"}') == 1
    finally:
        server.stop()


@pytest.mark.parametrize("kind", ["fake", "real"])
def test_sigterm_drains_then_exits(kind):
    server = start_server(kind, *slow_args(kind))
    s, got = open_stream(server, 300)
    server.proc.send_signal(signal.SIGTERM)
    s.settimeout(60)
    while b"data: [DONE]" not in got:
        chunk = s.recv(65536)
        assert chunk, got[-500:]
        got += chunk
    assert b'"finish_reason":"length"' in got
    s.close()
    assert server.proc.wait(60) == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", server.port), timeout=2)


def test_health_503_while_loading():
    from conftest import ServerProcess, serve_argv

    server = ServerProcess(serve_argv("fake") + ["--fake-load-ms", "1500"])
    try:
        status, _, body = http("GET", server.url("/health"))
        assert status == 503 and "error" in json.loads(body)
        assert http("POST", server.url("/v1/completions"), {"prompt": "a"})[0] == 503
        server.wait_healthy(30)
    finally:
        server.stop()


def test_200_concurrent_streams(server):
    async def one(client, i):
        stream = await client.completions.create(model="test-model", prompt=f"Request {i}", max_tokens=8,
                                                 temperature=0, stream=True)
        finish = None
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].finish_reason:
                finish = chunk.choices[0].finish_reason
        return finish

    async def main():
        client = openai.AsyncOpenAI(base_url=server.url("/v1"), api_key=API_KEY, max_retries=0, timeout=120)
        try:
            return await asyncio.wait_for(asyncio.gather(*(one(client, i) for i in range(200))), timeout=240)
        finally:
            await client.close()

    finishes = asyncio.run(main())
    assert len(finishes) == 200 and all(f in ("length", "stop") for f in finishes)
    assert wait_for(lambda: metric(server, "deepinfer_num_requests_running") == 0)
