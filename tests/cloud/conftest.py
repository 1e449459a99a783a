"""Fixtures for the cactus-cloud tests: local servers, keys, clean env."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Use the source tree when the distributions are not installed (a fresh clone).
for path in (ROOT, ROOT / "plugins" / "cloud"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from cloud_servers import ScriptedServer  # noqa: E402

# Keys shaped like real ones, long enough for the half-masked-echo redaction.
OPENAI_KEY = "sk-test-OPENAI-5f1d2c3b4a69788796a5b4c3"
ANTHROPIC_KEY = "sk-ant-test-ANTHROPIC-9e8d7c6b5a4f3e2d1c0b"
GEMINI_KEY = "AIzaTest-GEMINI-0123456789abcdefghijklmn"
ALL_KEYS = (OPENAI_KEY, ANTHROPIC_KEY, GEMINI_KEY)

_ENV_VARS = (
    "CACTUS_CLOUD_PROVIDER",
    "CACTUS_CLOUD_MODEL",
    "CACTUS_CLOUD_API_BASE",
    "CACTUS_CLOUD_API_KEY",
    "CACTUS_CLOUD_HEADERS",
    "CACTUS_CLOUD_MAX_RETRIES",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """No cloud or proxy settings leak in from the developer's shell."""
    for var in _ENV_VARS:
        monkeypatch.delenv(var, raising=False)
    yield


@pytest.fixture(scope="session")
def _server():
    server = ScriptedServer()
    yield server
    server.close()


@pytest.fixture
def server(_server):
    """The scripted 127.0.0.1 server, emptied before each test."""
    _server.reset()
    yield _server
    _server.reset()


@pytest.fixture
def make_provider(server):
    """Build a provider pointed at the scripted server; closes them afterwards."""
    from cactus_cloud.anthropic import AnthropicProvider
    from cactus_cloud.gemini import GeminiProvider
    from cactus_cloud.openai import OpenAIProvider

    classes = {"openai": OpenAIProvider, "anthropic": AnthropicProvider, "gemini": GeminiProvider}
    keys = {"openai": OPENAI_KEY, "anthropic": ANTHROPIC_KEY, "gemini": GEMINI_KEY}
    built = []

    def make(name, **config):
        base = server.url + ("/v1" if name == "openai" else "")
        cfg = {"model": f"{name}-test-model", "api_base": base, "api_key": keys[name],
               "retry_backoff_s": 0.05, **config}
        provider = classes[name](cfg)
        built.append(provider)
        return provider

    yield make
    for p in built:
        p.close()


@pytest.fixture
def no_key_leaks(caplog, capsys):
    """Capture every log channel; the test calls ``check()`` at its end."""
    import logging

    import structlog

    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:

        def check(*extra_text):
            out, err = capsys.readouterr()
            blob = "\n".join([caplog.text, repr(events), out, err, *map(str, extra_text)])
            for key in ALL_KEYS:
                assert key not in blob
                assert key[:12] not in blob and key[-12:] not in blob
            return events

        yield check

