"""The OpenAI-compatible server, driven by the official ``openai`` client over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
import time

import httpx
import numpy as np
import openai
import pytest
import uvicorn

import cactus_core as cactus
from cactus_core.server import create_app
from cactus_core.server_openai import chat_response
from tinybert import make_bert_model, minilm_dir
from tinymodel import make_chat_model

TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
HI = [{"role": "user", "content": "Hello! How can I help you today?"}]
KEY = "sk-test-5ecret-key"


class Server:
    """uvicorn on a free 127.0.0.1 port in a background thread."""

    def __init__(self, app):
        self.app = app
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.url = "http://127.0.0.1:%d" % sock.getsockname()[1]
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [sock]}, daemon=True)
        self.thread.start()
        deadline = time.time() + 10
        while not self.server.started:
            assert time.time() < deadline, "server did not start"
            time.sleep(0.01)

    @property
    def worker(self):
        return self.app.state.worker

    def client(self, api_key: str = "unused", **kw) -> openai.OpenAI:
        return openai.OpenAI(base_url=self.url + "/v1", api_key=api_key, max_retries=0, **kw)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)


@pytest.fixture(scope="module")
def chat_dir(tmp_path_factory):
    return make_chat_model(tmp_path_factory.mktemp("srv") / "tiny-chat", max_positions=1024)


@pytest.fixture(scope="module")
def engine(chat_dir):
    return cactus.load(chat_dir)


@pytest.fixture(scope="module")
def embedder(tmp_path_factory):
    path = minilm_dir() or make_bert_model(tmp_path_factory.mktemp("srv") / "tiny-bert")
    return cactus.load(path)


@pytest.fixture(scope="module")
def server(engine, embedder):
    s = Server(create_app(engine, embedder=embedder))
    yield s
    s.stop()


@pytest.fixture
def slow_server(chat_dir):
    """Queue of one; each forward pass takes 20 ms and EOS never ends generation early."""
    eng = cactus.load(chat_dir)
    eng.tokenizer.eos_token_ids = []
    forward = eng.model.forward

    def slow_forward(ids, cache):
        time.sleep(0.02)
        return forward(ids, cache)

    eng.model.forward = slow_forward
    s = Server(create_app(eng, queue_size=1))
    yield s
    s.stop()


def _wait_finished(worker, n: int = 1, timeout: float = 10.0) -> list:
    deadline = time.time() + timeout
    while len(worker.finished) < n:
        assert time.time() < deadline, "the worker never finished the request"
        time.sleep(0.02)
    return list(worker.finished)


# --- chat ---------------------------------------------------------------------------
def test_chat_matches_the_engine(server, engine):
    r = server.client().chat.completions.create(model="anything", messages=HI, max_tokens=12,
                                                temperature=0.8, seed=3)
    direct = engine.complete(HI, max_tokens=12, temperature=0.8, seed=3)
    assert r.object == "chat.completion" and r.id.startswith("chatcmpl-") and r.model == "tiny-chat"
    assert r.created > 1_600_000_000
    choice = r.choices[0]
    assert choice.index == 0 and choice.message.role == "assistant"
    assert choice.message.content == direct["response"] and choice.finish_reason in ("stop", "length")
    assert r.usage.completion_tokens == direct["decode_tokens"] > 0
    assert r.usage.prompt_tokens == len(engine.tokenizer.encode_chat(HI))
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens
    extra = r.model_extra
    assert 0 <= extra["confidence"] <= 1 and extra["cloud_handoff"] is False and extra["cloud_handoff_reason"]
    for name in ("time_to_first_token_ms", "prefill_tps", "decode_tps", "ram_usage_mb"):
        assert extra[name] > 0, name


def test_streaming_concatenates_to_the_full_text(server):
    client = server.client()
    opts = dict(model="m", messages=HI, max_tokens=20, temperature=1.0, seed=11)
    full = client.chat.completions.create(**opts)
    chunks = list(client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **opts))
    assert chunks[0].choices[0].delta.role == "assistant"
    body = [c for c in chunks if c.choices]
    text = "".join(c.choices[0].delta.content or "" for c in body)
    assert text.strip() == full.choices[0].message.content.strip()
    assert all(c.choices[0].finish_reason is None for c in body[:-1])
    assert body[-1].choices[0].finish_reason == full.choices[0].finish_reason
    assert body[-1].model_extra["confidence"] is not None
    assert all(c.id == chunks[0].id and c.object == "chat.completion.chunk" for c in chunks)
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    with httpx.stream("POST", server.url + "/v1/chat/completions",
                      json={"messages": HI, "max_tokens": 3, "stream": True}) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in resp.iter_lines() if line]
    assert lines[-1] == "data: [DONE]"


def test_request_options_reach_the_engine(server):
    client = server.client()
    r = client.chat.completions.create(model="m", messages=HI, max_completion_tokens=3, temperature=0)
    assert r.usage.completion_tokens <= 3
    assert r.choices[0].finish_reason == "length" or r.usage.completion_tokens < 3
    a = client.chat.completions.create(model="m", messages=HI, max_tokens=8, temperature=1.0, top_p=0.9, seed=5)
    b = client.chat.completions.create(model="m", messages=HI, max_tokens=8, temperature=1.0, top_p=0.9, seed=5)
    assert a.choices[0].message.content == b.choices[0].message.content
    full = client.chat.completions.create(model="m", messages=HI, max_tokens=16, temperature=1.0, seed=5)
    text = full.choices[0].message.content
    if len(text.strip()) > 2:
        stop = text.strip()[1]
        cut = client.chat.completions.create(model="m", messages=HI, max_tokens=16, temperature=1.0, seed=5,
                                             stop=[stop])
        assert stop not in cut.choices[0].message.content
        assert cut.choices[0].finish_reason == "stop"


# --- tool calls -------------------------------------------------------------------------
def test_response_builder_formats_tool_calls():
    result = {"success": True, "response": "", "finish_reason": "tool_calls", "prompt_tokens": 20,
              "prefill_tokens": 20, "decode_tokens": 9, "confidence": 0.9, "cloud_handoff": False,
              "function_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "days": 2}},
                                 {"name": "noop", "arguments": {}}]}
    r = chat_response(result, "m")
    choice = r["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    calls = choice["message"]["tool_calls"]
    assert [c["type"] for c in calls] == ["function", "function"]
    assert len({c["id"] for c in calls}) == 2 and all(c["id"].startswith("call_") for c in calls)
    assert json.loads(calls[0]["function"]["arguments"]) == {"city": "Paris", "days": 2}
    assert calls[1]["function"] == {"name": "noop", "arguments": "{}"}
    assert r["usage"] == {"prompt_tokens": 20, "completion_tokens": 9, "total_tokens": 29,
                          "prompt_tokens_details": {"cached_tokens": 0}}


def test_tool_calls_round_trip(server, engine, monkeypatch):
    """The model's parsed call reaches the client as tool_calls (plain and streamed), and the
    client's follow-up with the call and its result is accepted."""
    client = server.client()
    plain = client.chat.completions.create(model="m", messages=HI, tools=TOOLS, max_tokens=4)
    assert plain.choices[0].message.tool_calls is None  # a random model calls nothing
    monkeypatch.setattr(engine.tokenizer, "parse_tool_calls",
                        lambda text, tools=None, style=None: ("", [{"name": "get_weather",
                                                                    "arguments": {"city": "Paris"}}]))
    r = client.chat.completions.create(model="m", messages=HI, tools=TOOLS, tool_choice="auto", max_tokens=4)
    call = r.choices[0].message.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls"
    assert call.type == "function" and call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}
    chunks = list(client.chat.completions.create(model="m", messages=HI, tools=TOOLS, max_tokens=4, stream=True))
    streamed = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert [tc.function.name for tc in streamed] == ["get_weather"] and streamed[0].index == 0
    assert json.loads(streamed[0].function.arguments) == {"city": "Paris"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    monkeypatch.undo()
    follow_up = HI + [r.choices[0].message.model_dump(exclude_none=True),
                      {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 21}'}]
    again = client.chat.completions.create(model="m", messages=follow_up, tools=TOOLS, max_tokens=4)
    assert again.choices[0].message.role == "assistant"
    none = client.chat.completions.create(model="m", messages=HI, tools=TOOLS, tool_choice="none", max_tokens=2)
    assert none.choices[0].message.tool_calls is None


# --- embeddings, models, health, schema --------------------------------------------------
def test_embeddings_match_the_engine(server, embedder):
    texts = ["The cat sat on the mat.", "Paris is the capital of France.", "naïve café 東京 🌵"]
    r = server.client().embeddings.create(model=embedder.name, input=texts)  # base64 on the wire
    got = np.array([d.embedding for d in r.data], dtype=np.float32)
    np.testing.assert_allclose(got, embedder.embed(texts), atol=1e-6)
    assert [d.index for d in r.data] == [0, 1, 2] and r.model == embedder.name
    assert r.usage.prompt_tokens == sum(len(embedder.tokenizer.encode(t, add_special_tokens=True)) for t in texts)
    plain = httpx.post(server.url + "/v1/embeddings", json={"input": "one text", "encoding_format": "float"}).json()
    assert len(plain["data"]) == 1 and abs(np.linalg.norm(plain["data"][0]["embedding"]) - 1) < 1e-5


def test_models_health_and_openapi(server, engine, embedder):
    ids = [m.id for m in server.client().models.list().data]
    assert ids == list(dict.fromkeys([engine.name, embedder.name]))
    assert server.client().models.retrieve(engine.name).owned_by == "cactus"
    health = httpx.get(server.url + "/health").json()
    assert health["status"] == "ok" and health["model"] == engine.name and health["queue"]["max"] >= 1
    schema = httpx.get(server.url + "/openapi.json").json()
    assert schema["openapi"].startswith("3.") and {"/v1/chat/completions", "/v1/embeddings",
                                                   "/v1/models", "/health"} <= set(schema["paths"])


# --- auth ----------------------------------------------------------------------------------
def test_api_key_is_required(engine):
    s = Server(create_app(engine, api_key=KEY))
    try:
        with pytest.raises(openai.AuthenticationError):
            s.client(api_key="wrong").models.list()
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}, {"Authorization": "Basic x"}):
            r = httpx.get(s.url + "/v1/models", headers=headers)
            assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
            assert r.json()["error"]["code"] == "invalid_api_key" and KEY not in r.text
        r = httpx.post(s.url + "/v1/chat/completions", json={"messages": HI})
        assert r.status_code == 401
        assert [m.id for m in s.client(api_key=KEY).models.list().data] == [engine.name]
        ok = s.client(api_key=KEY).chat.completions.create(model="m", messages=HI, max_tokens=2)
        assert ok.choices[0].message.role == "assistant"
    finally:
        s.stop()


