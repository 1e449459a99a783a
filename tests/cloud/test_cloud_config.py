"""cactus_cloud.config: environment, overrides, headers, and where keys may go."""

from __future__ import annotations

import pytest
from cactus_core.errors import CloudError

from cactus_cloud.config import from_env, official_host, parse_headers
from cloud_servers import Reply
from conftest import ALL_KEYS, ANTHROPIC_KEY, GEMINI_KEY, OPENAI_KEY

VENDOR_KEYS = {"OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": ANTHROPIC_KEY, "GEMINI_API_KEY": GEMINI_KEY}


def test_nothing_configured_is_none(monkeypatch):
    assert from_env() is None
    for var, key in VENDOR_KEYS.items():
        monkeypatch.setenv(var, key)
    # a vendor key in the shell is not an opt-in to sending prompts to the cloud
    assert from_env() is None


def test_vendor_key_goes_to_its_own_provider_only(monkeypatch):
    for var, key in VENDOR_KEYS.items():
        monkeypatch.setenv(var, key)
    monkeypatch.setenv("CACTUS_CLOUD_PROVIDER", "anthropic")
    cfg = from_env()
    assert cfg == {"provider": "anthropic", "model": "claude-haiku-4-5", "api_base": "https://api.anthropic.com",
                   "api_key": ANTHROPIC_KEY, "headers": {}}
    assert from_env({"provider": "gemini"})["api_key"] == GEMINI_KEY
    assert from_env({"provider": "openai"})["api_key"] == OPENAI_KEY
    # a third-party provider never inherits a vendor key
    assert from_env({"provider": "ollama"})["api_key"] is None


@pytest.mark.parametrize("base", ["http://127.0.0.1:8000/v1", "https://my-proxy.example.com/v1",
                                  "http://api.openai.com/v1", "https://api.openai.com.evil.example/v1"])
def test_vendor_key_is_withheld_from_other_hosts(monkeypatch, base):
    for var, key in VENDOR_KEYS.items():
        monkeypatch.setenv(var, key)
    monkeypatch.setenv("CACTUS_CLOUD_API_BASE", base)
    cfg = from_env()
    assert cfg["provider"] == "openai" and cfg["api_base"] == base and cfg["api_key"] is None
    monkeypatch.setenv("CACTUS_CLOUD_API_KEY", "explicit-key-for-this-endpoint")
    assert from_env()["api_key"] == "explicit-key-for-this-endpoint"


def test_official_host():
    assert official_host("openai", None) and official_host("openai", "https://api.openai.com/v1/")
    assert official_host("anthropic", "https://API.anthropic.com")
    assert not official_host("anthropic", "https://api.openai.com")
    assert not official_host("gemini", "http://generativelanguage.googleapis.com")
    assert not official_host("custom", "https://x.example")


def test_overrides_win_and_provider_is_inferred(monkeypatch):
    monkeypatch.setenv("CACTUS_CLOUD_MODEL", "gemini-2.0-flash")
    monkeypatch.setenv("CACTUS_CLOUD_MAX_RETRIES", "4")
    cfg = from_env()
    assert cfg["provider"] == "gemini" and cfg["max_retries"] == 4
    assert cfg["api_base"] == "https://generativelanguage.googleapis.com"
    cfg = from_env({"model": "claude-sonnet-4-5", "api_key": None, "headers": {"X-Team": "robots"}})
    assert cfg["provider"] == "anthropic" and cfg["model"] == "claude-sonnet-4-5"
    assert cfg["headers"] == {"X-Team": "robots"}
    assert from_env({"model": "llama-3.1-8b"})["provider"] == "openai"
    monkeypatch.setenv("CACTUS_CLOUD_MAX_RETRIES", "lots")
    with pytest.raises(CloudError, match="whole number"):
        from_env()


def test_parse_headers_forms_and_errors():
    assert parse_headers('{"X-A": "1", "X-B": 2}') == {"X-A": "1", "X-B": "2"}
    assert parse_headers("X-A=1, X-B = two=2 ,") == {"X-A": "1", "X-B": "two=2"}
    assert parse_headers(None) == {} and parse_headers({"k": "v"}) == {"k": "v"}
    for bad, match in [("{not json", "not valid JSON"), ("[1]", "JSON object or"), ("X-A=1,Bearer s3cr3t-value", "entry 2"),
                       ({"Bad Name": "v"}, "header 1"), ({"X": "a\nb"}, "line break")]:
        with pytest.raises(CloudError, match=match) as info:
            parse_headers(bad)
        assert "s3cr3t" not in str(info.value)


def test_env_config_end_to_end_sends_no_stray_key(server, monkeypatch, no_key_leaks):
    """A custom endpoint configured from env gets only what was meant for it."""
    from cactus_cloud.openai import OpenAIProvider

    for var, key in VENDOR_KEYS.items():
        monkeypatch.setenv(var, key)
    monkeypatch.setenv("CACTUS_CLOUD_API_BASE", server.url + "/v1")
    monkeypatch.setenv("CACTUS_CLOUD_MODEL", "local-llama")
    monkeypatch.setenv("CACTUS_CLOUD_HEADERS", "X-Tenant=robots")
    server.script(Reply(json={"model": "local-llama", "choices": [{"message": {"content": "hi there"}}]}))
    cfg = from_env()
    with OpenAIProvider(cfg) as provider:
        out = provider.complete([{"role": "user", "content": "hi"}], max_tokens=8, temperature=0, timeout_s=5)
    assert out["response"] == "hi there"
    req = server.requests[0]
    assert "authorization" not in req.headers and req.headers["x-tenant"] == "robots"
    assert not any(key in " ".join(req.headers.values()) for key in ALL_KEYS)
    events = no_key_leaks(repr(cfg.get("api_key")))
    assert any(e["event"] == "cloud_vendor_key_withheld" for e in events)
