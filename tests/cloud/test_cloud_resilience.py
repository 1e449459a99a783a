"""Retries, the total time budget, garbage, and secrets, for every provider."""

from __future__ import annotations

import email.utils
import socket
import time

import pytest
from cactus_core.errors import CloudError

from cloud_servers import Reply, sse
from conftest import ALL_KEYS, ANTHROPIC_KEY, GEMINI_KEY, OPENAI_KEY

PROVIDERS = ["openai", "anthropic", "gemini"]
KEYS = {"openai": OPENAI_KEY, "anthropic": ANTHROPIC_KEY, "gemini": GEMINI_KEY}
MSGS = [{"role": "user", "content": "hi"}]
SLACK = 0.5  # seconds past the budget we tolerate (thread wake-ups on a busy CI box)


def ok_body(name: str, text: str = "ok") -> dict:
    if name == "openai":
        return {"model": "m", "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]}
    if name == "anthropic":
        return {"type": "message", "model": "m", "content": [{"type": "text", "text": text}]}
    return {"candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}]}


def first_stream_chunk(name: str) -> list[bytes]:
    """One network chunk carrying the first text delta."""
    return [b"".join(_first_events(name))]


def _first_events(name: str) -> list[bytes]:
    if name == "openai":
        return sse({"choices": [{"index": 0, "delta": {"content": "first"}}]})
    if name == "anthropic":
        return sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                   {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "first"}})
    return sse({"candidates": [{"content": {"role": "model", "parts": [{"text": "first"}]}}]})


def timed(fn):
    t0 = time.monotonic()
    try:
        return fn(), time.monotonic() - t0
    except CloudError as exc:
        return exc, time.monotonic() - t0


@pytest.mark.parametrize("name", PROVIDERS)
def test_500_then_success_is_retried(server, make_provider, name, no_key_leaks):
    server.script(Reply(500, json={"error": {"message": "boom"}}), Reply(502, body=b"<html>bad gateway</html>"),
                  Reply(json=ok_body(name, "recovered")))
    out = make_provider(name).complete(MSGS, max_tokens=5, temperature=0, timeout_s=5)
    assert out["response"] == "recovered"
    assert len(server.requests) == 3
    events = no_key_leaks()
    retries = [e for e in events if e["event"] == "cloud_retry"]
    assert [e["attempt"] for e in retries] == [1, 2] and "HTTP 500" in retries[0]["reason"]


@pytest.mark.parametrize("name", PROVIDERS)
def test_429_retry_after_is_honoured(server, make_provider, name):
    server.script(Reply(429, headers={"retry-after": "0.4"}, json={"error": {"message": "slow down"}}),
                  Reply(json=ok_body(name)))
    out, took = timed(lambda: make_provider(name).complete(MSGS, max_tokens=5, temperature=0, timeout_s=5))
    assert out["response"] == "ok" and len(server.requests) == 2
    assert 0.4 <= took < 2.0


def test_retry_after_as_http_date_and_ms(server, make_provider):
    date = email.utils.formatdate(time.time() + 1.6, usegmt=True)  # whole seconds: 0.6 - 1.6 s away
    server.script(Reply(503, headers={"retry-after": date}), Reply(json=ok_body("openai")))
    out, took = timed(lambda: make_provider("openai").complete(MSGS, max_tokens=5, temperature=0, timeout_s=5))
    assert out["response"] == "ok" and 0.5 <= took < 2.5
    server.script(Reply(429, headers={"retry-after-ms": "250", "retry-after": "1"}), Reply(json=ok_body("openai")))
    out, took = timed(lambda: make_provider("openai").complete(MSGS, max_tokens=5, temperature=0, timeout_s=5))
    assert out["response"] == "ok" and 0.25 <= took < 0.9


@pytest.mark.parametrize("name", PROVIDERS)
def test_retry_after_beyond_budget_fails_at_once(server, make_provider, name):
    server.script(Reply(429, headers={"retry-after": "30"}, json={"error": {"message": "rate limited"}}))
    err, took = timed(lambda: make_provider(name).complete(MSGS, max_tokens=5, temperature=0, timeout_s=2))
    assert isinstance(err, CloudError) and took < 0.5
    assert "HTTP 429" in str(err) and "rate limited" in str(err) and "retry after 30s" in str(err)
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", PROVIDERS)
def test_always_failing_server_gives_up(server, make_provider, name):
    server.script(*[Reply(503, json={"error": {"message": "overloaded"}})] * 5)
    err, took = timed(lambda: make_provider(name, max_retries=2).complete(
        MSGS, max_tokens=5, temperature=0, timeout_s=5))
    assert isinstance(err, CloudError)
    assert "HTTP 503" in str(err) and "overloaded" in str(err) and "3 attempts" in str(err)
    assert len(server.requests) == 3 and took < 2