# --- bad input -------------------------------------------------------------------------------
@pytest.mark.parametrize("body,status,needle", [
    (b"{not json", 400, "not valid JSON"),
    (b"", 400, "empty"),
    (b"[1, 2]", 400, "JSON object"),
    (b'{"messages": "hi"}', 400, "messages"),
    (b'{"model": "m"}', 400, "'messages' is required"),
    (b'{"messages": []}', 400, "messages is empty"),
    (b'{"messages": [{"role": "user", "content": "x"}], "temprature": 1}', 400, "unknown field 'temprature'"),
    (b'{"messages": [{"role": "user", "content": "x"}], "temperature": "hot"}', 400, "temperature"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": -1}', 400, "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "x"}], "max_tokens": true}', 400, "max_tokens"),
    (b'{"messages": [{"role": "user", "content": "x"}], "n": 2}', 400, "n=1"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stream": "yes"}', 400, "stream"),
    (b'{"messages": [{"role": "user", "content": "x"}], "stop": 5}', 400, "stop"),
    (b'{"messages": [{"role": "user", "content": "x"}], "tools": "nope"}', 400, "tools"),
    (b'{"messages": [{"role": "user", "content": "x"}], "tool_choice": {"type": "function", '
     b'"function": {"name": "ghost"}}, "tools": []}', 400, "ghost"),
    (b'{"messages": [{"role": "wizard", "content": "x"}]}', 400, "role"),
])
def test_bad_chat_requests(server, body, status, needle):
    r = httpx.post(server.url + "/v1/chat/completions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert needle in err["message"] and err["type"] == "invalid_request_error" and set(err) == {
        "message", "type", "param", "code"}


