"""Handoff inside Engine.complete against real HTTP servers on 127.0.0.1.

Every failure returns the local answer with the right reason and never raises;
nothing leaves the device when handoff is disabled; personal data is redacted
before it is sent and restored in the answer; keys never reach logs or results.
"""

from __future__ import annotations

import json
import socket

import pytest
from cloud_servers import Reply, sse
from conftest import ANTHROPIC_KEY, GEMINI_KEY, OPENAI_KEY

import cactus_core as cactus
from tinymodel import make_chat_model

TOOLS = [{"type": "function", "function": {
    "name": "send_message", "description": "Send a text message",
    "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "body": {"type": "string"}},
                   "required": ["to", "body"]}}}]
USER = [{"role": "user", "content": "Text bob@example.com that I'm late, or call +1 415 555 0199"}]


def chat_reply(content="Cloud says hi", tool_calls=None):
    msg = {"role": "assistant", "content": content}
    if tool_calls:
        msg["tool_calls"] = tool_calls
    return Reply(json={"id": "x", "object": "chat.completion", "model": "big-cloud",
                       "choices": [{"index": 0, "message": msg, "finish_reason": "stop"}],
                       "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return make_chat_model(tmp_path_factory.mktemp("handoff") / "tiny")


@pytest.fixture
def engine(model_dir, register_plugin, server):
    import cactus_cloud.plugin

    register_plugin(cactus_cloud.plugin, name="cloud")
    cloud = {"provider": "openai", "model": "big-cloud", "api_base": server.url + "/v1",
             "api_key": OPENAI_KEY, "retry_backoff_s": 0.05, "max_retries": 1}
    return cactus.load(model_dir, router="always_cloud", cloud=cloud, cloud_timeout_ms=1500)


def local_only(r):
    assert r["success"] and not r["cloud_handoff"]
    assert r["decode_tokens"] > 0 and r["confidence"] == 0.0 and r["confidence_threshold"] == 0.7


def test_correct_answer_from_the_cloud_skips_local_decoding(engine, server, no_key_leaks):
    server.script(chat_reply())
    r = engine.complete(USER, max_tokens=8)
    assert r["success"] and r["cloud_handoff"] and r["cloud_handoff_reason"] == "low_confidence"
    assert r["response"] == "Cloud says hi" and r["tier"] == "cloud" and r["decode_tokens"] == 0
    sent = server.requests[0].json
    assert sent["messages"][-1]["role"] == "user"
    no_key_leaks(json.dumps(r))


def test_tool_call_round_trip_and_redaction(engine, server):
    call = {"id": "c1", "type": "function", "function": {
        "name": "send_message", "arguments": json.dumps({"to": "[EMAIL_1]", "body": "running late"})}}
    server.script(chat_reply(content=None, tool_calls=[call]))
    r = engine.complete(USER, tools=TOOLS, max_tokens=8)
    assert r["cloud_handoff"]
    assert r["function_calls"] == [{"name": "send_message", "arguments": {"to": "bob@example.com", "body": "running late"}}]
    sent = json.dumps(server.requests[0].json)
    assert "bob@example.com" not in sent and "555 0199" not in sent
    assert "[EMAIL_1]" in sent and "[PHONE_1]" in sent
    assert {"type": "email", "count": 1} in r["redactions"] and {"type": "phone", "count": 1} in r["redactions"]
    assert sent.count("send_message") >= 1  # the tools went along


PROVIDERS = {"openai": ("/v1", OPENAI_KEY), "anthropic": ("", ANTHROPIC_KEY), "gemini": ("", GEMINI_KEY)}


@pytest.mark.parametrize("provider", sorted(PROVIDERS))
@pytest.mark.parametrize("reply,reason", [
    (Reply(delay_s=3.0, json={}), "cloud_timeout"),
    (Reply(500, json={"error": {"message": "boom"}}), "cloud_error: 500"),
    (Reply(429, headers={"Retry-After": "30"}, json={"error": {"message": "slow down"}}), "cloud_error: 429"),
    (Reply(body=b"{not json", headers={"Content-Type": "application/json"}), "cloud_error"),
])
def test_failures_fall_back_to_the_local_answer(model_dir, register_plugin, server, provider, reply, reason):
    import cactus_cloud.plugin

    register_plugin(cactus_cloud.plugin, name="cloud")
    suffix, key = PROVIDERS[provider]
    engine = cactus.load(model_dir, router="always_cloud", cloud_timeout_ms=1500, cloud={
        "provider": provider, "model": "m", "api_base": server.url + suffix, "api_key": key,
        "retry_backoff_s": 0.05, "max_retries": 1})
    server.script(reply, reply)
    r = engine.complete(USER, max_tokens=4)
    local_only(r)
    assert r["cloud_handoff_reason"] == reason and "cloud_error" in r


def test_retry_after_is_honoured_then_succeeds(engine, server):
    server.script(Reply(429, headers={"Retry-After": "0.2"}, json={"error": {"message": "later"}}), chat_reply())
    r = engine.complete(USER, max_tokens=4)
    assert r["cloud_handoff"] and len(server.requests) == 2


def test_connection_refused(model_dir, register_plugin):
    import cactus_cloud.plugin

    register_plugin(cactus_cloud.plugin, name="cloud")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    e = cactus.load(model_dir, router="always_cloud", cloud_timeout_ms=1000, cloud={
        "provider": "openai", "model": "m", "api_base": f"http://127.0.0.1:{port}/v1", "api_key": "k" * 20,
        "max_retries": 0})
    r = e.complete(USER, max_tokens=4)
    local_only(r)
    assert r["cloud_handoff_reason"] == "cloud_error"


def test_stream_cut_in_the_middle(engine, server):
    chunks = sse({"choices": [{"index": 0, "delta": {"content": "Hel"}}]})
    server.script(Reply(chunks=chunks, headers={"Content-Type": "text/event-stream"}, cut=True))
    pieces = []
    r = engine.complete(USER, max_tokens=4, on_token=pieces.append)
    local_only(r)
    assert r["cloud_handoff_reason"].startswith("cloud_error") or r["cloud_handoff_reason"] == "cloud_timeout"


def test_no_provider_and_disabled(model_dir, monkeypatch):
    e = cactus.load(model_dir, router="always_cloud")
    r = e.complete(USER, max_tokens=3)
    local_only(r)
    assert r["cloud_handoff_reason"] == "no_provider"
    monkeypatch.setenv("CACTUS_DISABLE_CLOUD_HANDOFF", "1")
    assert e.complete(USER, max_tokens=3)["cloud_handoff_reason"] == "disabled"


def test_disabled_handoff_opens_no_connection(engine, server, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a socket was opened while cloud handoff is disabled")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    r = engine.complete(USER, max_tokens=3, cloud=False)
    local_only(r)
    assert r["cloud_handoff_reason"] == "disabled" and server.requests == []


def test_multi_turn_across_sides(engine, server):
    server.script(chat_reply("The cloud answered turn one."))
    convo = [{"role": "user", "content": "first question"}]
    first = engine.complete(convo, max_tokens=4)
    assert first["cloud_handoff"]
    convo += [{"role": "assistant", "content": first["response"]}, {"role": "user", "content": "and then?"}]
    second = engine.complete(convo, max_tokens=4, cloud=False)  # local this time
    assert second["success"] and not second["cloud_handoff"]
    convo += [{"role": "assistant", "content": second["response"]}, {"role": "user", "content": "thanks"}]
    server.script(chat_reply("You're welcome."))
    third = engine.complete(convo, max_tokens=4)
    assert third["cloud_handoff"] and third["response"] == "You're welcome."
    assert len(server.requests[-1].json["messages"]) == 5


def test_tiers_small_local_then_large_local(model_dir, tmp_path):
    big = make_chat_model(tmp_path / "big", seed=1)
    e = cactus.load(model_dir, router="always_cloud",
                    tiers=[{"model": big, "confidence_threshold": 0.0}])
    r = e.complete(USER, max_tokens=4)
    assert r["success"] and r["tier"] == "big" and not r["cloud_handoff"]
    assert r["model"] == "tiny"


def test_keys_never_in_errors_or_logs(engine, server, no_key_leaks):
    server.script(Reply(401, json={"error": {"message": f"bad key {OPENAI_KEY}"}}))
    r = engine.complete(USER, max_tokens=3)
    local_only(r)
    no_key_leaks(json.dumps(r), repr(engine.options.get("cloud", {}).get("model")))


@pytest.mark.parametrize("choice,wire", [
    ("required", "required"),
    ({"type": "function", "function": {"name": "send_message"}},
     {"type": "function", "function": {"name": "send_message"}}),
])
def test_forced_tool_choice_reaches_the_cloud(engine, server, choice, wire):
    """A request that must call a tool keeps that demand when the cloud answers it."""
    call = {"id": "c1", "type": "function", "function": {"name": "send_message", "arguments": "{}"}}
    server.script(chat_reply(content=None, tool_calls=[call]))
    short = [{"role": "user", "content": "Text Bob"}]  # the tiny model's context is 512 tokens
    r = engine.complete(short, tools=TOOLS, max_tokens=8, tool_choice=choice)
    assert r["cloud_handoff"] and r["function_calls"][0]["name"] == "send_message", r
    assert server.requests[0].json["tool_choice"] == wire
    server.script(chat_reply())
    engine.complete(short, tools=TOOLS, max_tokens=8)  # auto: nothing forced on the wire
    assert "tool_choice" not in server.requests[1].json


@pytest.mark.parametrize("provider,name,key,want", [
    ("anthropic", "send_message", "tool_choice", {"type": "tool", "name": "send_message"}),
    ("anthropic", "", "tool_choice", {"type": "any"}),
    ("gemini", "send_message", "toolConfig",
     {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["send_message"]}}),
    ("gemini", "", "toolConfig", {"functionCallingConfig": {"mode": "ANY"}}),
])
def test_forced_tool_choice_in_each_providers_wire_format(make_provider, provider, name, key, want):
    p = make_provider(provider)
    body = p.request_body(USER, [], 8, 0.0, False)
    p.force_tool(body, name)
    assert body[key] == want


def test_forced_tool_choice_must_name_an_offered_tool(make_provider):
    from cactus_core.errors import CloudError

    p = make_provider("openai")
    for tools, choice in ((TOOLS, "make_call"), (None, ""), (TOOLS, 3)):
        with pytest.raises(CloudError, match="tool_choice"):
            p.complete(USER, tools, max_tokens=8, temperature=0.0, timeout_s=1.0, tool_choice=choice)
