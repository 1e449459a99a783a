"""cactus-cloud and a third-party provider, found through the plugin manager."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cactus_core import plugins
from cactus_core.errors import CloudError

from cloud_servers import Reply
from distributions import autoloading
from distributions import installed as install_distributions

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


@pytest.fixture
def manual_pm(monkeypatch):
    """A plugin manager without entry points, with cactus_cloud registered by hand."""
    import cactus_cloud.plugin

    monkeypatch.setenv("CACTUS_DISABLE_PLUGIN_AUTOLOAD", "1")
    plugins.reset_plugin_manager()
    pm = plugins.get_plugin_manager()
    pm.register(cactus_cloud.plugin, name="cloud")
    yield pm
    pm.unregister(name="cloud")
    plugins.reset_plugin_manager()


def test_hook_registers_the_three_providers(manual_pm, server):
    providers = plugins.cloud_providers()
    assert {"openai", "anthropic", "gemini"} <= set(providers)
    server.script(Reply(json={"type": "message", "model": "m", "content": [{"type": "text", "text": "via hook"}]}))
    provider = providers["anthropic"]({"model": "claude-x", "api_base": server.url, "api_key": "k" * 20,
                                       "headers": {}})
    try:
        out = provider.complete([{"role": "user", "content": "hi"}], max_tokens=4, temperature=0, timeout_s=5)
    finally:
        provider.close()
    assert out["response"] == "via hook"


def test_factory_rejects_bad_config(manual_pm):
    factory = plugins.cloud_providers()["openai"]
    for config, match in [({"api_base": "ftp://x"}, "http"), ({"max_retries": -1}, "max_retries"),
                          ({"headers": "no-equals-sign"}, "entry 1"), ({"api_key": 123}, "api_key")]:
        with pytest.raises(CloudError, match=match):
            factory(config)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """Build and install cactus-cloud and the example provider as distributions.

    Sources are copied first so the build leaves nothing in the tree.
    """
    with install_distributions([ROOT / "plugins" / "cloud", HERE / "example_provider"], tmp_path_factory.mktemp("dists"),
                   ("cactus_example_provider",)) as target:
        yield target


@pytest.fixture
def autoload(monkeypatch, installed):
    with autoloading(monkeypatch, "cloud,example_ollama"):
        yield


def test_entry_points_register_builtin_and_third_party(autoload, installed):
    assert {"cloud", "example_ollama"} <= set(plugins.plugin_names())
    providers = plugins.cloud_providers()
    assert {"openai", "anthropic", "gemini", "ollama"} <= set(providers)
    # the example really came from the installed distribution
    import cactus_example_provider

    assert Path(cactus_example_provider.__file__).is_relative_to(installed)


def test_third_party_provider_is_callable(autoload, server, no_key_leaks):
    factory = plugins.cloud_providers()["ollama"]
    key = "sk-test-OPENAI-5f1d2c3b4a69788796a5b4c3"  # reuse a watched key
    provider = factory({"model": "qwen3:0.6b", "api_base": server.url, "api_key": key, "headers": {}})
    tools = [{"type": "function", "function": {"name": "add", "description": "a+b",
                                               "parameters": {"type": "object", "properties": {}}}}]
    server.script(
        Reply(503, json={"error": "loading model"}),  # retried by the shared transport
        Reply(json={"model": "qwen3:0.6b", "done": True, "message": {
            "role": "assistant", "content": "", "tool_calls": [{"function": {"name": "add", "arguments": {"a": 1, "b": 2}}}]}}),
        Reply(chunks=[json.dumps({"model": "qwen3:0.6b", "message": {"content": t}, "done": False}).encode() + b"\n"
                      for t in ("Three", ".")] + [b'{"model": "qwen3:0.6b", "message": {"content": ""}, "done": true}\n']),
        Reply(chunks=[b'{"message": {"content": "cut"}, "done": false}\n']),
    )
    try:
        out = provider.complete([{"role": "user", "content": "1+2?"}], tools, max_tokens=9, temperature=0, timeout_s=5)
        assert out == {"response": "", "function_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}],
                       "model": "qwen3:0.6b"}
        body = server.requests[1].json
        assert server.requests[1].path == "/api/chat" and body["stream"] is False
        assert body["options"] == {"temperature": 0.0, "num_predict": 9} and body["tools"] == tools
        assert server.requests[1].headers["authorization"] == f"Bearer {key}"

        tokens = []
        out = provider.complete([{"role": "user", "content": "1+2?"}], max_tokens=9, temperature=0, timeout_s=5,
                                on_token=tokens.append)
        assert tokens == ["Three", "."] and out["response"] == "Three."
        with pytest.raises(CloudError, match="ollama: .*before done=true"):
            provider.complete([{"role": "user", "content": "1+2?"}], max_tokens=9, temperature=0, timeout_s=5,
                              on_token=tokens.append)
    finally:
        provider.close()
    no_key_leaks(repr(provider))