@pytest.mark.parametrize("stream", [False, True])
def test_prompt_over_the_context(server, stream):
    r = httpx.post(server.url + "/v1/chat/completions",
                   json={"messages": [{"role": "user", "content": "word " * 2000}], "stream": stream})
    assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
    assert "context" in r.json()["error"]["message"]


def test_oversized_body_and_unknown_routes(server):
    big = json.dumps({"messages": [{"role": "user", "content": "x" * (5 * 2**20)}]}).encode()
    r = httpx.post(server.url + "/v1/chat/completions", content=big)
    assert r.status_code == 413 and r.json()["error"]["code"] == "request_too_large"
    assert httpx.get(server.url + "/v1/nothing").json()["error"]["code"] == "not_found"
    r = httpx.get(server.url + "/v1/chat/completions")
    assert r.status_code == 405 and "error" in r.json()
    with pytest.raises(openai.BadRequestError, match="messages"):
        server.client().chat.completions.create(model="m", messages=[])


@pytest.mark.parametrize("body,needle", [
    ({}, "'input' is required"), ({"input": ""}, "empty"), ({"input": []}, "non-empty"),
    ({"input": [1, 2, 3]}, "token-id"), ({"input": "x", "encoding_format": "hex"}, "encoding_format"),
    ({"input": "x", "dimensions": 7}, "dimensions"), ({"input": "x", "bogus": 1}, "unknown field"),
])
def test_bad_embedding_requests(server, body, needle):
    r = httpx.post(server.url + "/v1/embeddings", json=body)
    assert r.status_code == 400 and needle in r.json()["error"]["message"]