@pytest.mark.parametrize("name", PROVIDERS)
def test_client_errors_are_not_retried(server, make_provider, name):
    server.script(Reply(404, json={"error": {"message": "model 'x' not found"}}), Reply(json=ok_body(name)))
    with pytest.raises(CloudError, match=r"^" + name + r": HTTP 404 from 127\.0\.0\.1: model 'x' not found$"):
        make_provider(name).complete(MSGS, max_tokens=5, temperature=0, timeout_s=5)
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("stream", [False, True])
def test_server_sleeping_past_budget(server, make_provider, name, stream):
    server.script(Reply(delay_s=5, json=ok_body(name)))
    on_token = (lambda t: None) if stream else None
    err, took = timed(lambda: make_provider(name).complete(
        MSGS, max_tokens=5, temperature=0, timeout_s=0.6, on_token=on_token))
    assert isinstance(err, CloudError) and "timed out after the 0.6s budget" in str(err)
    assert took < 0.6 + SLACK


@pytest.mark.parametrize("name", PROVIDERS)
def test_stream_stalling_mid_reply_is_cut_at_budget(server, make_provider, name):
    server.script(Reply(chunks=first_stream_chunk(name) + [b": keep-alive\n\n"], stall_after=1))
    tokens = []
    err, took = timed(lambda: make_provider(name).complete(
        MSGS, max_tokens=5, temperature=0, timeout_s=0.8, on_token=tokens.append))
    assert isinstance(err, CloudError) and "timed out" in str(err)
    assert tokens == ["first"] and took < 0.8 + SLACK


def test_trickling_body_cannot_outlive_budget(server, make_provider):
    # each piece arrives well within a per-read timeout; only a total budget stops it
    body = b'{"choices": [{"index": 0, "message": {"content": "' + b"x" * 40 + b'"}}]}'
    pieces = [body[i:i + 4] for i in range(0, len(body), 4)]
    server.script(Reply(chunks=pieces, chunk_delay_s=0.1, headers={"content-type": "application/json"}))
    err, took = timed(lambda: make_provider("openai").complete(MSGS, max_tokens=5, temperature=0, timeout_s=0.7))
    assert isinstance(err, CloudError) and "timed out" in str(err) and took < 0.7 + SLACK


def test_connection_cut_mid_body_is_retried(server, make_provider):
    server.script(Reply(json=ok_body("openai", "lost"), cut=True), Reply(json=ok_body("openai", "second try")))
    out = make_provider("openai").complete(MSGS, max_tokens=5, temperature=0, timeout_s=5)
    assert out["response"] == "second try" and len(server.requests) == 2


@pytest.mark.parametrize("name", PROVIDERS)
@pytest.mark.parametrize("body", [b"<html><body>Welcome to nginx!</body></html>", b"", b"\x00\xff\xfe garbage",
                                  b'{"choices": [{"index": 0, "message": {"content": "trun'])
def test_garbage_bodies(server, make_provider, name, body):
    server.script(Reply(body=body))
    with pytest.raises(CloudError, match=rf"^{name}: .*(not JSON|unexpected reply)"):
        make_provider(name).complete(MSGS, max_tokens=5, temperature=0, timeout_s=5)
    assert len(server.requests) == 1


def test_unreachable_host_fails_within_budget(make_provider):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens here now
    p = make_provider("anthropic", api_base=f"http://127.0.0.1:{port}", max_retries=3)
    err, took = timed(lambda: p.complete(MSGS, max_tokens=5, temperature=0, timeout_s=1))
    assert isinstance(err, CloudError) and "cannot reach 127.0.0.1 (ConnectError)" in str(err)
    assert took < 1 + SLACK


def test_redirects_are_not_followed(server, make_provider):
    server.script(Reply(307, headers={"location": "http://example.invalid/steal"}, body=b""))
    with pytest.raises(CloudError, match="HTTP 307"):
        make_provider("anthropic").complete(MSGS, max_tokens=5, temperature=0, timeout_s=5)
    assert len(server.requests) == 1


@pytest.mark.parametrize("name", PROVIDERS)
def test_key_never_in_errors_or_logs(server, make_provider, name, no_key_leaks):
    key = KEYS[name]
    masked = f"{key[:8]}****{key[-4:]}"
    # vendors echo keys back, in full or half-masked; retried first, then fatal
    server.script(Reply(500, json={"error": {"message": f"upstream rejected key {key}"}}),
                  Reply(401, json={"error": {"message": f"Incorrect API key provided: {masked}. Try again."}}))
    p = make_provider(name, headers={"X-Proxy-Token": "proxy-secret-token-abcdef123456"})
    with pytest.raises(CloudError) as info:
        p.complete(MSGS, max_tokens=5, temperature=0, timeout_s=5)
    msg = str(info.value)
    assert "HTTP 401" in msg and "Incorrect API key provided" in msg
    assert key[:8] not in msg and "proxy-secret" not in msg
    assert server.requests[0].headers["x-proxy-token"] == "proxy-secret-token-abcdef123456"
    assert "\n" not in msg
    no_key_leaks(msg, repr(p), repr(info.value.args), info.value.__cause__)
    assert all(key not in repr(vars(p)) for key in ALL_KEYS)


def test_budget_is_shared_by_retries(server, make_provider):
    # each attempt is quick, but back-offs would push past the budget: stop in time
    server.script(*[Reply(500, delay_s=0.25)] * 10)
    err, took = timed(lambda: make_provider("gemini", max_retries=10, retry_backoff_s=0.2).complete(
        MSGS, max_tokens=5, temperature=0, timeout_s=1.0))
    assert isinstance(err, CloudError) and took < 1.0 + SLACK
    assert "HTTP 500" in str(err) or "timed out" in str(err)