# --- queue and cancellation ------------------------------------------------------------------
def test_full_queue_answers_503_with_retry_after(slow_server):
    done = threading.Event()

    def slow_request():
        httpx.post(slow_server.url + "/v1/chat/completions", json={"messages": HI, "max_tokens": 40}, timeout=30)
        done.set()

    t = threading.Thread(target=slow_request)
    t.start()
    deadline = time.time() + 5
    while slow_server.worker.pending == 0:
        assert time.time() < deadline
        time.sleep(0.01)
    r = httpx.post(slow_server.url + "/v1/chat/completions", json={"messages": HI, "max_tokens": 2})
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert r.json()["error"]["code"] == "queue_full"
    assert httpx.get(slow_server.url + "/health").status_code == 200  # the event loop stays responsive
    t.join(timeout=30)
    assert done.is_set()
    ok = httpx.post(slow_server.url + "/v1/chat/completions", json={"messages": HI, "max_tokens": 2})
    assert ok.status_code == 200


def test_stream_disconnect_stops_generation(slow_server):
    with httpx.stream("POST", slow_server.url + "/v1/chat/completions",
                      json={"messages": HI, "max_tokens": 300, "stream": True}, timeout=30) as resp:
        for line in resp.iter_lines():
            if '"content": "' in line and '"content": ""' not in line:
                break  # one real token arrived: hang up
    [summary] = _wait_finished(slow_server.worker)
    assert summary["cancelled"] and summary["finish_reason"] == "cancelled"
    assert 0 < summary["decode_tokens"] < 300


def test_non_streaming_disconnect_stops_generation(slow_server):
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(slow_server.url + "/v1/chat/completions", json={"messages": HI, "max_tokens": 300}, timeout=0.5)
    [summary] = _wait_finished(slow_server.worker)
    assert summary["cancelled"] and summary["decode_tokens"] < 300


def test_cli_serve(chat_dir):
    """`cactus serve` in a subprocess: binds 127.0.0.1, needs the key, never prints it."""
    import subprocess
    import sys

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen([sys.executable, "-m", "cactus_core.cli", "serve", chat_dir, "--port", str(port),
                             "--api-key", KEY], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 60
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                r = httpx.get(url + "/health", headers={"Authorization": f"Bearer {KEY}"})
                break
            except httpx.ConnectError:
                assert time.time() < deadline, "cactus serve did not come up"
                time.sleep(0.1)
        assert r.json()["model"] == "tiny-chat"
        assert httpx.get(url + "/health").status_code == 401
        reply = openai.OpenAI(base_url=url + "/v1", api_key=KEY, max_retries=0).chat.completions.create(
            model="m", messages=HI, max_tokens=2)
        assert reply.model == "tiny-chat"
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert f"127.0.0.1:{port}" in err and KEY not in out + err


def test_tool_choice_reaches_the_engine(server, engine, monkeypatch):
    """'required' and a named function are passed on for the engine to enforce; a bad choice is a 400."""
    seen = []
    real = engine.complete
    monkeypatch.setattr(engine, "complete", lambda *a, **kw: (seen.append(kw.get("tool_choice")), real(*a, **kw))[1])
    client = server.client()
    named = {"type": "function", "function": {"name": "get_weather"}}
    for choice in ("required", named):
        r = client.chat.completions.create(model="m", messages=HI, tools=TOOLS, tool_choice=choice, max_tokens=4)
        assert r.choices[0].message.role == "assistant"
    assert seen == ["required", named]
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="m", messages=HI, tools=TOOLS, max_tokens=4,
                                       tool_choice={"type": "function", "function": {"name": "nope"}})
    assert err.value.body["param"] == "tool_choice" and "not among" in err.value.body["message"]


def test_forced_call_from_an_untrained_model_is_a_valid_tool_call(server):
    """With tool_choice, even the random test model answers with a call whose arguments
    parse and follow the schema (constrained decoding), streamed or not."""
    volume = [{"type": "function", "function": {"name": "set_volume", "description": "Set the volume",
               "parameters": {"type": "object", "properties": {"level": {"type": "integer"}},
                              "required": ["level"]}}}]
    client = server.client()
    choice = {"type": "function", "function": {"name": "set_volume"}}
    r = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=volume,
                                       tool_choice=choice, max_tokens=120)
    (call,) = r.choices[0].message.tool_calls
    assert r.choices[0].finish_reason == "tool_calls" and call.function.name == "set_volume"
    assert isinstance(json.loads(call.function.arguments)["level"], int)
    stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], tools=volume,
                                            tool_choice=choice, max_tokens=120, stream=True)
    name, args, finish = "", "", None
    for chunk in stream:
        delta = chunk.choices[0].delta
        for tc in delta.tool_calls or []:
            name += tc.function.name or ""
            args += tc.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert name == "set_volume" and finish == "tool_calls"
    assert isinstance(json.loads(args)["level"], int)
